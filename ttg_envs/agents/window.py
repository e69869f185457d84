"""Which part of the transcript an actor reads: the last k turns, within a prompt token budget.

A transcript (``env.unwrapped.messages``) is a head (the system prompt and the first user message,
which states the task) followed by turns: an assistant message and the observation messages that
answer it. The messages after the last assistant message are the current observation and are
always kept, as is the head. :class:`PromptWindow` keeps the last ``turns`` turns and then, while
the rendered prompt is over ``max_prompt_tokens``, drops turns from the left (oldest first). A
window that still does not fit is sent as it is (the head and the current observation are never
cut), and a warning says so once per actor.

:data:`PAPER_E5` is the paper's test-time protocol (appendix E.5, also verl-agent's ALFWorld
setting): the last 2 turns and a 2048-token actor prompt.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

Message = Mapping[str, Any]
#: Counts the tokens of a prompt made from these messages.
PromptCounter = Callable[[Sequence[Message]], int]


@dataclass(frozen=True)
class PromptWindow:
    """The part of a transcript an actor is prompted with.

    Attributes:
        turns: keep the last ``turns`` turns (None: every turn; 0: none, only the head and the
            current observation).
        max_prompt_tokens: prompt budget in tokens (None: no budget); turns are dropped oldest
            first until the prompt fits.
    """

    turns: int | None = None
    max_prompt_tokens: int | None = None

    def __post_init__(self):
        if self.turns is not None and self.turns < 0:
            raise ValueError(f"turns must be >= 0 or None, got {self.turns}")
        if self.max_prompt_tokens is not None and self.max_prompt_tokens <= 0:
            raise ValueError(f"max_prompt_tokens must be > 0 or None, got {self.max_prompt_tokens}")

    @property
    def is_full(self) -> bool:
        """True when the window keeps the whole transcript."""
        return self.turns is None and self.max_prompt_tokens is None

    def select(self, messages: Sequence[Message], count: PromptCounter | None = None) -> list[Message]:
        """The messages to prompt with; ``count`` is needed only when a token budget is set."""
        messages = list(messages)
        if self.is_full:
            return messages
        head, turns, current = split_turns(messages)
        if self.turns is not None:
            turns = turns[len(turns) - self.turns :] if self.turns else []
        if self.max_prompt_tokens is None:
            return _join(head, turns, current)
        if count is None:
            raise ValueError("a prompt token budget needs a token counter")
        while turns and count(_join(head, turns, current)) > self.max_prompt_tokens:
            turns = turns[1:]
        return _join(head, turns, current)


def split_turns(messages: Sequence[Message]) -> tuple[list[Message], list[list[Message]], list[Message]]:
    """``(head, turns, current)``: see the module docstring.

    The head is every message before the first assistant message (system prompt, task). Each turn
    is an assistant message and the observations that answered it; the observations after the last
    assistant message are ``current``, so the newest turn holds its assistant message alone.
    """
    messages = list(messages)
    starts = [i for i, m in enumerate(messages) if m.get("role") == "assistant"]
    if not starts:
        return messages, [], []
    head = messages[: starts[0]]
    turns = [messages[a:b] for a, b in zip(starts, starts[1:])]
    turns.append(messages[starts[-1] : starts[-1] + 1])
    return head, turns, messages[starts[-1] + 1 :]


def _join(head: list[Message], turns: list[list[Message]], current: list[Message]) -> list[Message]:
    return head + [m for turn in turns for m in turn] + current


class WindowedPrompts:
    """Applies a :class:`PromptWindow` with a token counter, warning once when a window cannot fit."""

    def __init__(self, window: PromptWindow | None, count: PromptCounter | None = None):
        self.window = window or PromptWindow()
        self.count = count
        self._warned = False

    def __call__(self, messages: Sequence[Message]) -> list[Message]:
        """The windowed messages of one transcript."""
        kept = self.window.select(messages, self.count)
        budget = self.window.max_prompt_tokens
        # select() keeps turns only while the prompt fits, so only a window with no turn left can be over.
        if budget is not None and not self._warned and self.count is not None and not split_turns(kept)[1] and self.count(kept) > budget:
            self._warned = True
            warnings.warn(
                f"a prompt is over max_prompt_tokens={budget} with no turn left to drop; the task "
                "statement and current observation are sent whole",
                stacklevel=2,
            )
        return kept


#: The paper's test-time protocol (appendix E.5): the last 2 turns, a 2048-token actor prompt.
PAPER_E5 = PromptWindow(turns=2, max_prompt_tokens=2048)

#: Named windows accepted where a window can be given by name (``ttg train --window``).
WINDOWS = {"full": PromptWindow(), "paper": PAPER_E5}


def as_window(value: PromptWindow | str | int | None) -> PromptWindow:
    """A window from a :class:`PromptWindow`, a name in :data:`WINDOWS`, a turn count, or None (full)."""
    if value is None:
        return PromptWindow()
    if isinstance(value, PromptWindow):
        return value
    if isinstance(value, int):
        return PromptWindow(turns=value)
    if isinstance(value, str):
        if value in WINDOWS:
            return WINDOWS[value]
        if value.isdigit():
            return PromptWindow(turns=int(value))
    raise ValueError(f"unknown prompt window {value!r}; give a turn count or one of {', '.join(WINDOWS)}")
