"""The child side of the AWM sandbox: model-written app code and verifiers run here, with least power.

Each child is a fresh process forked from a clean fork server (:mod:`.zygote`), which by default
runs inside the OS sandbox of :mod:`.isolation` (namespaces, uid 65534, a read-only system, only
the episode folder writable): that is the boundary. Before any model-written code runs, a child

- sets hard resource limits, soft = hard (:data:`DEFAULT_LIMITS`), and moves into its folder;
- installs an audit hook (PEP 578) that refuses network sockets, name lookups, new processes,
  signals, ctypes, SQLite extensions, writes outside the folder and reads outside the Python
  installation. Code can switch this hook off (it is a Python object), so it only catches code that
  reaches where it should not by accident; with ``sandbox="python"`` it is all there is;
- makes every SQLite connection refuse ``ATTACH`` and, for an app, open the episode database
  whatever path the code names (SQLAlchemy's connections included).

A running app also forks itself for a branch (``{"op": "fork"}`` with a new socket attached): the
copy keeps the app's memory, drops its SQLite connections without touching the original's file
(SQLAlchemy pools are disposed, raw connections refuse every statement) and serves the branch's
own database copy, in the branch's folder. The copy runs in the same OS sandbox as the original.

Messages to and from the parent are JSON bytes, so a child can never make the parent unpickle.
"""

from __future__ import annotations

import asyncio
import builtins
import gc
import inspect
import json
import os
import resource
import signal
import socket
import sqlite3
import sys
import sysconfig
import traceback
import types
import weakref
from typing import Any

# Imported here, before the guard is up, so app code importing them needs no file access.
try:
    import anyio._backends._asyncio  # noqa: F401  (else the first sync route of each process imports it)
    import fastapi
    import httpx
    import pydantic  # noqa: F401
    import sqlalchemy  # noqa: F401
except ImportError:  # reported to the parent when an app is loaded
    fastapi = httpx = None

#: Longest response body returned to the agent, in characters.
MAX_BODY_CHARS = 16_000
_BLOCKED = frozenset(
    {
        "subprocess.Popen",
        "os.system",
        "os.exec",
        "os.posix_spawn",
        "os.spawn",
        "os.fork",
        "os.forkpty",
        "os.kill",
        "os.killpg",
        "signal.pthread_kill",
        "pty.spawn",
        "ctypes.dlopen",
        "ctypes.dlsym",
        "ctypes.cdata",
        "ctypes.call_function",
        "sqlite3.enable_load_extension",
        "sqlite3.load_extension",
        "webbrowser.open",
        "urllib.Request",
        "socket.getaddrinfo",
        "socket.gethostbyname",
        "socket.gethostbyname_ex",
        "socket.gethostbyaddr",
        "socket.getnameinfo",
        "os.setuid",
        "os.setgid",
        "os.chroot",
        "sys.remote_exec",
    }
)
_WRITE_EVENTS = frozenset(
    {
        "os.remove",
        "os.rename",
        "os.rmdir",
        "os.mkdir",
        "os.chmod",
        "os.chown",
        "os.symlink",
        "os.link",
        "os.truncate",
        "os.utime",
        "shutil.rmtree",
        "os.chflags",
        "os.lchflags",
        "os.mkfifo",
        "os.mknod",
        "os.setxattr",
        "os.removexattr",
        "shutil.move",
        "shutil.copytree",
        "os.chdir",
    }
)
_LIST_EVENTS = frozenset({"os.listdir", "os.scandir", "glob.glob", "os.listxattr", "os.getxattr"})
_SOCKET_EVENTS = frozenset({"socket.connect", "socket.bind", "socket.sendto", "socket.sendmsg"})
_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_TRUNC


def _read_roots() -> tuple[str, ...]:
    paths = {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix, "/usr/share/zoneinfo"}
    paths.update(v for k, v in sysconfig.get_paths().items() if k in ("stdlib", "platstdlib", "purelib", "platlib"))
    return tuple(os.path.realpath(p) + os.sep for p in paths if p)


