"""``ttg serve``: every ttg env as an OpenEnv server, made with OpenEnv's own server code.

Each WebSocket session (OpenEnv's ``/ws``) gets its own ``make_env`` stack, built at its first reset
(:class:`TTGEnvironment`). A step result carries the observation, reward, ``terminated`` /
``truncated``, the JSON-safe info fields and the transcript messages the step appended. Two
extensions that other OpenEnv clients never send: ``reset(fork=<session>)`` branches another
session, and a step action with ``sample`` asks the env's scripted policy for responses without
stepping. Safe defaults (:func:`make_app`): loopback unless a bearer token is set, capped message
sizes, a session cap and an idle timeout; sessions of one fork family share a lock.
"""

from __future__ import annotations

import functools
import hmac
import ipaddress
import json
import threading
import uuid
from dataclasses import dataclass, field
from typing import Any

from .wire import require_openenv

require_openenv("openenv.core.env_server.http_server")

import gymnasium as gym  # noqa: E402
from openenv.core.env_server.http_server import create_fastapi_app  # noqa: E402
from openenv.core.env_server.interfaces import Environment  # noqa: E402
from openenv.core.env_server.types import Action, ConcurrencyConfig, EnvironmentMetadata, Observation, State  # noqa: E402
from pydantic import Field  # noqa: E402

from ..core import Generation  # noqa: E402
from ..registry import policy_factory  # noqa: E402
from ..wrappers import branch, make_env  # noqa: E402
from ..wrappers.stack import cached_meter  # noqa: E402
from .wire import MAX_MESSAGE_BYTES, MAX_SAMPLES, RESET_KEYS, jsonable  # noqa: E402

__all__ = ["ServeConfig", "ServeError", "ServerThread", "TTGAction", "TTGEnvironment", "TTGObservation", "TTGState", "make_app", "serve"]

#: Scripted policies one session may hold (each ``scripted:`` actor that plays it makes one).
MAX_POLICIES = 16


class ServeError(ValueError):
    """A request the server refuses: the message says why (sent to the client as the error)."""


class TTGAction(Action):
    """One assistant response, exactly as a local ``env.step`` takes it (``sample``: see the module docstring)."""

    text: str = Field(default="", description="The assistant's response text (parsed by the env, as in process).")
    token_ids: list[int] | None = Field(default=None, description="Token ids the actor generated for it (TokenCounter counts them).")
    sample: dict[str, Any] | None = Field(
        default=None,
        description="Instead of stepping, ask the env's scripted policy for responses: {policy, seed, kwargs, n, key}.",
    )


class TTGObservation(Observation):
    """A reset or step result: the env's observation text, its info fields and the new transcript messages."""

    text: str = Field(default="", description="The observation text env.reset / env.step returned.")
    info: dict[str, Any] = Field(default_factory=dict, description="The info dict (documented ttg fields), JSON-safe.")
    terminated: bool = Field(default=False, description="gymnasium's terminated.")
    truncated: bool = Field(default=False, description="gymnasium's truncated.")
    messages: list[dict[str, Any]] = Field(
        default_factory=list, description="Transcript messages this call appended (after a reset or fork: the whole transcript)."
    )
    session: str = Field(default="", description="This session's id, which reset(fork=...) of another session takes.")
    samples: list[str] | None = Field(default=None, description="Scripted-policy responses (only for a `sample` action).")


class TTGState(State):
    """The session's env: its id, task count, current task and progress."""

    env_id: str = ""
    session: str = ""
    num_tasks: int = 0
    split: str | None = None
    max_steps: int | None = None
    task: dict[str, Any] | None = None
    done: bool = False


