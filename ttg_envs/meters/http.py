"""Generative meter behind any OpenAI-compatible chat-completions server (vLLM, SGLang, TGI...)."""

from __future__ import annotations

import json
import os
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from functools import lru_cache
from typing import Any

from .answer import parse_answer
from .base import CachedMeter, Estimate, History
from .prompt import PromptConfig, meter_messages


class MeterServerError(RuntimeError):
    """The server could not be reached or kept failing after the retries."""


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
        timeout: seconds per request; retries: extra attempts on connection errors and 5xx/429.
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

        self.url = base_url.rstrip("/") + "/chat/completions"
        self.model = model
        self.api_key = api_key if api_key is not None else os.environ.get("OPENAI_API_KEY")
        self.prompt = prompt or PromptConfig()
        self.count = lru_cache(maxsize=65536)(load_tokenizer(tokenizer).count)
        self.max_tokens = int(max_tokens)
        self.concurrency = max(1, int(concurrency))
        self.timeout = float(timeout)
        self.retries = int(retries)

    def _estimate_uncached(self, histories: list[History]) -> list[Estimate]:
        with ThreadPoolExecutor(min(self.concurrency, len(histories))) as pool:
            return list(pool.map(self._one, histories))

    def _one(self, history: History) -> Estimate:
        body = json.dumps(
            {
                "model": self.model,
                "messages": meter_messages(history, self.count, self.prompt),
                "temperature": 0,
                "max_tokens": self.max_tokens,
            }
        ).encode("utf-8")
        headers = {"Content-Type": "application/json"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        error: Exception | None = None
        for attempt in range(self.retries + 1):
            request = urllib.request.Request(self.url, data=body, headers=headers, method="POST")
            try:
                with urllib.request.urlopen(request, timeout=self.timeout) as response:
                    reply = json.loads(response.read().decode("utf-8"))
                return parse_answer(_reply_text(reply))
            except urllib.error.HTTPError as exc:
                if exc.code < 500 and exc.code != 429:
                    raise MeterServerError(f"{self.url} answered HTTP {exc.code}: {exc.read()[:200]!r}") from exc
                error = exc
            except (urllib.error.URLError, TimeoutError, ConnectionError) as exc:
                error = exc
            except ValueError:  # the server's reply itself is not JSON
                return parse_answer(None)
            time.sleep(min(2.0**attempt * 0.5, 8.0))
        raise MeterServerError(f"{self.url} failed after {self.retries + 1} attempts: {error}") from error


def _reply_text(reply: Any) -> Any:
    try:
        return reply["choices"][0]["message"]["content"]
    except (KeyError, IndexError, TypeError):
        return None