class _Guard:
    """The audit hook: what the child may touch."""

    def __init__(self, folder: str, databases: set[str]):
        self.folder = os.path.realpath(folder) + os.sep
        self.databases = {os.path.realpath(d) for d in databases}
        self.read_roots = _read_roots()

    def _inside(self, path: Any) -> bool:
        p = os.path.realpath(os.fsdecode(path)) if isinstance(path, (str, bytes, os.PathLike)) else None
        return p is not None and (p + os.sep).startswith(self.folder)

    def _readable(self, path: Any) -> bool:
        if self._inside(path):
            return True
        p = os.path.realpath(os.fsdecode(path)) if isinstance(path, (str, bytes, os.PathLike)) else ""
        return p.startswith(self.read_roots)

    def move(self, folder: str, databases: set[str]) -> None:
        """Confine to another folder and databases (a forked branch app)."""
        self.folder = os.path.realpath(folder) + os.sep
        self.databases = {os.path.realpath(d) for d in databases}

    def __call__(self, event: str, args: tuple) -> None:
        if event == "os.fork" and _FORKING:
            return
        if event == "open":
            path, mode, flags = args
            if isinstance(path, int):
                return
            writing = any(c in (mode or "") for c in "wax+") or bool((flags or 0) & _WRITE_FLAGS)
            if self._inside(path) or (not writing and self._readable(path)):
                return
            raise PermissionError(f"sandbox: {'writing' if writing else 'reading'} {os.fsdecode(path)!r} is not allowed")
        if event in _BLOCKED:
            raise PermissionError(f"sandbox: {event} is not allowed")
        if event in _WRITE_EVENTS:
            for arg in args:
                if isinstance(arg, (str, bytes, os.PathLike)) and not self._inside(arg):
                    raise PermissionError(f"sandbox: {event} on {os.fsdecode(arg)!r} is not allowed")
        elif event in _LIST_EVENTS:
            if args and isinstance(args[0], (str, bytes, os.PathLike)) and not self._readable(args[0]):
                raise PermissionError(f"sandbox: listing {os.fsdecode(args[0])!r} is not allowed")
        elif event == "socket.__new__":
            if args[1] != socket.AF_UNIX:
                raise PermissionError("sandbox: network sockets are not allowed")
        elif event in _SOCKET_EVENTS:
            if getattr(args[0], "family", None) != socket.AF_UNIX:
                raise PermissionError("sandbox: network access is not allowed")
        elif event == "sqlite3.connect":
            database = os.fsdecode(args[0]) if isinstance(args[0], (str, bytes, os.PathLike)) else ""
            if database.startswith("file:"):
                database = database[5:].split("?", 1)[0]
            if database not in ("", ":memory:") and os.path.realpath(database) not in self.databases:
                raise PermissionError(f"sandbox: opening database {database!r} is not allowed")


def _no_attach(action: int, *args: Any) -> int:
    return sqlite3.SQLITE_DENY if action in (sqlite3.SQLITE_ATTACH, sqlite3.SQLITE_DETACH) else sqlite3.SQLITE_OK


def _deny_all(action: int, *args: Any) -> int:
    return sqlite3.SQLITE_DENY


class _Tracked(sqlite3.Connection):
    """A connection the sandbox can find again (sqlite3's own class has no weak references)."""


#: Where the app's on-disk connections go, the guard, the connections opened, and whether our own
#: fork is under way (the guard refuses every other one).
_STATE: dict[str, Any] = {"database": None, "guard": None}
_CONNECTIONS: weakref.WeakSet = weakref.WeakSet()
_INHERITED: list[Any] = []
_FORKING = False


#: Hard resource limits of a child (soft = hard, so the child cannot raise them): address space and
#: file size in bytes, CPU seconds, processes of the sandbox uid, open files.
DEFAULT_LIMITS = {"as": 4 << 30, "fsize": 256 << 20, "cpu": 600, "nproc": 64, "nofile": 256}
_RLIMITS = {
    "as": resource.RLIMIT_AS,
    "fsize": resource.RLIMIT_FSIZE,
    "cpu": resource.RLIMIT_CPU,
    "nproc": resource.RLIMIT_NPROC,
    "nofile": resource.RLIMIT_NOFILE,
}


def set_limits(limits: dict[str, int] | None = None) -> None:
    """Set every limit of :data:`DEFAULT_LIMITS` (overridden by ``limits``) as both soft and hard limit."""
    wanted = {**DEFAULT_LIMITS, **(limits or {})}
    for key, value in [*wanted.items(), ("core", 0)]:
        limit = _RLIMITS.get(key, resource.RLIMIT_CORE)
        _, hard = resource.getrlimit(limit)
        value = int(value) if hard == resource.RLIM_INFINITY else min(int(value), hard)
        resource.setrlimit(limit, (value, value))


def _confine(folder: str, databases: set[str], limits: dict[str, int] | None = None) -> None:
    set_limits(limits)
    sys.dont_write_bytecode = True
    os.chdir(folder)
    guard = _STATE["guard"] = _Guard(folder, databases)
    sys.addaudithook(guard)