@dataclass
class ServeConfig:
    """What ``ttg serve`` serves and how.

    Attributes:
        env_id, env_kwargs: every session's env, ``make_env(env_id, meter=meter, **env_kwargs)``.
        meter: a ``load_meter`` spec (or meter) adding the progress fields server-side; None: none.
        failure_cost: C of eq. 7 for the meter (default: the env's table 4 value).
        host, port: where to listen (port 0: a free port).
        token: the bearer token clients must send; required for any non-loopback host.
        max_sessions: WebSocket sessions at once (forks count); more are refused with an error.
        idle_timeout: seconds without a message after which a session is closed (None: never).
        max_message_bytes: largest HTTP body or WebSocket message read.
    """

    env_id: str
    env_kwargs: dict[str, Any] = field(default_factory=dict)
    meter: Any = None
    failure_cost: float | None = None
    host: str = "127.0.0.1"
    port: int = 8000
    token: str | None = None
    max_sessions: int = 32
    idle_timeout: float | None = 600.0
    max_message_bytes: int = MAX_MESSAGE_BYTES
    #: Filled in by :func:`make_app` from a probe env: the task count and the split served.
    num_tasks: int = 0
    split: str | None = None
    max_steps: int | None = None

    def check(self) -> None:
        """Raise :class:`ServeError` for an unsafe or impossible setting."""
        if not is_loopback(self.host) and not self.token:
            raise ServeError(f"binding {self.host!r} (not a loopback address) needs a bearer token: pass --token")
        if self.max_sessions < 1:
            raise ServeError(f"max_sessions must be >= 1, got {self.max_sessions}")
        if self.idle_timeout is not None and self.idle_timeout <= 0:
            raise ServeError(f"idle_timeout must be > 0 seconds, got {self.idle_timeout}")


def is_loopback(host: str) -> bool:
    """Whether ``host`` names only this machine (``localhost``, 127.0.0.0/8, ``::1``)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class _LockedMeter:
    """One meter shared by every session's thread: calls are serialised (backends are not thread-safe)."""

    def __init__(self, meter: Any):
        self.meter = meter
        self._lock = threading.Lock()

    def estimate(self, histories):
        """The wrapped meter's estimates, one call at a time."""
        with self._lock:
            return self.meter.estimate(histories)


class _Sessions:
    """The server's live ttg sessions by id (what ``fork`` looks up)."""

    def __init__(self):
        self._lock = threading.Lock()
        self._by_id: dict[str, TTGEnvironment] = {}

    def add(self, session: TTGEnvironment) -> None:
        with self._lock:
            self._by_id[session.id] = session

    def remove(self, session: TTGEnvironment) -> None:
        with self._lock:
            self._by_id.pop(session.id, None)

    def get(self, session_id: Any) -> TTGEnvironment:
        with self._lock:
            found = self._by_id.get(session_id) if isinstance(session_id, str) else None
        if found is None or found.env is None:
            raise ServeError(f"unknown session id {str(session_id)[:80]!r} (closed, expired, never reset, or never existed)")
        return found

    def ids(self) -> set[str]:
        """The ids of the live sessions."""
        with self._lock:
            return set(self._by_id)

    def __len__(self) -> int:
        with self._lock:
            return len(self._by_id)


