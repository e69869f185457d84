"""A minimal client for OpenAI-compatible chat-completion endpoints (vLLM, SGLang, OpenAI...).

Plain HTTP with the standard library: ``POST {base_url}/chat/completions``. Used by the LLM user
simulator; no SDK is needed and nothing is sent anywhere but ``base_url``.
"""

from __future__ import annotations

import json
import os
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from typing import Any, Sequence


class EndpointError(RuntimeError):
    """The endpoint could not be reached or answered with an error or an unreadable body."""


@dataclass
class ChatEndpoint:
    """Where and how to ask for a chat completion.

    Args:
        base_url: e.g. ``http://localhost:8000/v1`` (default ``$TTG_USER_BASE_URL``).
        model: the served model name (default ``$TTG_USER_MODEL``).
        api_key: sent as a bearer token when set (default ``$TTG_USER_API_KEY`` or ``$OPENAI_API_KEY``).
        sampling: extra request fields (``temperature``, ``top_p``, ``seed``, ``max_tokens``...).
        timeout: seconds per request.
    """

    base_url: str | None = None
    model: str | None = None
    api_key: str | None = None
    sampling: dict[str, Any] = field(default_factory=dict)
    timeout: float = 120.0

    def __post_init__(self):
        self.base_url = (self.base_url or os.environ.get("TTG_USER_BASE_URL") or "").rstrip("/")
        self.model = self.model or os.environ.get("TTG_USER_MODEL")
        self.api_key = self.api_key or os.environ.get("TTG_USER_API_KEY") or os.environ.get("OPENAI_API_KEY")
        if not self.base_url or not self.model:
            raise ValueError(
                "the LLM user needs an OpenAI-compatible endpoint: pass user_base_url and user_model "
                "(or set TTG_USER_BASE_URL and TTG_USER_MODEL), or use user='gold' for the scripted user"
            )

    def complete(self, messages: Sequence[dict[str, Any]], tools: Sequence[dict[str, Any]] | None = None) -> dict[str, Any]:
        """The assistant message (``content``, ``tool_calls``) of one chat completion."""
        body: dict[str, Any] = {"model": self.model, "messages": list(messages), **self.sampling}
        if tools:
            body["tools"] = list(tools)
        headers = {"Content-Type": "application/json"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        request = urllib.request.Request(
            f"{self.base_url}/chat/completions", data=json.dumps(body).encode(), headers=headers, method="POST"
        )
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:
                payload = json.loads(response.read().decode())
        except urllib.error.HTTPError as exc:
            detail = exc.read().decode(errors="replace")[:500]
            raise EndpointError(f"{self.base_url} answered HTTP {exc.code}: {detail}") from exc
        except (urllib.error.URLError, OSError, ValueError) as exc:
            raise EndpointError(f"cannot get a completion from {self.base_url}: {exc}") from exc
        try:
            return payload["choices"][0]["message"]
        except (KeyError, IndexError, TypeError) as exc:
            raise EndpointError(f"{self.base_url} returned no choices[0].message: {str(payload)[:300]}") from exc
