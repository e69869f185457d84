"""Read tool calls out of assistant text: Qwen/Hermes ``<tool_call>`` blocks, bare JSON, BFCL Python calls.

Reasoning (up to the last ``</think>``, or from an unclosed ``<think>`` on) is never searched. Then:

1. ``<tool_call>{"name": ..., "arguments": {...}}</tool_call>`` blocks, any number; a block may
   also hold a JSON list of calls or a Python call; a last block left open is read if it is
   complete JSON (generation stopped at ``</tool_call>``).
2. A response that is only JSON (optionally fenced): a call object or a list of them;
   ``"parameters"`` reads as ``"arguments"``, string-encoded arguments are decoded; ``[]`` is no call.
3. A response that is only BFCL's Python syntax: ``[f(a=1), g(b="x")]`` or one ``f(a=1)``.

Anything else is plain text. Malformed call markup gives ``ParsedResponse.error`` naming the problem
and the expected format; :func:`parse_tool_calls` never raises and runs in linear time.
"""

from __future__ import annotations

import json
import re
from typing import Any, Iterable, Mapping

from .calls import ParsedResponse, ToolCall
from .pysyntax import looks_like_python_calls, parse_python_calls
from .schema import Tool, bind_positional
from .tags import tag_blocks

#: The call format the error texts ask for.
HERMES_FORMAT = '<tool_call>{"name": <function-name>, "arguments": <args-json-object>}</tool_call>'
FORMAT_HINT = f"Write each call as {HERMES_FORMAT}."


_FENCE_TAG_RE = re.compile(r"```[A-Za-z0-9_-]*")
_CALL_KEYS = {"name", "arguments", "parameters", "id", "type"}


class _Malformed(ValueError):
    pass


def parse_tool_calls(text: Any, tools: Mapping[str, Tool] | Iterable[Tool] | None = None) -> ParsedResponse:
    """Split an assistant response into text content and tool calls (see the module docstring).

    ``tools`` (by name, or a list) lets positional Python arguments bind to parameter names in
    declaration order; without them a positional argument is an error. Never raises.
    """
    if not isinstance(text, str):
        return ParsedResponse("", error=f"Invalid response: expected text, got {type(text).__name__}.")
    index = tools if isinstance(tools, Mapping) else {t.name: t for t in (tools or ())}
    try:
        return _parse(text, index)
    except _Malformed as exc:
        return ParsedResponse(text, error=f"Invalid tool call: {exc}")
    except RecursionError:
        return ParsedResponse(text, error="Invalid tool call: the call is nested too deeply.")


def _parse(text: str, tools: Mapping[str, Tool]) -> ParsedResponse:
    start, end = _visible_span(text)
    visible = text[start:end]
    if "<tool_call>" in visible or "</tool_call>" in visible:
        calls, content = _hermes(visible, tools)
        return ParsedResponse((text[:start] + content + text[end:]).strip(), tuple(calls), "hermes", message=content.strip())
    candidate = visible.strip()
    fenced = _unfence(candidate)
    if fenced is not None:
        candidate = fenced
    rest = (text[:start] + text[end:]).strip()
    plain = ParsedResponse(text.strip(), message=candidate if fenced is None else visible.strip())
    if candidate[:1] in ("{", "["):
        try:
            data = json.loads(candidate)
        except (ValueError, RecursionError) as exc:
            if looks_like_python_calls(candidate):
                return ParsedResponse(rest, tuple(_python(candidate, tools)), "python")
            if candidate.startswith("{"):
                raise _Malformed(f"the response is not valid JSON ({_json_error(exc)}). {FORMAT_HINT}") from None
            return plain
        if _is_call_json(data):
            return ParsedResponse(rest, tuple(_json_calls(data, "the JSON response")), "json")
        if data == []:
            return ParsedResponse(rest, (), "json")
        return plain
    if looks_like_python_calls(candidate):
        return ParsedResponse(rest, tuple(_python(candidate, tools)), "python")
    return plain


def _unfence(text: str) -> str | None:
    """The stripped body of a response that is one code fence (```lang ... ```), else ``None``."""
    if len(text) < 6 or not (text.startswith("```") and text.endswith("```")):
        return None
    return text[_FENCE_TAG_RE.match(text).end() : -3].strip()


def _visible_span(text: str) -> tuple[int, int]:
    """The part of ``text`` outside the reasoning: after the last ``</think>``, before an open ``<think>``."""
    close = text.rfind("</think>")
    start = close + len("</think>") if close >= 0 else 0
    opened = text.find("<think>", start)
    return start, (opened if opened >= 0 else len(text))


