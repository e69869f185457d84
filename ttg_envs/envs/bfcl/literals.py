"""Java and JavaScript source literals for BFCL's Java/JavaScript categories.

In those categories every argument is a string of source code (``"true"``, ``"3L"``,
``"new ArrayList<>(Arrays.asList(1, 2))"``) that bfcl-eval's type converters read back into values,
while the possible answers store the values. The gold policy writes the literal of each answer
value for the parameter's declared type, in the forms those converters read.
"""

from __future__ import annotations

import json
from typing import Any


def java_literal(value: Any, kind: str, item_kind: str | None = None) -> str:
    """``value`` as Java source for a parameter of Java type ``kind`` (elements of ``item_kind``).

    A string answer is already source (an expression such as ``ResultSet.TYPE_SCROLL_INSENSITIVE``).
    """
    if isinstance(value, str):
        return value
    if kind == "boolean":
        return "true" if value else "false"
    if kind in ("byte", "short", "integer"):
        return str(int(value))
    if kind == "long":
        return f"{int(value)}L"
    if kind == "float":
        return f"{value}f"
    if kind == "double":
        return repr(float(value))
    if kind == "ArrayList":
        items = ", ".join(_java_item(v, item_kind) for v in value)
        return f"new ArrayList<>(Arrays.asList({items}))" if value else "new ArrayList<>()"
    if kind == "Array":
        # bfcl-eval keeps an Array element's quotes but strips an ArrayList element's.
        items = ", ".join(v if item_kind == "String" else _java_item(v, item_kind) for v in value)
        return f"new {item_kind or 'Object'}[]{{{items}}}"
    if kind == "HashMap":
        puts = " ".join(f"put({json.dumps(str(k))}, {_java_item(v, None)});" for k, v in value.items())
        return f"new HashMap<String, Object>() {{{{ {puts} }}}}"
    return str(value)


def _java_item(value: Any, kind: str | None) -> str:
    if kind == "String" or (kind is None and isinstance(value, str)):
        return json.dumps(value)
    if kind is None:
        return "true" if value is True else "false" if value is False else str(value)
    return java_literal(value, kind)


def js_literal(value: Any, kind: str) -> str:
    """``value`` as JavaScript source for a parameter of JavaScript type ``kind`` (strings are already source)."""
    if isinstance(value, str):
        return value
    if kind == "Boolean":
        return "true" if value else "false"
    if kind == "Bigint":
        return f"{int(value)}n"
    if kind in ("integer", "float"):
        return str(value)
    if kind in ("array", "dict"):
        return _js_value(value)
    return str(value)


def _js_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, list):
        return "[" + ", ".join(_js_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}: {_js_value(v)}" for k, v in value.items()) + "}"
    return str(value)
