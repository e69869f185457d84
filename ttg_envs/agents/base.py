"""The actor protocol, sampling parameters, and the base class of chat-model actors.

An actor proposes assistant responses for envs: ``sample(envs, n)`` returns ``n`` candidate
:class:`~ttg_envs.core.Generation` objects per env, in one batched call. Each carries the token
ids the actor generated (when the backend reports them), so ``TokenCounter`` counts exactly.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Protocol, Sequence, runtime_checkable

import gymnasium as gym

from ..core import Generation

#: A chat transcript as the env keeps it (``env.unwrapped.messages``).
Messages = Sequence[Mapping[str, Any]]


@dataclass(frozen=True)
class SamplingParams:
    """Actor decoding settings; the defaults are the paper's ALFWorld guidance protocol (appendix E.5).

    Attributes:
        temperature: 0 means greedy decoding.
        top_p: nucleus sampling mass.
        top_k: keep the k most likely tokens (None: no limit; paper table 5 uses 20 out of domain).
        max_tokens: response length limit per turn.
        thinking: ``enable_thinking`` for chat templates that read it (Qwen3); None leaves the template's default.
        seed: sampling seed where the backend supports one.
    """

    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int | None = None
    max_tokens: int = 512
    thinking: bool | None = None
    seed: int | None = None

    def template_kwargs(self) -> dict[str, Any]:
        """Extra chat-template arguments (``enable_thinking`` when set)."""
        return {} if self.thinking is None else {"enable_thinking": self.thinking}


@runtime_checkable
class Actor(Protocol):
    """Anything that proposes ``n`` assistant responses for each of several envs."""

    def sample(self, envs: Sequence[gym.Env], n: int = 1) -> list[list[Generation]]:
        """``n`` candidates per env, in env order."""
        ...


class ChatActor:
    """Base of model-backed actors: reads each env's transcript and calls :meth:`generate`.

    Args:
        sampling: decoding settings.
        window: which part of the transcript the prompt holds (:class:`~ttg_envs.agents.window.PromptWindow`,
            a name such as ``"paper"`` for appendix E.5's last 2 turns within 2048 tokens, or a turn
            count); default: the whole transcript.
    """

    def __init__(self, sampling: SamplingParams | None = None, *, window: Any = None):
        from .window import WindowedPrompts, as_window

        self.sampling = sampling or SamplingParams()
        self.window = as_window(window)
        self._windowed = WindowedPrompts(self.window, self.count_prompt_tokens)

    def sample(self, envs: Sequence[gym.Env], n: int = 1) -> list[list[Generation]]:
        """``n`` candidates per env, generated in one batch from the envs' (windowed) transcripts."""
        return self.generate([self._windowed(env.unwrapped.messages) for env in envs], n)

    def count_prompt_tokens(self, messages: Messages) -> int:
        """Tokens of a prompt made from ``messages``; backends with a tokenizer count exactly.

        This default counts message contents with the offline Qwen3 tokenizer plus 4 tokens of
        template per message (Qwen3's ChatML adds exactly that).
        """
        from ..tokenization import load_tokenizer

        tokenizer = getattr(self, "_count_tokenizer", None) or load_tokenizer()
        self._count_tokenizer = tokenizer
        return sum(tokenizer.count(str(m.get("content") or "")) + 4 for m in messages)

    def generate(self, histories: Sequence[Messages], n: int = 1) -> list[list[Generation]]:
        """``n`` responses per chat history."""
        raise NotImplementedError
