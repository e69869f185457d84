"""``openai:<base-url>#<model>`` actors: any OpenAI-compatible chat-completions server."""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Sequence

from ..chat_client import ChatClient
from ..core import Generation
from .base import ChatActor, Messages, SamplingParams


class OpenAIActor(ChatActor):
    """One chat request per history asking for ``n`` choices; requests run concurrently.

    The request asks for ``return_token_ids`` (vLLM servers answer with each choice's
    ``token_ids``); servers that ignore it give ``token_ids=None`` and TokenCounter re-tokenises.

    Args:
        base_url: API root, e.g. ``http://localhost:8000/v1``; model: the served model name.
        api_key: bearer token (default ``$OPENAI_API_KEY``, else none).
        concurrency: requests in flight; timeout: seconds per request; retries: extra attempts on
            connection errors and 5xx/429 (the policy of :class:`~ttg_envs.chat_client.ChatClient`).
        window: the part of the transcript sent (see :class:`~ttg_envs.agents.base.ChatActor`; the
            token budget is counted with the offline Qwen3 tokenizer, the server's is not known).
    """

    def __init__(
        self,
        base_url: str,
        model: str,
        sampling: SamplingParams | None = None,
        *,
        api_key: str | None = None,
        concurrency: int = 16,
        timeout: float = 300.0,
        retries: int = 0,
        window: Any = None,
    ):
        super().__init__(sampling, window=window)
        api_key = api_key if api_key is not None else os.environ.get("OPENAI_API_KEY")
        self.client = ChatClient(base_url, model, api_key=api_key, timeout=float(timeout), retries=int(retries))
        self.model = model
        self.concurrency = int(concurrency)

    def generate(self, histories: Sequence[Messages], n: int = 1) -> list[list[Generation]]:
        """``n`` sampled responses per history."""
        with ThreadPoolExecutor(max(1, min(self.concurrency, len(histories)))) as pool:
            return list(pool.map(lambda h: self._request(h, n), histories))

    def _request(self, history: Messages, n: int) -> list[Generation]:
        s = self.sampling
        body: dict[str, Any] = {
            "messages": list(history),
            "n": n,
            "temperature": s.temperature,
            "top_p": s.top_p,
            "max_tokens": s.max_tokens,
            "return_token_ids": True,
        }
        if s.top_k:
            body["top_k"] = s.top_k
        if s.seed is not None:
            body["seed"] = s.seed
        if s.template_kwargs():
            body["chat_template_kwargs"] = s.template_kwargs()
        reply = self.client.create(**body)
        choices = sorted(reply["choices"], key=lambda c: c.get("index", 0))
        return [Generation(c["message"].get("content") or "", c.get("token_ids")) for c in choices]
