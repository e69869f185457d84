"""Generative meter behind any OpenAI-compatible chat-completions server (vLLM, SGLang, TGI...)."""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from functools import lru_cache
from typing import Any

from ..chat_client import ChatClient, ChatClientError, ChatReplyError
from .answer import parse_answer
from .base import CachedMeter, Estimate, History
from .prompt import PromptConfig, meter_messages

#: The server could not be reached or kept failing after the retries (the chat client's one error).
MeterServerError = ChatClientError


class OpenAIMeter(CachedMeter):
    """Sends each history as a chat request (temperature 0) and parses the reply strictly.

    Args:
        base_url: the server's API root, e.g. ``http://localhost:8000/v1``.
        model: the served model name.
        api_key: bearer token (default ``$OPENAI_API_KEY``, else none).
        prompt: how histories are rendered; the token budget is counted with ``tokenizer``.
        tokenizer: what :func:`~ttg_envs.tokenization.load_tokenizer` accepts (default: offline Qwen3).
        max_tokens: answer length limit.
        concurrency: requests in flight at once.
        timeout: seconds per request; retries: extra attempts on connection errors and 5xx/429
            (the policy of :class:`~ttg_envs.chat_client.ChatClient`).
        cache_size: see :class:`~ttg_envs.meters.base.CachedMeter`.

    An unparsable reply is an invalid estimate; a server that stays unreachable raises
    :class:`MeterServerError` (a silent stream of invalid estimates would hide an outage).
    """

    def __init__(
        self,
        base_url: str,
        model: str,
        *,
        api_key: str | None = None,
        prompt: PromptConfig | None = None,
        tokenizer: Any = None,
        max_tokens: int = 32,
        concurrency: int = 8,
        timeout: float = 120.0,
        retries: int = 2,
        cache_size: int = 65536,
    ):
        super().__init__(cache_size)
        from ..tokenization import load_tokenizer

        api_key = api_key if api_key is not None else os.environ.get("OPENAI_API_KEY")
        self.client = ChatClient(base_url, model, api_key=api_key, timeout=float(timeout), retries=int(retries))
        self.model = model
        self.prompt = prompt or PromptConfig()
        self.count = lru_cache(maxsize=65536)(load_tokenizer(tokenizer).count)
        self.max_tokens = int(max_tokens)
        self.concurrency = max(1, int(concurrency))

    def _estimate_uncached(self, histories: list[History]) -> list[Estimate]:
        with ThreadPoolExecutor(min(self.concurrency, len(histories))) as pool:
            return list(pool.map(self._one, histories))

    def _one(self, history: History) -> Estimate:
        messages = meter_messages(history, self.count, self.prompt)
        try:
            reply = self.client.create(messages=messages, temperature=0, max_tokens=self.max_tokens)
        except ChatReplyError:  # the server's reply itself is not JSON: an invalid estimate
            return parse_answer(None)
        return parse_answer(_reply_text(reply))


def _reply_text(reply: Any) -> Any:
    try:
        return reply["choices"][0]["message"]["content"]
    except (KeyError, IndexError, TypeError):
        return None
