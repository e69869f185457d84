"""BFCL's Python call syntax, ``[f(a=1), mod.g("x", b=[1, 2])]``, read with ``ast`` and never evaluated.

Only literal argument values are accepted (strings, numbers, booleans, None, and lists, tuples,
sets and dicts of them; ``true``/``false``/``null`` are read as their JSON meaning). Names,
operators other than a sign, attribute access and nested calls are errors, so nothing in the text
can run code or reach a namespace.
"""

from __future__ import annotations

import ast
from typing import Any

#: A call as written: dotted function name, positional values, keyword values.
RawCall = tuple[str, list[Any], dict[str, Any]]

_JSON_NAMES = {"true": True, "false": False, "null": None}


class _NotLiteral(ValueError):
    pass


def parse_python_calls(text: str) -> list[RawCall] | str:
    """The calls in ``text`` (a bracketed list of calls, or one bare call), or an error text."""
    try:
        body = ast.parse(text.strip(), mode="eval").body
    except (SyntaxError, ValueError, MemoryError, RecursionError) as exc:
        return f"not valid Python call syntax ({_short(exc)})"
    nodes = body.elts if isinstance(body, (ast.List, ast.Tuple)) else [body]
    calls = []
    try:
        for node in nodes:
            if not isinstance(node, ast.Call):
                raise _NotLiteral(f"expected a function call, found {_node_text(node)}")
            name = _func_name(node.func)
            args = [_literal(a) for a in node.args]
            kwargs: dict[str, Any] = {}
            for kw in node.keywords:
                if kw.arg is None:
                    raise _NotLiteral(f"'**' unpacking is not allowed in a call to {name}")
                if kw.arg in kwargs:
                    raise _NotLiteral(f"argument {kw.arg!r} is given twice in a call to {name}")
                kwargs[kw.arg] = _literal(kw.value)
            calls.append((name, args, kwargs))
    except _NotLiteral as exc:
        return str(exc)
    except RecursionError:
        return "the call is nested too deeply"
    return calls


def looks_like_python_calls(text: str) -> bool:
    """True when ``text`` starts like ``[name(`` or is shaped like ``name(...)``: worth an error if unparsable."""
    head = text.lstrip()
    if head.startswith("["):
        head = head[1:].lstrip()
    else:
        if not text.rstrip().endswith(")"):
            return False
    i = 0
    while i < len(head) and (head[i].isalnum() or head[i] in "_."):
        i += 1
    return i > 0 and (head[0].isalpha() or head[0] == "_") and head[i:].startswith("(")


def _func_name(node: ast.expr) -> str:
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        raise _NotLiteral(f"the called object {_node_text(node)} is not a function name")
    parts.append(node.id)
    return ".".join(reversed(parts))


def _literal(node: ast.expr) -> Any:
    if isinstance(node, ast.Constant):
        if isinstance(node.value, (str, int, float, bool)) or node.value is None:
            return node.value
        raise _NotLiteral(f"{type(node.value).__name__} values are not allowed")
    if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
        return [_literal(e) for e in node.elts]
    if isinstance(node, ast.Dict):
        out = {}
        for k, v in zip(node.keys, node.values):
            if k is None:
                raise _NotLiteral("'**' unpacking is not allowed in a dict")
            key = _literal(k)
            if isinstance(key, list):
                raise _NotLiteral("dict keys must be strings or numbers")
            out[key] = _literal(v)
        return out
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        value = _literal(node.operand)
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return -value if isinstance(node.op, ast.USub) else value
        raise _NotLiteral("a sign is only allowed before a number")
    if isinstance(node, ast.Name):
        if node.id in _JSON_NAMES:
            return _JSON_NAMES[node.id]
        raise _NotLiteral(f"name {node.id!r} is not a literal value (quote strings)")
    if isinstance(node, ast.Call):
        raise _NotLiteral(f"nested call {_node_text(node)} is not allowed as an argument value")
    raise _NotLiteral(f"{_node_text(node)} is not a literal value; arguments must be literals")


def _node_text(node: ast.AST) -> str:
    try:
        text = ast.unparse(node)
    except Exception:  # unparse of a malformed tree; the node type still names it
        text = type(node).__name__
    return repr(text if len(text) <= 40 else text[:37] + "...")


def _short(exc: BaseException) -> str:
    if isinstance(exc, SyntaxError) and exc.msg:
        where = f" at column {exc.offset}" if exc.offset else ""
        return f"{exc.msg}{where}"
    return str(exc)[:120] or type(exc).__name__
