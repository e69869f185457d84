"""Tool definitions in OpenAI function format, and argument validation against their JSON schema.

The validator covers the JSON-schema subset that tool definitions use in practice: ``type`` (one
name or a list), ``enum``, ``anyOf``/``oneOf``, local ``$ref`` into ``$defs``/``definitions``,
``properties``/``required``/``additionalProperties`` and ``items``. Keywords outside that subset
are not checked (accepted), so a schema the validator does not understand never rejects a call.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping, Sequence

from .calls import ToolCall

_PY_TYPES: dict[str, str] = {
    "string": "a string",
    "integer": "an integer",
    "number": "a number",
    "boolean": "a boolean",
    "array": "an array",
    "object": "an object",
    "null": "null",
}


@dataclass(frozen=True)
class Tool:
    """One callable tool: a name, a description and a JSON schema of its arguments (an object schema)."""

    name: str
    description: str = ""
    parameters: Mapping[str, Any] = field(default_factory=lambda: {"type": "object", "properties": {}})

    def openai(self) -> dict[str, Any]:
        """The OpenAI function-tool dict ``{"type": "function", "function": {...}}``."""
        return {
            "type": "function",
            "function": {"name": self.name, "description": self.description, "parameters": dict(self.parameters)},
        }

    @classmethod
    def from_openai(cls, spec: Mapping[str, Any]) -> Tool:
        """Build a tool from an OpenAI tool dict, wrapped (``{"type": "function", ...}``) or bare."""
        function = spec["function"] if "function" in spec else spec
        parameters = function.get("parameters") or {"type": "object", "properties": {}}
        return cls(function["name"], function.get("description", ""), parameters)

    @property
    def parameter_names(self) -> list[str]:
        """Argument names in declaration order (positional arguments bind to them in this order)."""
        return list((self.parameters.get("properties") or {}).keys())


def tool_index(tools: Iterable[Tool]) -> dict[str, Tool]:
    """Tools by name, in the given order."""
    return {tool.name: tool for tool in tools}


def validate_call(call: ToolCall, tools: Mapping[str, Tool], *, check_types: bool = True) -> str | None:
    """Why ``call`` is not acceptable for ``tools`` (a name -> Tool mapping), or None when it is.

    The text names the problem: an unknown tool (listing the available ones), a missing required
    argument, an unexpected argument, or (with ``check_types``) a value of the wrong type or
    outside its enum. Without ``check_types`` only the argument names are checked.
    """
    tool = tools.get(call.name)
    if tool is None:
        available = ", ".join(tools) or "none"
        return f"Unknown tool {call.name!r}. Available tools: {available}."
    schema = tool.parameters if check_types else _names_only(tool.parameters)
    problem = _check(call.arguments, schema, tool.parameters, "arguments")
    return f"Invalid arguments for {call.name!r}: {problem}." if problem else None


def _names_only(schema: Mapping[str, Any]) -> dict[str, Any]:
    keep = ("required", "additionalProperties")
    return {"properties": {k: {} for k in schema.get("properties") or {}}, **{k: schema[k] for k in keep if k in schema}}


def _check(value: Any, schema: Mapping[str, Any], root: Mapping[str, Any], where: str) -> str | None:
    ref = schema.get("$ref")
    if isinstance(ref, str):
        schema = _resolve(ref, root)
        if schema is None:
            return None
    for key in ("anyOf", "oneOf"):
        options = schema.get(key)
        if isinstance(options, list) and options:
            problems = [_check(value, option, root, where) for option in options if isinstance(option, Mapping)]
            if problems and all(problems):
                return problems[0] if len(problems) == 1 else f"{where} matches none of the allowed forms ({problems[0]})"
    expected = schema.get("type")
    names = [expected] if isinstance(expected, str) else list(expected) if isinstance(expected, list) else []
    names = [n for n in names if n in _PY_TYPES]
    if names and not any(_is_type(value, n) for n in names):
        wanted = " or ".join(_PY_TYPES[n] for n in names)
        return f"{where} must be {wanted}, got {_describe(value)}"
    enum = schema.get("enum")
    if isinstance(enum, list) and enum and value not in enum:
        return f"{where} must be one of {enum!r}, got {value!r}"
    if isinstance(value, dict):
        return _check_object(value, schema, root, where)
    if isinstance(value, (list, tuple)) and isinstance(schema.get("items"), Mapping):
        for i, item in enumerate(value):
            problem = _check(item, schema["items"], root, f"{where}[{i}]")
            if problem:
                return problem
    return None


def _check_object(value: dict, schema: Mapping[str, Any], root: Mapping[str, Any], where: str) -> str | None:
    properties = schema.get("properties")
    if not isinstance(properties, Mapping):
        return None
    top = where == "arguments"
    for name in schema.get("required") or []:
        if name not in value:
            return f"missing required argument {name!r}" if top else f"{where} is missing {name!r}"
    extra = schema.get("additionalProperties", not top)
    for name, item in value.items():
        if name in properties:
            problem = _check(item, properties[name], root, f"{name!r}" if top else f"{where}[{name!r}]")
            if problem:
                return problem
        elif extra is False:
            allowed = ", ".join(properties) or "none"
            return f"unexpected argument {name!r} (parameters: {allowed})" if top else f"{where} has unexpected key {name!r}"
    return None


def _resolve(ref: str, root: Mapping[str, Any]) -> Mapping[str, Any] | None:
    if not ref.startswith("#/"):
        return None
    node: Any = root
    for part in ref[2:].split("/"):
        if not isinstance(node, Mapping) or part not in node:
            return None
        node = node[part]
    return node if isinstance(node, Mapping) else None


def _is_type(value: Any, name: str) -> bool:
    if name == "string":
        return isinstance(value, str)
    if name == "integer":
        return isinstance(value, int) and not isinstance(value, bool)
    if name == "number":
        # math.isfinite(int) converts to float, which raises OverflowError above 1e308.
        return isinstance(value, float) and math.isfinite(value) or isinstance(value, int) and not isinstance(value, bool)
    if name == "boolean":
        return isinstance(value, bool)
    if name == "array":
        return isinstance(value, (list, tuple))
    if name == "object":
        return isinstance(value, dict)
    return value is None


def _describe(value: Any) -> str:
    kind = {
        str: "string",
        bool: "boolean",
        int: "integer",
        float: "number",
        list: "array",
        tuple: "array",
        dict: "object",
        type(None): "null",
    }.get(type(value), type(value).__name__)
    text = repr(value)
    return f"{kind} {text if len(text) <= 60 else text[:57] + '...'}"


def bind_positional(name: str, args: Sequence[Any], kwargs: Mapping[str, Any], tools: Mapping[str, Tool]) -> dict[str, Any] | str:
    """Name the positional ``args`` of a call to ``name`` by the tool's parameter order.

    Returns the merged argument dict, or an error text when the tool is unknown, there are more
    positional arguments than parameters, or one is also given by keyword.
    """
    if not args:
        return dict(kwargs)
    tool = tools.get(name)
    if tool is None:
        return f"Unknown tool {name!r}; positional arguments need a known tool to be named."
    params = tool.parameter_names
    if len(args) > len(params):
        return f"{name!r} takes at most {len(params)} arguments ({', '.join(params) or 'none'}), got {len(args)} positional."
    bound = dict(zip(params, args))
    for key in kwargs:
        if key in bound:
            return f"{name!r} got argument {key!r} both by position and by keyword."
    return {**bound, **kwargs}
