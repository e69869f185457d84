"""textworld's context-sensitive grammar derivation without re-parsing and without deep copies.

``ContextSensitiveGrammar.derive`` re-parses its start text with tatsu on every call, deep-copies
the rule's symbols and every context at every expansion (~54 parses and ~27,000 ``deepcopy``
calls per ALFWorld step). :class:`FastDeriver` walks the same parsed grammar with the same rules
(first applicable production, conditional queries in ``State.all_assignments`` order, lists
joined with the grammar's separators, ``{expr}`` evaluated with the context's variables) but:

- parses a start text once per process (the parse is a pure function of the text);
- never mutates a symbol: it keeps ``(symbol, context)`` pairs on its own stack;
- never copies a context: textworld copies them only so that ``query`` can extend a copy, and a
  context here is never modified after it is made.

It is used only by this project's engine objects; textworld's own classes are untouched.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Any

from ..._optional import require

_textgen = require("textworld.envs.pddl.textgen", "alfworld")
_logic = require("textworld.logic", "alfworld")

TerminalSymbol = _textgen.TerminalSymbol
NonterminalSymbol = _textgen.NonterminalSymbol
ConditionalSymbol = _textgen.ConditionalSymbol
EvalSymbol = _textgen.EvalSymbol
ListSymbol = _textgen.ListSymbol

_PARSES: dict[str, tuple] = {}
_QUERIES: dict[str, Any] = {}
_CODE: dict[str, Any] = {}
_LOCK = threading.Lock()
_LIST_EMPTY = NonterminalSymbol("list_empty")
_LIST_SEPARATOR = NonterminalSymbol("list_separator")
_LIST_LAST_SEPARATOR = NonterminalSymbol("list_last_separator")


def parse_symbols(text: str) -> tuple:
    """textworld's parse of ``text`` as grammar symbols, memoized (never mutate the result)."""
    found = _PARSES.get(text)
    if found is None:
        with _LOCK:  # textworld's module-level tatsu parser is not reentrant
            found = _PARSES.get(text)
            if found is None:
                try:
                    found = _PARSES[text] = tuple(_textgen._parse_and_convert(text, rule_name="symbols"))
                finally:
                    forget_last_parse(_textgen._PARSER)
    return found


def forget_last_parse(parser: Any) -> None:
    """Drop what a tatsu parser keeps of its last parse.

    tatsu keeps the furthest failure of the last parse, whose traceback frames reach (through
    ``f_back``) the caller's frames, and textworld's parsers are module-level: without this, the
    last env to parse stays alive until the next parse anywhere in the process.
    """
    parser._furthest_exception = None
    parser._tokenizer = None
    parser._last_node = None


def conjunctive_query(expression: str):
    """``Rule.parse_conjunctive_query(expression)``, memoized."""
    found = _QUERIES.get(expression)
    if found is None:
        with _LOCK:
            found = _QUERIES.get(expression)
            if found is None:
                found = _QUERIES[expression] = _logic.Rule.parse_conjunctive_query(expression)
    return found


def _compiled(expression: str):
    code = _CODE.get(expression)
    if code is None:
        code = _CODE[expression] = compile(expression, "<grammar>", "eval")
    return code


def _query(expression: str, context: Mapping[str, Any]) -> list[dict[str, Any]]:
    """textworld's ``query``: one extended context per assignment of the query in the state."""
    rule = conjunctive_query(expression)
    infos = context["entity_infos"]
    contexts = []
    for mapping in context["state"].all_assignments(rule, context["mapping"]):
        variables = dict(context["variables"])
        variables.update({ph.name: infos[var.name] for ph, var in mapping.items()})
        new_mapping = dict(context["mapping"])
        new_mapping.update(mapping)
        contexts.append({**context, "variables": variables, "mapping": new_mapping})
    return contexts


class FastDeriver:
    """Derives text from one game's ``ContextSensitiveGrammar`` like its ``derive`` method does."""

    def __init__(self, grammar: Any) -> None:
        self._rules = grammar._rules

    def derive(self, start: str, context: Mapping[str, Any]) -> str:
        """The text ``grammar.derive(start, context)`` returns."""
        stack = [(symbol, context) for symbol in reversed(parse_symbols(start))]
        out: list[str] = []
        while stack:
            symbol, ctx = stack.pop()
            kind = type(symbol)
            if kind is TerminalSymbol:
                out.append(str(symbol.symbol))
            elif kind is NonterminalSymbol:
                stack.extend((s, ctx) for s in reversed(self._replace(symbol, ctx)))
            elif kind is ConditionalSymbol:
                stack.extend((symbol.expression, c) for c in reversed(self._contexts(symbol, ctx)))
            elif kind is EvalSymbol:
                out.append(str(self._eval(symbol, ctx)))
            elif kind is ListSymbol:
                stack.extend(reversed(self._list(symbol, ctx)))
            else:
                raise NotImplementedError(f"Unknown symbol: {kind}")
        return "".join(out)

    def _replace(self, symbol: Any, ctx: Mapping[str, Any]) -> tuple:
        rules = self._rules.get(str(symbol))
        if not rules:
            raise _textgen.CSGUnknownSymbolError(symbol)
        for rule in rules:
            if not rule.condition or any(True for _ in ctx["state"].all_assignments(conjunctive_query(rule.condition), ctx["mapping"])):
                return rule.rhs
        raise IndexError("list index out of range")  # what textworld's rules[0] raises

    @staticmethod
    def _contexts(symbol: Any, ctx: Mapping[str, Any]) -> list:
        return _query(symbol.given, ctx) if symbol.given else [ctx]

    @staticmethod
    def _eval(symbol: Any, ctx: Mapping[str, Any]) -> Any:
        # textworld evaluates with the context's variables in locals() and its module's globals.
        namespace = {"self": symbol, "context": ctx, **ctx["variables"]}
        namespace["self"], namespace["context"] = symbol, ctx
        return eval(_compiled(symbol.expression), vars(_textgen), namespace)

    def _list(self, symbol: Any, ctx: Mapping[str, Any]) -> list:
        inner = symbol.symbol
        if type(inner) is ConditionalSymbol:
            items = [(inner.expression, c) for c in self._contexts(inner, ctx)]
        elif type(inner) is EvalSymbol:
            items = [(TerminalSymbol(self._eval(inner, ctx)), ctx)]
        else:
            raise NotImplementedError(f"list of {type(inner)}")
        if not items:
            return [(_LIST_EMPTY, ctx)]
        if len(items) == 1:
            return items
        out = []
        for item in items[:-1]:
            out += [item, (_LIST_SEPARATOR, ctx)]
        out[-1] = (_LIST_LAST_SEPARATOR, ctx)
        return out + [items[-1]]
