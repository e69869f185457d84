"""Where tau2's LLM user asks for completions: an OpenAI-compatible endpoint, from arguments or ``$TTG_USER_*``.

The requests go through the package's one client, :class:`~ttg_envs.chat_client.ChatClient`.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any, Sequence

from ...chat_client import ChatClient, ChatClientError

#: The endpoint could not be reached or answered with an error or an unreadable body (the chat client's error).
EndpointError = ChatClientError


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
        self.client = ChatClient(self.base_url, self.model, api_key=self.api_key, timeout=self.timeout)

    def complete(self, messages: Sequence[dict[str, Any]], tools: Sequence[dict[str, Any]] | None = None) -> dict[str, Any]:
        """The assistant message (``content``, ``tool_calls``) of one chat completion."""
        extra = {"tools": list(tools)} if tools else {}
        return self.client.message(messages=list(messages), **self.sampling, **extra)
