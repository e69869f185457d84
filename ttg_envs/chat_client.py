"""The package's one client of OpenAI-compatible ``/chat/completions`` servers (vLLM, SGLang, TGI, OpenAI...).

Actors (``openai:`` specs), meters (``openai:`` meters) and tau2's LLM user all send their requests
through :class:`ChatClient`, so they share one retry, timeout and error policy. Plain HTTP with the
standard library; nothing is sent anywhere but ``base_url``.

>>> ChatClient("http://localhost:8000/v1/", "m").url
'http://localhost:8000/v1/chat/completions'
"""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from typing import Any

__all__ = ["ChatClient", "ChatClientError", "ChatReplyError"]


class ChatClientError(RuntimeError):
    """The server could not be reached, answered with an HTTP error, or kept failing after the retries."""


class ChatReplyError(ChatClientError):
    """The server answered, but with a body that is not a chat completion (not JSON, no choices)."""


@dataclass
class ChatClient:
    """Where and how to ask for chat completions, and what to do when the server fails.

    The policy: connection errors, timeouts, HTTP 5xx and 429 are tried again ``retries`` times,
    waiting 0.5 s, 1 s, 2 s... (at most 8 s) in between; any other HTTP status fails at once.
    Failures raise :class:`ChatClientError` naming the URL (:class:`ChatReplyError` for an
    unreadable body), never a bare ``urllib`` exception.

    Args:
        base_url: the API root, e.g. ``http://localhost:8000/v1``.
        model: the served model name, sent with every request.
        api_key: sent as a bearer token when set.
        timeout: seconds per request; retries: extra attempts after a failure that may pass.
    """

    base_url: str
    model: str
    api_key: str | None = None
    timeout: float = 120.0
    retries: int = 0

    @property
    def url(self) -> str:
        """The ``/chat/completions`` URL requests go to."""
        return self.base_url.rstrip("/") + "/chat/completions"

    def create(self, **fields: Any) -> dict[str, Any]:
        """The decoded reply to one request with ``fields`` (``messages``, ``temperature``, ``n``, ``tools``...)."""
        body = json.dumps({"model": self.model, **fields}).encode("utf-8")
        headers = {"Content-Type": "application/json"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        error: Exception | None = None
        for attempt in range(self.retries + 1):
            if attempt:
                time.sleep(min(2.0 ** (attempt - 1) * 0.5, 8.0))
            request = urllib.request.Request(self.url, data=body, headers=headers, method="POST")
            try:
                with urllib.request.urlopen(request, timeout=self.timeout) as response:
                    raw = response.read()
            except urllib.error.HTTPError as exc:
                if exc.code < 500 and exc.code != 429:
                    detail = exc.read().decode(errors="replace")[:500]
                    raise ChatClientError(f"{self.url} answered HTTP {exc.code}: {detail}") from exc
                error = exc
            except (urllib.error.URLError, TimeoutError, ConnectionError, OSError) as exc:
                error = exc
            else:
                try:
                    return json.loads(raw.decode("utf-8"))
                except ValueError as exc:
                    raise ChatReplyError(f"{self.url} answered with a body that is not JSON: {raw[:200]!r}") from exc
        tries = f" after {self.retries + 1} attempts" if self.retries else ""
        raise ChatClientError(f"cannot get a completion from {self.url}{tries}: {error}") from error

    def message(self, **fields: Any) -> dict[str, Any]:
        """The first choice's message (``content``, ``tool_calls``) of :meth:`create`."""
        reply = self.create(**fields)
        try:
            return reply["choices"][0]["message"]
        except (KeyError, IndexError, TypeError) as exc:
            raise ChatReplyError(f"{self.url} returned no choices[0].message: {str(reply)[:300]}") from exc
