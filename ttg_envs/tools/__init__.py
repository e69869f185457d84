"""Tool calls for every tool-use env: parse them, validate them, show schemas and results to the model.

>>> from ttg_envs.tools import Tool, format_tool_calls, parse_tool_calls, validate_call
>>> tools = {"cd": Tool("cd", "Change directory.", {"type": "object", "properties": {"folder": {"type": "string"}}})}
>>> response = parse_tool_calls('<tool_call>{"name": "cd", "arguments": {"folder": "docs"}}</tool_call>', tools)
>>> response.calls, response.error, validate_call(response.calls[0], tools)
((ToolCall(name='cd', arguments={'folder': 'docs'}, id=''),), None, None)
>>> format_tool_calls(response.calls, "python")
"[cd(folder='docs')]"

The parser (:mod:`.parsing`) reads Hermes ``<tool_call>`` blocks, bare JSON and BFCL's Python syntax
(with ``ast``; nothing is evaluated); ReAct ``<action>`` parsing (:mod:`.react`) sits beside it.
:class:`ToolEnv` is the TextEnv base that wires tool calls into ``step``.
"""

from .calls import CALL_STYLES, ParsedResponse, ToolCall, action_text, format_tool_calls, message_calls
from .parsing import FORMAT_HINT, HERMES_FORMAT, parse_tool_calls
from .prompt import format_tool_responses, render_tool_list, render_tools_prompt
from .schema import Tool, bind_positional, tool_index, validate_call

#: Names of :mod:`.env`, a layer above the rest (its ``ToolEnv`` is a ``TextEnv``, and ``core``
#: reads ReAct parsing from this package), so loaded on first use.
_ENV_NAMES = ("ToolEnv", "ToolTurn")


def __getattr__(name: str):
    if name in _ENV_NAMES:
        from . import env

        return getattr(env, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "CALL_STYLES",
    "FORMAT_HINT",
    "HERMES_FORMAT",
    "ParsedResponse",
    "Tool",
    "ToolCall",
    "ToolEnv",
    "ToolTurn",
    "action_text",
    "bind_positional",
    "format_tool_calls",
    "message_calls",
    "format_tool_responses",
    "parse_tool_calls",
    "render_tool_list",
    "render_tools_prompt",
    "tool_index",
    "validate_call",
]