class TTGEnvironment(Environment[TTGAction, TTGObservation, TTGState]):
    """One OpenEnv session over one ttg env stack (built lazily, so OpenEnv's stateless
    ``/state`` and ``/metadata`` calls, which make a throwaway instance, cost nothing).

    Two extensions that OpenEnv clients that do not know them never send:

    - ``reset(fork=<session>)`` makes this session a branch of another one at its current state
      (``wrappers.branch``: the env's own snapshot, or replay checked by ``state_key``);
    - a step action with ``sample`` asks the env's scripted policy for responses without stepping,
      so ``scripted:`` actors play a remote env as they play a local one.
    """

    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self, config: ServeConfig, sessions: _Sessions, meter: Any = None):
        super().__init__()
        self.config = config
        self.sessions = sessions
        self.meter = meter
        self.id = uuid.uuid4().hex
        self.env: gym.Env | None = None
        self.lock = threading.RLock()
        self.policies: dict[str, Any] = {}
        self.closed = False
        self._sent = 0

    # ------------------------------------------------------------------ OpenEnv API
    def reset(self, seed: int | None = None, episode_id: str | None = None, **kwargs: Any) -> TTGObservation:
        """Reset the env (``options`` as gymnasium takes them), or with ``fork`` become a branch of that session."""
        unknown = sorted(set(kwargs) - set(RESET_KEYS))
        if unknown:
            raise ServeError(f"unknown reset argument(s) {unknown}; known: seed, episode_id, {', '.join(RESET_KEYS)}")
        self._check_open()
        options = kwargs.get("options")
        if options is not None and not isinstance(options, dict):
            raise ServeError("reset 'options' must be a JSON object")
        if kwargs.get("fork") is not None:
            return self._fork(kwargs["fork"], kwargs.get("method") or "auto")
        if self.env is None:
            self.env = self._make()
            self.sessions.add(self)
        with self.lock:
            obs, info = self.env.reset(seed=seed, options=options)
            messages = self.env.unwrapped.messages
            self._sent = len(messages)
            return self._observation(obs, None, False, False, info, messages)

    def step(self, action: TTGAction, timeout_s: float | None = None, **kwargs: Any) -> TTGObservation:
        """Step the env with the response (or answer a ``sample`` request without stepping)."""
        self._check_open()
        if self.env is None:
            raise ServeError("this session has no episode: send reset first (OpenEnv's stateless HTTP /step has none; use /ws)")
        if action.sample is not None:
            return self._sample(action.sample)
        act = Generation(action.text, action.token_ids) if action.token_ids is not None else action.text
        with self.lock:
            obs, reward, terminated, truncated, info = self.env.step(act)
            messages = self.env.unwrapped.messages
            new, self._sent = messages[self._sent :], len(messages)
            return self._observation(obs, reward, terminated, truncated, info, new)

    @property
    def state(self) -> TTGState:
        """The session's env id, task count, task and step count (cheap: no engine call)."""
        base = self.env.unwrapped if self.env is not None else None
        return TTGState(
            env_id=self.config.env_id,
            session=self.id,
            num_tasks=self.config.num_tasks,
            split=self.config.split,
            max_steps=self.config.max_steps,
            task=jsonable(getattr(base, "task", None)),
            step_count=int(getattr(base, "elapsed_steps", 0)),
            done=bool(getattr(base, "done", False)),
        )

    def get_metadata(self) -> EnvironmentMetadata:
        """The env id and what the server adds."""
        from .. import __version__

        meter = "with progress fields (server-side meter)" if self.meter is not None else "without a server-side meter"
        return EnvironmentMetadata(
            name=self.config.env_id,
            description=f"ttg-envs {self.config.env_id}, {meter}; actions are assistant text, observations text + info.",
            version=__version__,
        )

    def close(self) -> None:
        """Close the env stack (an AWM sandbox included) and forget the session."""
        if self.closed:
            return
        self.closed = True
        self.sessions.remove(self)
        with self.lock:  # not while a fork of this session is being made
            env, self.env = self.env, None
            if env is not None:
                env.close()

    # ------------------------------------------------------------------ internals
    def _check_open(self) -> None:
        if self.closed:
            raise ServeError("this session is closed (idle timeout, or closed by the client); open a new one")

    def _make(self) -> gym.Env:
        return make_env(self.config.env_id, meter=self.meter, failure_cost=self.config.failure_cost, **self.config.env_kwargs)

    def _fork(self, source_id: Any, method: str) -> TTGObservation:
        if source_id == self.id:
            raise ServeError("a session cannot fork itself")
        if method not in ("auto", "snapshot", "replay"):
            raise ServeError(f"method must be 'auto', 'snapshot' or 'replay', got {str(method)[:40]!r}")
        source = self.sessions.get(source_id)
        with source.lock:
            if source.env is None:
                raise ServeError(f"session {str(source_id)[:80]!r} was closed")
            env = branch(source.env, method)
            base = env.unwrapped
        if self.env is not None:
            old, self.env = self.env, None
            with self.lock:
                old.close()
        self.env, self.lock = env, source.lock
        self.sessions.add(self)
        messages = base.messages
        self._sent = len(messages)
        text = messages[-1].get("content") or "" if messages else ""
        info = {"state_key": base._state_key(), "elapsed_steps": base.elapsed_steps, "success": base.success}
        return self._observation(text, None, bool(base.done and base.success), bool(base.done and not base.success), info, messages)

    def _sample(self, request: dict[str, Any]) -> TTGObservation:
        name, key = request.get("policy"), request.get("key")
        seed, kwargs, n = request.get("seed"), request.get("kwargs") or {}, request.get("n", 1)
        if not isinstance(name, str) or not isinstance(key, str) or len(key) > 200:
            raise ServeError("sample needs 'policy' (a policy name) and 'key' (a string naming the caller's policy)")
        if seed is not None and (not isinstance(seed, int) or isinstance(seed, bool)):
            raise ServeError("sample 'seed' must be an integer or null")
        if not isinstance(kwargs, dict) or not isinstance(n, int) or isinstance(n, bool) or not 1 <= n <= MAX_SAMPLES:
            raise ServeError(f"sample 'kwargs' must be an object and 'n' an integer in 1..{MAX_SAMPLES}")
        with self.lock:
            if key not in self.policies:
                if len(self.policies) >= MAX_POLICIES:
                    raise ServeError(f"at most {MAX_POLICIES} scripted policies per session")
                try:
                    self.policies[key] = policy_factory(self.config.env_id)(name, seed=seed, **kwargs)
                except TypeError as exc:
                    raise ServeError(f"bad policy kwargs for {name!r}: {exc}") from None
            policy = self.policies[key]
            texts = [policy(self.env) for _ in range(n)]
        return TTGObservation(text="", session=self.id, samples=texts, done=bool(self.env.unwrapped.done))

    def _observation(self, text, reward, terminated, truncated, info, messages) -> TTGObservation:
        return TTGObservation(
            text=text,
            reward=None if reward is None else float(reward),
            done=bool(terminated or truncated),
            terminated=bool(terminated),
            truncated=bool(truncated),
            info=jsonable(info),
            messages=jsonable([dict(m) for m in messages]),
            session=self.id,
        )


