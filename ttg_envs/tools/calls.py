"""Tool calls and parsed assistant responses, and how to write calls back as assistant text."""

from __future__ import annotations

import json
import keyword
from dataclasses import dataclass, field, replace
from typing import Any, Sequence

#: Call syntaxes that :func:`format_tool_calls` writes and ``parse_tool_calls`` reads.
CALL_STYLES = ("hermes", "json", "python")


@dataclass(frozen=True)
class ToolCall:
    """One call: the tool ``name``, its ``arguments`` (JSON-like values) and an ``id`` the env assigns."""

    name: str
    arguments: dict[str, Any] = field(default_factory=dict)
    id: str = ""

    def openai(self) -> dict[str, Any]:
        """The OpenAI ``tool_calls`` entry (arguments as a JSON string)."""
        return {
            "id": self.id,
            "type": "function",
            "function": {"name": self.name, "arguments": json.dumps(self.arguments, ensure_ascii=False, default=str)},
        }

    def with_id(self, call_id: str) -> ToolCall:
        """The same call with ``id`` set."""
        return replace(self, id=call_id)


@dataclass(frozen=True)
class ParsedResponse:
    """An assistant response split into its text ``content`` and its tool ``calls``.

    ``style`` is the call syntax found (``hermes``, ``json``, ``python``) or ``text`` when the
    response holds no call. ``error`` says what was malformed; then ``calls`` is empty.
    ``content`` keeps everything outside the call markup, reasoning included; ``message`` is the
    part meant for the reader (no reasoning, no call markup).
    """

    content: str
    calls: tuple[ToolCall, ...] = ()
    style: str = "text"
    error: str | None = None
    message: str = ""

    @property
    def has_calls(self) -> bool:
        """True when the response calls at least one tool."""
        return bool(self.calls)


def format_tool_calls(calls: Sequence[ToolCall], style: str = "hermes") -> str:
    """Write ``calls`` as assistant text that ``parse_tool_calls`` reads back to the same calls.

    ``hermes``: one ``<tool_call>{"name": ..., "arguments": {...}}</tool_call>`` block per call, as
    Qwen3's chat template renders them; ``json``: a JSON list of ``{"name", "arguments"}``;
    ``python``: BFCL's ``[f(a=1), g(b="x")]`` (argument names and each dotted part of a function
    name must be identifiers, not keywords such as ``from``: those raise ValueError).
    """
    if style == "hermes":
        return "\n".join(
            '<tool_call>\n{"name": '
            + json.dumps(c.name, ensure_ascii=False)
            + ', "arguments": '
            + json.dumps(c.arguments, ensure_ascii=False)
            + "}\n</tool_call>"
            for c in calls
        )
    if style == "json":
        return json.dumps([{"name": c.name, "arguments": c.arguments} for c in calls], ensure_ascii=False)
    if style == "python":
        clash = [k for c in calls for k in c.arguments if not python_name(k)]
        clash += [c.name for c in calls if not all(python_name(part) for part in c.name.split("."))]
        if clash:
            raise ValueError(f"names {clash} cannot be written in Python call syntax; use style='hermes'")
        return "[" + ", ".join(f"{c.name}({', '.join(f'{k}={v!r}' for k, v in c.arguments.items())})" for c in calls) + "]"
    raise ValueError(f"style must be one of {CALL_STYLES}, got {style!r}")


def python_name(name: str) -> bool:
    """Whether ``name`` can stand as a name in Python call syntax (an identifier, not a keyword).

    >>> python_name("folder"), python_name("from"), python_name("a-b")
    (True, False, False)
    """
    return name.isidentifier() and not keyword.iskeyword(name)


def message_calls(message: dict[str, Any]) -> list[ToolCall]:
    """The calls a transcript's assistant ``message`` keeps in its OpenAI ``tool_calls`` (ids left out).

    >>> message_calls({"role": "assistant", "tool_calls": [{"function": {"name": "f", "arguments": '{"x": 1}'}}]})
    [ToolCall(name='f', arguments={'x': 1}, id='')]
    """
    return [ToolCall(c["function"]["name"], json.loads(c["function"]["arguments"] or "{}")) for c in message.get("tool_calls") or ()]


def action_text(message: dict[str, Any], style: str = "hermes") -> str:
    """The text that makes a transcript's assistant ``message``'s move when sent to ``env.step``:
    its content, with its calls written in ``style`` where the transcript keeps them apart (tau2
    stores the calls, not their text).

    >>> action_text({"role": "assistant", "content": "", "tool_calls": [{"function": {"name": "f", "arguments": '{"x": 1}'}}]})
    '<tool_call>\\n{"name": "f", "arguments": {"x": 1}}\\n</tool_call>'
    """
    content = str(message.get("content") or "")
    calls = message_calls(message)
    if not calls or "<tool_call>" in content:
        return content
    text = format_tool_calls(calls, style)
    return f"{content}\n{text}" if content.strip() else text
