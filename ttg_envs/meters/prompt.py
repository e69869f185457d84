"""How a meter reads a history: the transcript rendered as one prompt, cut from the left.

The first user message is the task statement and always stays. Older turns are dropped first
when the rendered history would exceed the token budget; a marker says how many were dropped.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from functools import lru_cache
from typing import Any

from .answer import ANSWER_PREFIX

#: Counts the tokens of a text.
CountTokens = Callable[[str], int]

METER_SYSTEM_PROMPT = (
    "You are a progress meter for an AI agent. Read the agent's task and its interaction history so far. "
    "Estimate whether the agent will complete the task, and if so how many more tokens the agent will "
    "generate before it does. Answer with JSON only, exactly "
    f'{ANSWER_PREFIX} true, "remaining_tokens": <integer>}} or {ANSWER_PREFIX} false, "remaining_tokens": null}}.'
)

_OMITTED = "[... {n} earlier messages omitted ...]"
_CUT = "[...] "


@dataclass(frozen=True)
class PromptConfig:
    """How histories are rendered for a meter.

    Attributes:
        max_tokens: token budget of the rendered history (task statement included).
        max_message_tokens: if set, each message is cut to its first this-many tokens (long tool
            outputs and admissible-action lists matter less than the latest turns).
        include_system: also render the agent's system prompt before the task.
        system_prompt: the meter's own instructions.
    """

    max_tokens: int = 6144
    max_message_tokens: int | None = None
    include_system: bool = False
    system_prompt: str = METER_SYSTEM_PROMPT

    def to_dict(self) -> dict[str, Any]:
        """A JSON-able dict (saved beside a trained meter)."""
        return asdict(self)


def message_text(message: Mapping[str, Any]) -> str:
    """The text of one chat message, tool calls included as JSON."""
    content = message.get("content")
    if isinstance(content, list):  # OpenAI content parts
        content = "".join(part.get("text", "") for part in content if isinstance(part, Mapping))
    text = "" if content is None else str(content)
    calls = message.get("tool_calls")
    if calls:
        rendered = json.dumps(calls, ensure_ascii=False, default=str)
        text = f"{text}\n{rendered}" if text else rendered
    return text


def _header(message: Mapping[str, Any], index: int, task_index: int) -> str:
    role = message.get("role")
    if index == task_index:
        return "## Task"
    if role == "assistant":
        return "## Agent"
    if role == "tool":
        name = message.get("name")
        return f"## Tool result ({name})" if name else "## Tool result"
    if role == "system":
        return "## System"
    return "## Environment"


def _cut_head(text: str, budget: int, count: CountTokens) -> str:
    """The longest prefix of ``text`` (plus a marker) within ``budget`` tokens."""
    if count(text) <= budget:
        return text
    lo, hi = 0, len(text)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if count(text[:mid] + " [...]") <= budget:
            lo = mid
        else:
            hi = mid - 1
    return text[:lo] + " [...]"


def _cut_tail(text: str, budget: int, count: CountTokens) -> str:
    """The longest suffix of ``text`` (after a marker) within ``budget`` tokens."""
    if count(text) <= budget:
        return text
    lo, hi = 0, len(text)
    while lo < hi:
        mid = (lo + hi) // 2
        if count(_CUT + text[mid:]) <= budget:
            hi = mid
        else:
            lo = mid + 1
    return _CUT + text[lo:]


def render_history(history: Sequence[Mapping[str, Any]], count: CountTokens, config: PromptConfig = PromptConfig()) -> str:
    """The history as the meter reads it, within ``config.max_tokens`` tokens of ``count``.

    Blocks are ``## Task``, ``## Agent``, ``## Environment`` and ``## Tool result``; the task
    block (the first user message) is always kept, the most recent blocks after it are kept
    while they fit, and a marker replaces the dropped ones. A single block longer than what is
    left keeps its end.
    """
    count = _memo(count)
    task_index = next((i for i, m in enumerate(history) if m.get("role") == "user"), None)
    blocks: list[str] = []
    head: list[str] = []
    for i, message in enumerate(history):
        if message.get("role") == "system" and not config.include_system:
            continue
        text = message_text(message)
        if config.max_message_tokens is not None and i != task_index:
            text = _cut_head(text, config.max_message_tokens, count)
        block = f"{_header(message, i, task_index)}\n{text}"
        if task_index is None or i <= task_index:
            head.append(block)
        else:
            blocks.append(block)
    budget = config.max_tokens
    head_text = "\n\n".join(head)
    # The task never takes more than half the budget, so the latest turns always have room.
    if blocks and count(head_text) > budget // 2:
        head_text = _cut_head(head_text, budget // 2, count)
    elif not blocks:
        return _cut_head(head_text, budget, count)
    left = budget - count(head_text) - count(_OMITTED.format(n=len(blocks))) - 2
    kept: list[str] = []
    for block in reversed(blocks):
        need = count(block) + 1
        if need > left:
            if not kept:
                kept.append(_cut_tail(block, max(left, 1), count))
            break
        kept.append(block)
        left -= need
    kept.reverse()
    dropped = len(blocks) - len(kept)
    parts = [head_text] + ([_OMITTED.format(n=dropped)] if dropped else []) + kept
    return "\n\n".join(parts)


def meter_messages(history: Sequence[Mapping[str, Any]], count: CountTokens, config: PromptConfig = PromptConfig()) -> list[dict[str, str]]:
    """The meter's chat input: its system prompt and one user message with the rendered history."""
    return [
        {"role": "system", "content": config.system_prompt},
        {"role": "user", "content": render_history(history, count, config)},
    ]


def _memo(count: CountTokens) -> CountTokens:
    memo = getattr(count, "cache_info", None)
    return count if memo is not None else lru_cache(maxsize=4096)(count)