def _confine_sqlite(database: str | None) -> None:
    """Every SQLite connection refuses ``ATTACH``; with ``database``, every on-disk one opens it.

    The redirect is how the episode database reaches the app, whatever path its code names (AWM
    rewrites the ``create_engine`` line instead); SQLAlchemy's pysqlite dialect goes through here too.
    """
    real = sqlite3.connect
    _STATE["database"] = database

    def connect(target: Any = ":memory:", *args: Any, **kwargs: Any):
        name = os.fsdecode(target) if isinstance(target, (str, bytes, os.PathLike)) else ""
        database = _STATE["database"]
        if database is not None and name not in ("", ":memory:") and "mode=memory" not in name:
            target = database
            kwargs.pop("uri", None)
        tracked = len(args) < 5 and "factory" not in kwargs
        conn = real(target, *args, **({"factory": _Tracked, **kwargs} if tracked else kwargs))
        conn.set_authorizer(_no_attach)
        if tracked:
            _CONNECTIONS.add(conn)
        if database is not None:
            # The episode file is a scratch copy: commits need not wait for the disk.
            conn.execute("PRAGMA synchronous = OFF")
        return conn

    sqlite3.connect = connect
    sqlite3.dbapi2.connect = connect


def _describe(exc: BaseException) -> str:
    frames = traceback.extract_tb(exc.__traceback__)
    where = next((f"line {f.lineno}" for f in reversed(frames) if f.filename.startswith("<awm_")), "")
    return f"{type(exc).__name__}: {exc}" + (f" ({where})" if where else "")


def _send(conn, payload: dict[str, Any]) -> None:
    conn.send_bytes(json.dumps(payload, default=repr).encode("utf-8"))


def _namespace(name: str) -> dict[str, Any]:
    # A registered module, so that pydantic can resolve the code's annotations through sys.modules.
    module = types.ModuleType(name)
    module.__dict__["__builtins__"] = builtins
    sys.modules[name] = module
    return module.__dict__


def _find_app(namespace: dict[str, Any]):
    app = namespace.get("app")
    if isinstance(app, fastapi.FastAPI):
        return app
    for value in namespace.values():
        if isinstance(value, fastapi.FastAPI):
            return value
    raise LookupError("the environment code defines no FastAPI app")


def serve_app(conn, folder: str, database: str, code: str, openapi: bool = True, limits: dict[str, int] | None = None) -> None:
    """Load an AWM app over ``database`` and answer the parent's requests until the pipe closes.

    First reply: ``{"ok": true, "openapi": {...}}`` (``null`` unless ``openapi``) or
    ``{"ok": false, "error": ...}``. Then each
    request ``{"method", "path", "query", "body"?}`` gets ``{"ok": true, "status", "body"}``.
    """
    if fastapi is None or httpx is None:
        _send(conn, {"ok": False, "error": "fastapi/httpx/sqlalchemy are not installed (pip install 'ttg-envs[awm]')"})
        return
    _confine(folder, {database}, limits)
    _confine_sqlite(database)
    _fork_safe_pools()
    loop = asyncio.new_event_loop()
    try:
        namespace = _namespace("awm_env")
        exec(compile(code, "<awm_env>", "exec"), namespace)
        app = _find_app(namespace)
        loop.run_until_complete(app.router.lifespan_context(app).__aenter__())
        schema = json.loads(json.dumps(app.openapi(), default=str)) if openapi else None
        # One request no route answers: the first request's lazy set-up happens now, once, and a
        # fork of this app (a warm app, a branch) starts with it done.
        warm = httpx.AsyncClient(transport=httpx.ASGITransport(app=app, raise_app_exceptions=False), base_url="http://awm.local")
        try:
            loop.run_until_complete(warm.get("/.ttg-warm-up"))
        except Exception:  # best effort, like the engines below
            pass
        _connect_engines()
    except BaseException as exc:
        _send(conn, {"ok": False, "error": f"the environment code failed to load: {_describe(exc)}"})
        return
    _send(conn, {"ok": True, "openapi": schema})
    _serve(conn, app, loop)


def _connect_engines() -> None:
    """Open and close one connection of every SQLAlchemy engine: the dialect's first-connect set-up
    reads the database once, here, not in every fork's first request (and no fork inherits a file)."""
    engine_cls = getattr(sys.modules.get("sqlalchemy.engine"), "Engine", None)
    if engine_cls is None:
        return
    for obj in gc.get_objects():
        if isinstance(obj, engine_cls):
            try:
                with obj.connect():
                    pass
                obj.dispose()
            except Exception:  # best effort: an engine that cannot connect fails in its requests, as before
                pass


def _fork_safe_pools() -> None:
    """SQLAlchemy's recipe for pools across ``os.fork``: a connection made in another process is
    dropped at checkout, never closed or used here (the original process still uses it)."""
    try:
        from sqlalchemy import event, exc, pool
    except ImportError:
        return

    def on_connect(dbapi_connection, record) -> None:
        record.info["pid"] = os.getpid()

    def on_checkout(dbapi_connection, record, proxy) -> None:
        if record.info.get("pid") != os.getpid():
            _INHERITED.append(dbapi_connection)
            record.dbapi_connection = proxy.dbapi_connection = None
            raise exc.DisconnectionError("connection of the process this branch was forked from")

    event.listen(pool.Pool, "connect", on_connect)
    event.listen(pool.Pool, "checkout", on_checkout)


