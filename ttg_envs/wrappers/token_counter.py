"""``TokenCounter``: how many tokens the actor generated at every step, and Token-to-Go labels."""

from __future__ import annotations

import re
from typing import Any, Sequence

import gymnasium as gym

from ..core import Generation
from .branching import BranchableWrapper

_SURROGATES = re.compile("[\ud800-\udfff]")
#: Texts whose count a counter (and its branches) remembers; a selector's trials count each
#: candidate once, and the chosen one is counted again when the main env steps.
_COUNT_CACHE = 256


def token_to_go(step_tokens: Sequence[int]) -> list[int]:
    """Recorded Token-to-Go (paper eq. 1): ``TTG_t = sum(n_u for u in t..T-1)`` for every step t."""
    labels, remaining = [], 0
    for n in reversed(step_tokens):
        remaining += int(n)
        labels.append(remaining)
    return labels[::-1]


class TokenCounter(BranchableWrapper):
    """Counts the assistant tokens of every action with the actor's tokenizer.

    The count covers the whole assistant response (reasoning, tool calls, answer) and never
    chat-template or observation tokens. When the action is a :class:`~ttg_envs.core.Generation`
    with ``token_ids``, the count is ``len(token_ids)``, exactly what the actor generated.

    Args:
        env: the env to wrap.
        tokenizer: an HF model name, a path, a tokenizer object, or None for the offline Qwen3
            vocabulary (see :func:`ttg_envs.tokenization.load_tokenizer`).

    Info: ``assistant_tokens``, ``assistant_tokens_total`` every step; ``ttg_labels`` when the
    episode ends (None unless it succeeded).
    """

    def __init__(self, env: gym.Env, tokenizer: Any = None):
        super().__init__(env)
        from ..tokenization import load_tokenizer

        self.tokenizer = load_tokenizer(tokenizer)
        self.step_tokens: list[int] = []
        self._counts: dict[str, int] = {}  # shared with branches: same tokenizer, same counts

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        """Reset the env and the per-episode counts."""
        obs, info = self.env.reset(seed=seed, options=options)
        self.step_tokens = []
        info["assistant_tokens_total"] = 0
        return obs, info

    def step(self, action: str | Generation):
        """Step the env and add this action's token count to ``info``."""
        n = self.count(action)
        obs, reward, terminated, truncated, info = self.env.step(action)
        self.step_tokens.append(n)
        info["assistant_tokens"] = n
        info["assistant_tokens_total"] = sum(self.step_tokens)
        if terminated or truncated:
            info["ttg_labels"] = token_to_go(self.step_tokens) if info.get("success") else None
        return obs, reward, terminated, truncated, info

    def count(self, action: str | Generation) -> int:
        """Tokens in one action: ``len(token_ids)`` when given, else the tokenizer's count of the text."""
        if isinstance(action, Generation):
            if action.token_ids is not None:
                return len(action.token_ids)
            action = action.text
        if not isinstance(action, str):
            return 0
        n = self._counts.get(action)
        if n is None:
            # A lone surrogate (text decoded with surrogateescape) cannot be encoded: count it as U+FFFD.
            n = self.tokenizer.count(_SURROGATES.sub("\ufffd", action))
            if len(self._counts) >= _COUNT_CACHE:
                self._counts.clear()
            self._counts[action] = n
        return n

    def branch_onto(self, inner: gym.Env) -> TokenCounter:
        """A copy around ``inner`` with its own list of per-step counts."""
        clone = super().branch_onto(inner)
        clone.step_tokens = list(self.step_tokens)
        return clone
