"""``RemoteEnv``: a gymnasium env over a ``ttg serve`` session, through OpenEnv's ``GenericEnvClient``.

It keeps what a local ``TextEnv`` keeps (``messages``, ``actions``, ``task``, ``elapsed_steps``,
``done``, ``success``) from what the server sends, so wrappers, selectors, the runner and the
trainer use it unchanged; ``branch()`` forks the server session, so ``try_actions``,
``score_actions`` and ``GuidedSelector`` work over the wire. Also ``gym.make("ttg/Remote-v0",
url=..., env_id=...)``.
"""

from __future__ import annotations

import asyncio
import copy
import json
import os
import threading
import uuid
import weakref
from typing import Any

import gymnasium as gym

from ..core import Generation, TextSpace, copy_rng
from .wire import require_openenv

__all__ = ["RemoteEnv", "RemoteEnvError", "RemotePolicy"]


class RemoteEnvError(RuntimeError):
    """The server refused a request or could not be reached; the message says why."""


_LOOP: asyncio.AbstractEventLoop | None = None
_LOOP_LOCK = threading.Lock()


def _loop() -> asyncio.AbstractEventLoop:
    """One background event loop per process that every RemoteEnv's client runs on."""
    global _LOOP
    with _LOOP_LOCK:
        if _LOOP is None or _LOOP.is_closed():
            _LOOP = asyncio.new_event_loop()
            threading.Thread(target=_LOOP.run_forever, name="ttg-remote-env", daemon=True).start()
        return _LOOP


def _client_class():
    require_openenv("openenv.core.generic_client")
    from openenv.core.generic_client import GenericEnvClient
    from websockets.asyncio.client import connect
    from websockets.exceptions import ConnectionClosed

    class _Client(GenericEnvClient):
        """OpenEnv's generic client, plus the bearer token header (0.3.0 has no header option)."""

        def __init__(self, base_url: str, token: str | None, **kwargs: Any):
            super().__init__(base_url, **kwargs)
            self._headers = {"Authorization": f"Bearer {token}"} if token else None

        async def connect(self):
            if self._ws is None:
                try:
                    self._ws = await connect(
                        self._ws_url, open_timeout=self._connect_timeout, max_size=self._max_message_size, additional_headers=self._headers
                    )
                except Exception as exc:
                    raise ConnectionError(f"Failed to connect to {self._ws_url}: {exc}") from exc
            return self

        async def _send_and_receive(self, message):
            try:
                return await super()._send_and_receive(message)
            except ConnectionClosed:
                # The server may have said why before closing (a full server does): read it.
                try:
                    reply = json.loads(await asyncio.wait_for(self._ws.recv(), 1.0))
                except Exception:
                    reply = None
                if isinstance(reply, dict) and reply.get("type") == "error":
                    data = reply.get("data") or {}
                    raise RuntimeError(f"Server error: {data.get('message')} (code: {data.get('code')})") from None
                raise

    return _Client


class RemotePolicy:
    """A scripted policy of the served env, run server-side (see ``ScriptedActor``); one RNG per session."""

    def __init__(self, name: str, seed: int | None, kwargs: dict[str, Any]):
        self.name, self.seed, self.kwargs = name, seed, dict(kwargs)
        self.key = uuid.uuid4().hex

    def sample(self, env: gym.Env, n: int = 1) -> list[str]:
        """``n`` responses of the policy for ``env``'s current state."""
        return env.unwrapped._sample({"policy": self.name, "seed": self.seed, "kwargs": self.kwargs, "n": n, "key": self.key})

    def __call__(self, env: gym.Env) -> str:
        """The next response for ``env``."""
        return self.sample(env, 1)[0]


