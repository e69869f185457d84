"""ReAct parsing: ``<think>...</think><action>...</action>`` into one command, strictly or leniently.

The default action syntax of :class:`~ttg_envs.core.TextEnv` (tool envs read tool calls instead:
:mod:`.parsing`). Never raises; linear time in the strict path.

>>> from ttg_envs.tools.react import parse_lenient, parse_react
>>> parse_react("<think>the mug is near</think><action>take mug 1</action>").command
'take mug 1'
>>> parse_react("take mug 1").error
'Invalid response: no <action>...</action> block was found. Answer as <think>your reasoning</think><action>one command</action>.'
>>> parse_lenient("Action: take mug 1.", ["take mug 1", "look"]).command
'take mug 1'
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Sequence

from .tags import ascii_lower, tag_blocks

#: The format the error texts ask for.
REACT_FORMAT = "<think>your reasoning</think><action>one command</action>"


@dataclass(frozen=True)
class ParsedAction:
    """The result of parsing assistant text: a ``command`` or an ``error`` saying what was wrong.

    ``command`` is env-specific: a command string for ALFWorld, a list of tool calls for tool envs.
    """

    command: Any
    error: str | None = None


def parse_react(text: str) -> ParsedAction:
    """Parse ReAct-style output ``<think>...</think><action>...</action>`` into one command.

    Exactly one non-empty ``<action>`` block is required; anything else is an error whose message
    says what was wrong and what format is expected. Tags are case-insensitive. Linear time; never raises.
    """
    lowered = ascii_lower(text)
    blocks = tag_blocks(text, "<action>", "</action>", lowered)
    if not blocks:
        if "<action>" in lowered:
            why = "the <action> block is not closed with </action>"
        else:
            why = "no <action>...</action> block was found"
        return ParsedAction(None, f"Invalid response: {why}. Answer as {REACT_FORMAT}.")
    if len(blocks) > 1:
        return ParsedAction(None, f"Invalid response: found {len(blocks)} <action> blocks, expected exactly one. Answer as {REACT_FORMAT}.")
    start, end = blocks[0]
    command = " ".join(text[start:end].split())
    if not command:
        return ParsedAction(None, f"Invalid response: the <action> block is empty. Answer as {REACT_FORMAT}.")
    return ParsedAction(command)


#: ``action_format`` values of ReAct envs: the paper's tags only, or the lenient extras of :func:`parse_lenient`.
ACTION_FORMATS = ("strict", "lenient")

_LIST_MARKER = re.compile(r"^(?:[-*\u2022>]+|\(?\d{1,3}[.):])\s*")
_ACTION_LABEL = re.compile(r"^(?:action|command|answer)\s*[:=-]\s*", re.IGNORECASE)


def parse_lenient(text: str, commands: Sequence[str] | None = None) -> ParsedAction:
    """:func:`parse_react`, plus two readings of a response without valid ``<action>`` tags.

    With the tags missing or malformed, ``<think>`` blocks and any stray tags are set aside and

    1. a response that names exactly one of ``commands`` (case-insensitive, as whole words: "go to
       drawer 1" is not named by "go to drawer 10") is that command, in its canonical spelling;
    2. otherwise, a response whose text is one line (list markers such as ``1.`` or ``-``, a label
       such as ``Action:``, quotes and a final full stop removed) is that line as the command.

    Anything else (two commands named, several lines, nothing) gets :func:`parse_react`'s error,
    so a malformed response still says what the strict format is. Never raises.
    """
    strict = parse_react(text)
    if strict.error is None:
        return strict
    body = _without_tags(text)
    named = _named_commands(body, commands or ())
    if len(named) == 1:
        return ParsedAction(named[0])
    if not named:
        lines = [line for line in (_clean_line(raw) for raw in body.splitlines()) if line]
        if len(lines) == 1:
            return ParsedAction(lines[0])
    return strict


def _without_tags(text: str) -> str:
    """``text`` without ``<think>...</think>`` blocks (an unclosed one runs to the end) and other tags."""
    out, lower, start = [], text.lower(), 0
    while True:
        open_at = lower.find("<think>", start)
        if open_at < 0:
            out.append(text[start:])
            break
        out.append(text[start:open_at])
        close_at = lower.find("</think>", open_at)
        if close_at < 0:
            break
        start = close_at + len("</think>")
    body = "".join(out)
    for tag in ("<action>", "</action>", "<think>", "</think>"):
        body = re.sub(re.escape(tag), " ", body, flags=re.IGNORECASE)
    return body


def _named_commands(body: str, commands: Sequence[str]) -> list[str]:
    found = []
    for command in dict.fromkeys(commands):
        words = command.split()
        if not words:
            continue
        pattern = r"(?<!\w)" + r"\s+".join(re.escape(w) for w in words) + r"(?!\w)"
        if re.search(pattern, body, re.IGNORECASE):
            found.append(command)
    # A command inside another named one ("look" inside "look at mug") is not a second choice.
    return [c for c in found if not any(c != other and c.lower() in other.lower() for other in found)]


def _clean_line(raw: str) -> str:
    line = _ACTION_LABEL.sub("", _LIST_MARKER.sub("", raw.strip()))
    line = line.strip().strip("`'\"").strip()
    if line.endswith("."):
        line = line[:-1]
    return " ".join(line.split())