def _hermes(text: str, tools: Mapping[str, Tool]) -> tuple[list[ToolCall], str]:
    calls: list[ToolCall] = []
    pieces: list[str] = []
    pos = 0
    blocks = tag_blocks(text, "<tool_call>", "</tool_call>")
    for number, (start, end) in enumerate(blocks, 1):
        pieces.append(text[pos : start - len("<tool_call>")])
        pos = end + len("</tool_call>")
        calls.extend(_block(text[start:end], number, tools))
    tail = text[pos:]
    if "</tool_call>" in tail or "</tool_call>" in "".join(pieces):
        raise _Malformed(f"found </tool_call> without a matching <tool_call>. {FORMAT_HINT}")
    if "<tool_call>" in tail:
        head, _, body = tail.partition("<tool_call>")
        if "<tool_call>" in body:
            raise _Malformed(f"a <tool_call> block is not closed with </tool_call>. {FORMAT_HINT}")
        try:
            json.loads(body)
        except (ValueError, RecursionError):
            raise _Malformed(f"the <tool_call> block {len(blocks) + 1} is not closed with </tool_call>. {FORMAT_HINT}") from None
        calls.extend(_block(body, len(blocks) + 1, tools))
        tail = head
    pieces.append(tail)
    return calls, "".join(pieces)


def _block(body: str, number: int, tools: Mapping[str, Tool]) -> list[ToolCall]:
    body = body.strip()
    if not body:
        raise _Malformed(f"the <tool_call> block {number} is empty. {FORMAT_HINT}")
    try:
        data = json.loads(body)
    except (ValueError, RecursionError) as exc:
        if looks_like_python_calls(body):
            return _python(body, tools)
        raise _Malformed(f"the <tool_call> block {number} is not valid JSON ({_json_error(exc)}). {FORMAT_HINT}") from None
    return _json_calls(data, f"the <tool_call> block {number}")


def _is_call_json(data: Any) -> bool:
    items = data if isinstance(data, list) and data else [data]
    return all(_is_call_object(d.get("function") if isinstance(d, dict) and "function" in d else d) for d in items)


def _is_call_object(d: Any) -> bool:
    return isinstance(d, dict) and isinstance(d.get("name"), str) and set(d) <= _CALL_KEYS


def _json_calls(data: Any, where: str) -> list[ToolCall]:
    items = data if isinstance(data, list) else [data]
    if not items:
        raise _Malformed(f"{where} holds an empty list. {FORMAT_HINT}")
    calls = []
    for item in items:
        if isinstance(item, dict) and isinstance(item.get("function"), dict):
            item = item["function"]
        if not isinstance(item, dict):
            raise _Malformed(f"{where} must be a JSON object, got {type(item).__name__}. {FORMAT_HINT}")
        name = item.get("name")
        if not isinstance(name, str) or not name.strip():
            raise _Malformed(f'{where} has no "name" string. {FORMAT_HINT}')
        arguments = item.get("arguments", item.get("parameters", {}))
        if isinstance(arguments, str):
            try:
                arguments = json.loads(arguments) if arguments.strip() else {}
            except (ValueError, RecursionError) as exc:
                raise _Malformed(f'the "arguments" string of {name!r} is not valid JSON ({_json_error(exc)}).') from None
        if arguments is None:
            arguments = {}
        if not isinstance(arguments, dict):
            raise _Malformed(f'"arguments" of {name!r} must be a JSON object, got {type(arguments).__name__}.')
        calls.append(ToolCall(name.strip(), arguments))
    return calls


def _python(text: str, tools: Mapping[str, Tool]) -> list[ToolCall]:
    parsed = parse_python_calls(text)
    if isinstance(parsed, str):
        raise _Malformed(f"{parsed}. Write calls as [func_name(param=value, ...)] or as {HERMES_FORMAT}.")
    calls = []
    for name, args, kwargs in parsed:
        arguments = bind_positional(name, args, kwargs, tools)
        if isinstance(arguments, str):
            raise _Malformed(arguments)
        calls.append(ToolCall(name, arguments))
    return calls


def _json_error(exc: BaseException) -> str:
    if isinstance(exc, json.JSONDecodeError):
        return f"{exc.msg} at line {exc.lineno} column {exc.colno}"
    return type(exc).__name__
