"""Inside the sandbox: what every child (app or verifier) sets up before model-written code runs.

Each child is a fresh process forked from a clean fork server (:mod:`.inside_forkserver`), which by
default runs inside the OS sandbox of :mod:`.host_bwrap` (namespaces, an unprivileged uid of its
own, a read-only system, only the episode folder writable): that is the boundary. What a child
sets up on top of it: :func:`confine`. Messages to and from the host are JSON bytes, so a child can
never make the host unpickle.
"""

from __future__ import annotations

import builtins
import json
import os
import resource
import socket
import sqlite3
import sys
import sysconfig
import traceback
import types
import weakref
from typing import Any

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
#: Set by :mod:`.inside_app` around its own fork (a branch), which the guard then lets pass.
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


def confine(folder: str, databases: set[str], limits: dict[str, int] | None = None) -> None:
    """Confine this child before model-written code runs: hard resource limits, soft = hard
    (:data:`DEFAULT_LIMITS`), then into its folder; an audit hook (PEP 578) that refuses network
    sockets, name lookups, new processes, signals, ctypes, SQLite extensions, writes outside the
    folder and reads outside the Python installation (code can switch it off, as it is a Python
    object, so it only catches code that reaches where it should not by accident; with
    ``sandbox="python"`` it is all there is); and SQLite connections that refuse ``ATTACH`` and,
    for an app, open the episode database whatever path the code names (SQLAlchemy's too)."""
    set_limits(limits)
    sys.dont_write_bytecode = True
    os.chdir(folder)
    guard = _STATE["guard"] = _Guard(folder, databases)
    sys.addaudithook(guard)


def confine_sqlite(database: str | None) -> None:
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


def describe(exc: BaseException) -> str:
    frames = traceback.extract_tb(exc.__traceback__)
    where = next((f"line {f.lineno}" for f in reversed(frames) if f.filename.startswith("<awm_")), "")
    return f"{type(exc).__name__}: {exc}" + (f" ({where})" if where else "")


def send(conn, payload: dict[str, Any]) -> None:
    conn.send_bytes(json.dumps(payload, default=repr).encode("utf-8"))


def namespace(name: str) -> dict[str, Any]:
    # A registered module, so that pydantic can resolve the code's annotations through sys.modules.
    module = types.ModuleType(name)
    module.__dict__["__builtins__"] = builtins
    sys.modules[name] = module
    return module.__dict__