def _serve(conn, app, loop) -> None:
    client = httpx.AsyncClient(transport=httpx.ASGITransport(app=app, raise_app_exceptions=False), base_url="http://awm.local")
    while True:
        try:
            request = json.loads(conn.recv_bytes())
        except EOFError:
            return
        if isinstance(request, dict) and request.get("op") == "fork":
            try:
                fd = _receive_fd(conn)
            except BaseException as exc:
                _send(conn, {"ok": False, "error": f"no socket for the branch: {_describe(exc)}"})
                return  # the stream is out of step: the parent starts a new app
            child = _fork_branch(conn, fd, request)
            if child is not None:  # the branch's copy of this process: serve it from here on
                conn, loop = child, asyncio.new_event_loop()
                client = httpx.AsyncClient(transport=httpx.ASGITransport(app=app, raise_app_exceptions=False), base_url="http://awm.local")
            else:
                _send(conn, {"ok": True})
            continue
        try:
            kwargs = {"params": request.get("query") or None}
            if "body" in request:
                kwargs["json"] = request["body"]
            response = loop.run_until_complete(client.request(request["method"], request["path"], **kwargs))
            body = response.content.decode("utf-8", "replace")
            if len(body) > MAX_BODY_CHARS:
                body = body[:MAX_BODY_CHARS] + f"... [truncated, {len(body)} characters in all]"
            reply = {"ok": True, "status": response.status_code, "body": body}
        except BaseException as exc:
            reply = {"ok": False, "error": _describe(exc)}
        _send(conn, reply)


def _receive_fd(conn) -> int:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM, 0, fileno=conn.fileno())
    try:
        _, fds, _, _ = socket.recv_fds(sock, 1, 1)
    finally:
        sock.detach()
    if len(fds) != 1:
        for fd in fds:
            os.close(fd)
        raise ValueError("expected one descriptor")
    return fds[0]


def _fork_branch(conn, fd: int, request: dict[str, Any]):
    """Fork this app for a branch; in the branch's process return its new connection, here None.

    The copy first sends a pidfd of itself (the parent stops it through that). The kernel reaps it
    when it stops (SIGCHLD is ignored here), or the fork server does (the sandbox's subreaper) once
    this app is gone.
    """
    global _FORKING
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # stopped copies are reaped by the kernel, no zombies
    gc.freeze()  # the copy's collector then leaves the shared pages alone
    _FORKING = True
    try:
        pid = os.fork()
    finally:
        _FORKING = False
    if pid == 0:
        conn.close()  # else the parent would not see the original exit
        return _become_branch(fd, request)
    os.close(fd)
    return None


def _become_branch(fd: int, request: dict[str, Any]):
    from multiprocessing.connection import Connection

    # The original's connections stay open here and are never used: closing them would let
    # SQLite act on the original's file from this process.
    for conn in list(_CONNECTIONS):
        _INHERITED.append(conn)
        try:
            conn.set_authorizer(_deny_all)
        except sqlite3.Error:
            pass
    _CONNECTIONS.clear()
    folder, database = str(request["folder"]), str(request["database"])
    if _STATE["guard"] is not None:
        _STATE["guard"].move(folder, {database})
    _STATE["database"] = database
    os.chdir(folder)
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM, 0, fileno=fd)
    pidfd = os.pidfd_open(os.getpid())
    try:
        socket.send_fds(sock, [b"P"], [pidfd])
    finally:
        os.close(pidfd)
        sock.detach()
    return Connection(fd)


def run_verifier(
    conn, folder: str, code: str, initial: str, final: str, final_answer: str | None, limits: dict[str, int] | None = None
) -> None:
    """Run one AWM verifier on copies of the initial and final databases; reply with its result."""
    _confine(folder, {initial, final}, limits)
    _confine_sqlite(None)
    try:
        namespace = _namespace("awm_verifier")
        exec(compile(code, "<awm_verifier>", "exec"), namespace)
        fn = namespace.get("verify_task_completion")
        if not callable(fn):
            fn = next((v for k, v in namespace.items() if k.startswith("verify_") and callable(v)), None)
        if fn is None:
            raise LookupError("the verifier code defines no verify_task_completion function")
        params = inspect.signature(fn).parameters.values()
        takes_answer = len(params) >= 3 or any(p.kind == p.VAR_POSITIONAL for p in params)
        result = fn(initial, final, final_answer) if takes_answer else fn(initial, final)
        _send(conn, {"ok": True, "result": json.loads(json.dumps(result, default=repr))})
    except BaseException as exc:
        _send(conn, {"ok": False, "error": f"the verifier failed: {_describe(exc)}"})
