"""Tool schemas and tool results as the model reads them, in Qwen3's chat-template layout.

``render_tools_prompt(tools, instructions)`` is the system-message text that Qwen3's template
builds from ``messages[0]`` and ``tools=``; a transcript whose system message holds it renders to
the same prompt without passing ``tools`` again. ``format_tool_responses`` is how the template
shows consecutive ``tool`` messages to the model.
"""

from __future__ import annotations

import json
from typing import Sequence

from .schema import Tool

_TOOLS_HEADER = (
    "# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
    "You are provided with function signatures within <tools></tools> XML tags:\n<tools>"
)
_TOOLS_FOOTER = (
    "\n</tools>\n\nFor each function call, return a json object with function name and arguments within "
    '<tool_call></tool_call> XML tags:\n<tool_call>\n{"name": <function-name>, "arguments": <args-json-object>}\n'
    "</tool_call>"
)


def render_tools_prompt(tools: Sequence[Tool], instructions: str = "") -> str:
    """The system message: ``instructions``, then the ``# Tools`` block listing ``tools`` (JSON lines)."""
    block = _TOOLS_HEADER + "".join("\n" + json.dumps(t.openai(), ensure_ascii=False) for t in tools) + _TOOLS_FOOTER
    return f"{instructions}\n\n{block}" if instructions else block


def render_tool_list(tools: Sequence[Tool]) -> str:
    """Tool schemas as JSON lines inside ``<tools></tools>``, for announcing tools added mid-episode."""
    return "<tools>" + "".join("\n" + json.dumps(t.openai(), ensure_ascii=False) for t in tools) + "\n</tools>"


def format_tool_responses(results: Sequence[str]) -> str:
    """Tool results as one observation: each in ``<tool_response>`` tags, one per line, in call order."""
    return "\n".join(f"<tool_response>\n{r}\n</tool_response>" for r in results)