class _Guard:
    """ASGI middleware in front of OpenEnv's app: the bearer token and the body size cap."""

    #: OpenEnv's stateless HTTP ``/reset`` builds a whole env stack per request, outside the
    #: session cap: at most this many run at once, more get 503.
    max_stateless = 2

    def __init__(self, app: Any, token: str | None, max_bytes: int):
        self.app = app
        self.expected = f"Bearer {token}".encode() if token else None
        self.max_bytes = max_bytes
        self.stateless = 0  # stateless resets in flight (one event loop: no lock needed)

    async def __call__(self, scope, receive, send):
        if scope["type"] not in ("http", "websocket"):
            return await self.app(scope, receive, send)
        headers = dict(scope.get("headers") or [])
        if self.expected is not None and not hmac.compare_digest(headers.get(b"authorization", b""), self.expected):
            return await self._refuse(scope, receive, send, 401, "missing or wrong bearer token (send 'Authorization: Bearer <token>')")
        if scope["type"] == "http":
            try:
                length = int(headers.get(b"content-length", b"0"))
            except ValueError:
                return await self._refuse(scope, receive, send, 400, "bad Content-Length")
            if length > self.max_bytes:
                return await self._refuse(scope, receive, send, 413, f"request body over {self.max_bytes} bytes")
            receive = self._capped(receive)
            if scope.get("path") != "/reset":
                return await self.app(scope, receive, send)
            if self.stateless >= self.max_stateless:
                return await self._refuse(scope, receive, send, 503, "busy: too many stateless HTTP resets at once; use a /ws session")
            self.stateless += 1
            try:
                return await self.app(scope, receive, send)
            finally:
                self.stateless -= 1
        try:
            await self.app(scope, self._objects_only(receive), send)
        except Exception as exc:
            # OpenEnv 0.3.0 closes the socket after the session's cleanup and lets a client's
            # own close surface as an error; the session is already gone by then.
            if type(exc).__name__ not in ("WebSocketDisconnect", "ClientDisconnected"):
                raise

    @staticmethod
    def _objects_only(receive):
        """OpenEnv 0.3.0 ends a WebSocket session on valid JSON that is not an object (``[1]``,
        ``"x"``); such a message becomes one of unknown type, which gets an error reply instead."""

        async def checked():
            message = await receive()
            text = message.get("text") if message["type"] == "websocket.receive" else None
            if text is not None and text.lstrip()[:1] != "{":
                try:
                    json.loads(text)
                except ValueError:
                    return message  # not JSON: OpenEnv answers "Invalid JSON" itself
                return {**message, "text": json.dumps({"type": "(a message must be a JSON object)"})}
            return message

        return checked

    def _capped(self, receive):
        seen = 0

        async def capped():
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > self.max_bytes:  # a chunked body without Content-Length
                    return {"type": "http.disconnect"}
            return message

        return capped

    async def _refuse(self, scope, receive, send, status: int, why: str) -> None:
        if scope["type"] == "websocket":
            await receive()  # websocket.connect
            await send({"type": "websocket.http.response.start", "status": status, "headers": [(b"content-type", b"application/json")]})
            await send({"type": "websocket.http.response.body", "body": json.dumps({"detail": why}).encode()})
            return
        body = json.dumps({"detail": why}).encode()
        await send({"type": "http.response.start", "status": status, "headers": [(b"content-type", b"application/json")]})
        await send({"type": "http.response.body", "body": body})