class RemoteEnv(gym.Env[str, str]):
    """A ttg env served by ``ttg serve`` at ``url``; plays like the local env.

    Args:
        url: the server (``http://host:port``).
        env_id: the env id it must serve (checked; None: any).
        split: the split it must serve (checked; None: any). The server's ``--env-kwargs`` fix
            the env's configuration; this lets code that passes ``split=`` (the runner) check it.
        max_steps: the truncation limit it must serve (checked; None: any), for code that passes it (the trainer).
        token: the bearer token (default: ``$TTG_SERVE_TOKEN``).
        timeout: seconds to wait for one reply.
    """

    metadata = {"render_modes": ["ansi", "human"], "render_fps": 1}

    def __init__(
        self,
        url: str,
        env_id: str | None = None,
        *,
        split: str | None = None,
        max_steps: int | None = None,
        token: str | None = None,
        timeout: float = 300.0,
        render_mode: str | None = None,
    ):
        self.url = url
        self.token = token if token is not None else os.environ.get("TTG_SERVE_TOKEN")
        self.timeout = float(timeout)
        self.render_mode = render_mode
        self.observation_space = TextSpace()
        self.action_space = TextSpace()
        self._client = _client_class()(url, self.token, message_timeout_s=self.timeout)
        self._finalizer = weakref.finalize(self, _close_later, self._client)
        state = self._run(self._client.state())
        self.served_env_id: str = state.get("env_id", "")
        if env_id is not None and env_id != self.served_env_id:
            self.close()
            raise RemoteEnvError(f"the server at {url} serves {self.served_env_id!r}, not {env_id!r}")
        self.served_split: str | None = state.get("split")
        if split is not None and str(split) != self.served_split:
            self.close()
            raise RemoteEnvError(f"the server at {url} serves split {self.served_split!r} of {self.served_env_id}, not {split!r}")
        self.max_steps: int | None = state.get("max_steps")
        if max_steps is not None and int(max_steps) != self.max_steps:
            self.close()
            raise RemoteEnvError(
                f"the server at {url} truncates {self.served_env_id} episodes at {self.max_steps} steps, not {max_steps} "
                "(set max_steps in its --env-kwargs)"
            )
        self.num_tasks: int = int(state.get("num_tasks", 0))
        self.session: str | None = None
        self.messages: list[dict[str, Any]] = []
        self.actions: list[str] = []
        self.task: dict[str, Any] | None = None
        self.elapsed_steps = 0
        self.done = False
        self.success = False

    # ----------------------------------------------------------------- gymnasium API
    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        """Reset the remote env (same seed and options, same task as in process)."""
        super().reset(seed=seed)
        data: dict[str, Any] = {}
        if seed is not None:
            data["seed"] = seed
        if options is not None:
            data["options"] = options
        obs = self._reply(self._run(self._client.reset(**data)))
        self.messages = list(obs["messages"])
        self.actions = []
        self.task = obs["info"].get("task")
        self.elapsed_steps = 0
        self.done = self.success = False
        return obs["text"], obs["info"]

    def step(self, action: str | Generation) -> tuple[str, float, bool, bool, dict[str, Any]]:
        """Step the remote env with one assistant response."""
        if self.session is None:
            raise gym.error.ResetNeeded("Cannot call step() before reset().")
        if self.done:
            raise gym.error.ResetNeeded("The episode is over (terminated or truncated); call reset().")
        if isinstance(action, Generation):
            payload = {"text": action.text, "token_ids": None if action.token_ids is None else [int(t) for t in action.token_ids]}
        elif isinstance(action, str):
            payload = {"text": action}
        else:
            raise TypeError(f"RemoteEnv.step takes str or Generation, got {type(action).__name__}")
        obs = self._reply(self._run(self._client.step(payload)))
        info = obs["info"]
        self.actions.append(payload["text"])
        self.messages.extend(obs["messages"])
        self.elapsed_steps = int(info.get("elapsed_steps", self.elapsed_steps + 1))
        self.success = bool(info.get("success", False))
        self.done = bool(obs["terminated"] or obs["truncated"])
        if self.render_mode == "human":
            self.render()
        return obs["text"], float(obs["reward"] or 0.0), bool(obs["terminated"]), bool(obs["truncated"]), info

    def render(self) -> str | None:
        """``ansi``: the transcript as text; ``human``: print the last turn."""
        if self.render_mode == "human":
            print(f"[{self.messages[-1]['role']}] {self.messages[-1]['content']}")
            return None
        if self.render_mode == "ansi":
            return "\n\n".join(f"[{m['role']}]\n{m['content']}" for m in self.messages)
        return None

    def close(self) -> None:
        """End the session (the server closes its env)."""
        if self._finalizer.alive:
            self._finalizer.detach()
            try:
                self._run(self._client.close(), timeout=10)
            except Exception:
                pass  # the server reclaims a session whose connection is gone
        super().close()

    @property
    def system_prompt(self) -> str:
        """The system message that opens the transcript (after a reset)."""
        return self.messages[0]["content"] if self.messages and self.messages[0].get("role") == "system" else ""

    # ----------------------------------------------------------------- branching and policies
    def branch(self, method: str = "auto") -> RemoteEnv:
        """A new session on the server in this one's state (the env's own ``branch``), with its own future."""
        if self.session is None:
            raise gym.error.ResetNeeded("Cannot branch before reset().")
        clone = RemoteEnv(self.url, token=self.token, timeout=self.timeout, render_mode=self.render_mode)
        obs = clone._reply(clone._run(clone._client.reset(fork=self.session, method=method)))
        clone.spec = self.spec
        clone.messages = list(obs["messages"])
        clone.actions = list(self.actions)
        clone.task = copy.deepcopy(self.task)
        clone.elapsed_steps, clone.done, clone.success = self.elapsed_steps, self.done, self.success
        clone._np_random = copy_rng(self._np_random)
        return clone

    def remote_policy(self, name: str, *, seed: int | None = None, **kwargs: Any) -> RemotePolicy:
        """The served env's scripted policy ``name``, run on the server (``ScriptedActor`` uses it)."""
        return RemotePolicy(name, seed, kwargs)

    def _sample(self, request: dict[str, Any]) -> list[str]:
        if self.session is None:
            raise gym.error.ResetNeeded("Cannot sample a policy before reset().")
        result = self._run(self._client.step({"sample": request}))
        return list(result.observation.get("samples") or [])

    # ----------------------------------------------------------------- wire
    def _run(self, coro, timeout: float | None = None) -> Any:
        future = asyncio.run_coroutine_threadsafe(coro, _loop())
        try:
            return future.result(timeout=(timeout or self.timeout) + 5)
        except RuntimeError as exc:  # OpenEnv's client raises RuntimeError("Server error: ...")
            raise RemoteEnvError(f"{self.url}: {exc}") from None
        except ConnectionError as exc:
            raise RemoteEnvError(f"cannot reach a ttg server at {self.url}: {exc}") from None
        except Exception as exc:
            if type(exc).__name__.startswith("ConnectionClosed"):
                raise RemoteEnvError(f"{self.url}: the server closed the session ({exc})") from None
            raise

    def _reply(self, result: Any) -> dict[str, Any]:
        obs = dict(result.observation)
        obs["reward"] = result.reward
        self.session = obs.get("session") or self.session
        return obs


def _close_later(client: Any) -> None:
    """Close a collected env's connection without waiting (branches are dropped, not closed)."""
    loop = _LOOP
    if loop is not None and not loop.is_closed():
        try:
            asyncio.run_coroutine_threadsafe(client.close(), loop)
        except RuntimeError:
            pass
