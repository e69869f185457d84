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
_IMPURE: dict[str, bool] = {}
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


def _reads_more(expression: str) -> bool:
    """Whether ``expression`` may read more than the context's variables: it names ``context``,
    ``self`` or a global of textworld's module (its code's names include attribute names, so this
    errs on the side of True)."""
    found = _IMPURE.get(expression)
    if found is None:
        names = set(_compiled(expression).co_names)
        found = _IMPURE[expression] = bool(names & {"context", "self"} or names & vars(_textgen).keys())
    return found


def _compiled(expression: str):
    code = _CODE.get(expression)
    if code is None:
        code = _CODE[expression] = compile(expression, "<grammar>", "eval")
    return code


class FastDeriver:
    """Derives text from one game's ``ContextSensitiveGrammar`` like its ``derive`` method does."""

    def __init__(self, grammar: Any) -> None:
        self._rules = grammar._rules
        #: Signature -> (its facts, the same sorted, their index by bound arguments): textworld
        #: sorts a signature's facts at every depth of every query; here once per content.
        self._sorted: dict[Any, tuple[frozenset, list, dict]] = {}
        #: (rule id, mapping's placeholders) -> what :meth:`_applicable` needs at each depth.
        self._plans: dict[tuple, tuple] = {}
        #: Predicate signature -> the signatures of its subtypes, in ``multi_subtypes`` order.
        self._signatures: dict[Any, list] = {}
        #: While :meth:`derive_with_reads` runs: signature -> the facts of it the derivation read;
        #: None once it read anything else of the state.
        self._reads: dict[Any, frozenset] | None = None
        self._recording = False

    def derive_with_reads(self, start: str, context: Mapping[str, Any]) -> tuple[str, tuple | None]:
        """:meth:`derive`, and what of the state the text depends on: ``((signature, its facts),
        ...)`` for the fact sets its queries read, or None when it read anything else (the
        variables of a type, for placeholders no fact binds; an expression that names ``context``,
        ``self`` or a global of textworld's module). Given the same ``start``, ``context["mapping"]``
        and entity infos, a state whose facts of those signatures are the same derives the same
        text (see :meth:`facts_of`)."""
        self._reads, self._recording = {}, True
        try:
            text = self.derive(start, context)
            reads = self._reads
        finally:
            self._reads, self._recording = None, False
        return text, None if reads is None else tuple(reads.items())

    def facts_of(self, state: Any, signature: Any) -> frozenset:
        """The state's facts of ``signature`` as a frozenset (the one kept for :meth:`_candidates`)."""
        return self._sorted_entry(state, signature)[0]

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
            if not rule.condition or any(True for _ in self._assignments(ctx["state"], conjunctive_query(rule.condition), ctx["mapping"])):
                return rule.rhs
        raise IndexError("list index out of range")  # what textworld's rules[0] raises

    def _contexts(self, symbol: Any, ctx: Mapping[str, Any]) -> list:
        return self._query(symbol.given, ctx) if symbol.given else [ctx]

    def _query(self, expression: str, context: Mapping[str, Any]) -> list[dict[str, Any]]:
        """textworld's ``query``: one extended context per assignment of the query in the state."""
        rule = conjunctive_query(expression)
        infos = context["entity_infos"]
        contexts = []
        for mapping in self._assignments(context["state"], rule, context["mapping"]):
            variables = dict(context["variables"])
            variables.update({ph.name: infos[var.name] for ph, var in mapping.items()})
            new_mapping = dict(context["mapping"])
            new_mapping.update(mapping)
            contexts.append({**context, "variables": variables, "mapping": new_mapping})
        return contexts

    def _assignments(self, state: Any, rule: Any, mapping: Mapping[Any, Any] | None):
        """``state.all_assignments(rule, mapping)`` (textworld's ``State``, ``partial=False``): the
        same assignments in the same order, without sorting and scanning every fact of a signature
        at every depth (see :meth:`_candidates`)."""
        mapping = {} if mapping is None else dict(mapping)
        key = (id(rule), tuple(mapping))  # rules are memoized by conjunctive_query: ids are stable
        plan = self._plans.get(key)
        if plan is None:
            plan = self._plans[key] = self._plan(state, rule, mapping)
        return self._applicable(state, plan, mapping, set(mapping.values()), 0)

    def _plan(self, state: Any, rule: Any, mapping: Mapping[Any, Any]) -> tuple:
        """Per precondition: (predicate, its new placeholders, the placeholders bound before it and
        their positions, its subtype signatures); then the free placeholders (textworld's
        ``new_phs_by_depth``)."""
        seen_phs = set(mapping)
        depths = []
        for pred in rule.preconditions:
            bound = [(i, ph) for i, ph in enumerate(pred.parameters) if ph in seen_phs]
            new_phs = []
            for ph in pred.parameters:
                if ph not in seen_phs:
                    new_phs.append(ph)
                    seen_phs.add(ph)
            signatures = self._subtype_signatures(state, pred.signature)
            depths.append((pred, new_phs, tuple(ph for _, ph in bound), tuple(i for i, _ in bound), signatures))
        return tuple(depths), [ph for ph in rule.placeholders if ph not in seen_phs]

    def _applicable(self, state, plan, mapping, used_vars, depth):
        """textworld's ``State._all_applicable_assignments`` over :meth:`_candidates`."""
        depths, free_phs = plan
        if depth == len(depths):
            if free_phs and self._recording:
                self._reads = None  # the variables of their types: not recorded
            yield from state._all_assignments(free_phs, mapping, used_vars, False)
            return
        pred, new_phs, bound_phs, positions, signatures = depths[depth]
        values = tuple(mapping.get(ph) for ph in bound_phs)
        for signature in signatures:
            for prop in self._candidates(state, signature, positions, values):
                for ph, var in zip(pred.parameters, prop.arguments):
                    existing = mapping.get(ph)
                    if existing is None:
                        if var in used_vars:
                            break
                        mapping[ph] = var
                        used_vars.add(var)
                    elif existing != var:
                        break
                else:
                    yield from self._applicable(state, plan, mapping, used_vars, depth + 1)
                for ph in new_phs:  # the mapping as it was before this fact
                    used_vars.discard(mapping.pop(ph, None))

    def _subtype_signatures(self, state: Any, signature: Any) -> list:
        found = self._signatures.get(signature)
        if found is None:
            types = state._logic.types
            subtypes = types.multi_subtypes([types.get(t) for t in signature.types])
            found = self._signatures[signature] = [_logic.Signature(signature.name, [t.name for t in ts]) for ts in subtypes]
        return found

    def _candidates(self, state: Any, signature: Any, positions: tuple, values: tuple) -> list:
        """The facts of ``signature`` that textworld's scan would not reject on the arguments
        already bound (``values`` at ``positions``), in its order (sorted).

        textworld sorts all the signature's facts and tries each; a fact whose argument differs
        from an already bound placeholder is rejected with the mapping left as it was, so leaving
        such facts out changes nothing. The sorted facts and their index by bound arguments are
        kept per signature while the state's facts of that signature are the same (compared on
        every call, never assumed).
        """
        found = self._sorted_entry(state, signature)
        if self._reads is not None:
            self._reads[signature] = found[0]
        if not positions:
            return found[1]
        if None in values:  # an unbound placeholder in the given mapping: textworld assigns it
            return found[1]
        index = found[2].get(positions)
        if index is None:
            index = found[2][positions] = {}
            for prop in found[1]:
                args = prop.arguments
                index.setdefault(tuple(args[i] for i in positions), []).append(prop)
        return index.get(values, ())

    def _sorted_entry(self, state: Any, signature: Any) -> tuple:
        facts = state.facts_with_signature(signature)
        found = self._sorted.get(signature)
        if found is None or found[0] != facts:
            found = self._sorted[signature] = (frozenset(facts), sorted(facts), {})
        return found

    def _eval(self, symbol: Any, ctx: Mapping[str, Any]) -> Any:
        # textworld evaluates with the context's variables in locals() and its module's globals.
        if self._recording and _reads_more(symbol.expression):
            self._reads = None
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