def make_app(config: ServeConfig) -> Any:
    """OpenEnv's FastAPI app for ``config`` (one :class:`TTGEnvironment` per session) behind the token and size guard.

    Safe defaults: loopback unless a bearer token is set; bodies and WebSocket messages are capped at
    :data:`~ttg_envs.serve.wire.MAX_MESSAGE_BYTES`; a session cap and an idle timeout (OpenEnv's
    ``ConcurrencyConfig``); a closed, expired or disconnected session's env is closed (AWM sandboxes
    included). Sessions of one fork family share a lock, since branches may share engine state.

    Makes one env first, to fail early on a bad env id or kwargs and to learn the task count.
    """
    config.check()
    probe = make_env(config.env_id, **config.env_kwargs)
    try:
        config.num_tasks = int(getattr(probe.unwrapped, "num_tasks", 0))
        config.max_steps = getattr(probe.unwrapped, "max_steps", None)
        split = config.env_kwargs.get("split")
        if split is None and config.num_tasks:
            split = probe.unwrapped._task_info(0).get("split")
        config.split = None if split is None else str(split)
    finally:
        probe.close()
    meter = _LockedMeter(cached_meter(config.meter)) if config.meter is not None else None
    sessions = _Sessions()
    factory = functools.partial(TTGEnvironment, config, sessions, meter)
    app = create_fastapi_app(
        factory,
        TTGAction,
        TTGObservation,
        concurrency_config=ConcurrencyConfig(max_concurrent_envs=config.max_sessions, session_timeout=config.idle_timeout),
    )
    from fastapi.exceptions import RequestValidationError
    from fastapi.responses import JSONResponse

    async def refused(request, exc):
        return JSONResponse({"detail": str(exc)}, status_code=400)

    async def invalid(request, exc):  # FastAPI's own handler fails (500) on a body that is not UTF-8
        return JSONResponse({"detail": jsonable(exc.errors())}, status_code=422)

    app.add_exception_handler(ServeError, refused)
    app.add_exception_handler(RequestValidationError, invalid)
    app.add_exception_handler(gym.error.ResetNeeded, refused)
    guard = _Guard(app, config.token, config.max_message_bytes)
    guard.sessions = sessions
    return guard


class ServerThread:
    """A server in a background thread of this process (tests, the benchmark): ``with ServerThread(config) as url:``."""

    def __init__(self, config: ServeConfig):
        import uvicorn

        self.config = config
        self.app = make_app(config)
        settings = uvicorn.Config(
            self.app, host=config.host, port=config.port, ws_max_size=config.max_message_bytes, log_level="warning", lifespan="on"
        )
        self.server = uvicorn.Server(settings)
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    @property
    def address(self) -> tuple[str, int]:
        """(host, port) the server listens on (port 0 in the config: the one picked)."""
        return self.server.servers[0].sockets[0].getsockname()[:2]

    @property
    def url(self) -> str:
        """``http://host:port`` of the running server."""
        host, port = self.address
        return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"

    def start(self) -> str:
        """Start serving; returns :attr:`url` once the server accepts connections."""
        import time

        self.thread.start()
        deadline = time.monotonic() + 30
        while not self.server.started:
            if not self.thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError(f"the server did not start on {self.config.host}:{self.config.port}")
            time.sleep(0.02)
        return self.url

    def stop(self) -> None:
        """Stop serving and wait for the thread (open sessions are closed as their sockets close)."""
        self.server.should_exit = True
        self.thread.join(timeout=30)

    def __enter__(self) -> str:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


def serve(config: ServeConfig, ready: Any = None) -> None:
    """Serve ``config`` until interrupted; ``ready(url)`` is called once it listens."""
    server = ServerThread(config)
    url = server.start()
    if ready is not None:
        ready(url)
    try:
        server.thread.join()
    except KeyboardInterrupt:
        pass
    finally:
        server.stop()
