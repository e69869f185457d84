"""Inside the sandbox: a scenario's FastAPI app, served to the host over one socket.

A running app also forks itself for a branch (``{"op": "fork"}`` with a new socket attached): the
copy keeps the app's memory, drops its SQLite connections without touching the original's file
(SQLAlchemy pools are disposed, raw connections refuse every statement) and serves the branch's
own database copy, in the branch's folder. The copy runs in the same OS sandbox as the original.
"""

from __future__ import annotations

import asyncio
import gc
import json
import os
import signal
import socket
import sqlite3
import sys
from typing import Any

from . import inside_guard as guard

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
        guard.send(conn, {"ok": False, "error": "fastapi/httpx/sqlalchemy are not installed (pip install 'ttg-envs[awm]')"})
        return
    guard.confine(folder, {database}, limits)
    guard.confine_sqlite(database)
    _fork_safe_pools()
    loop = asyncio.new_event_loop()
    try:
        namespace = guard.namespace("awm_env")
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
        guard.send(conn, {"ok": False, "error": f"the environment code failed to load: {guard.describe(exc)}"})
        return
    guard.send(conn, {"ok": True, "openapi": schema})
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
            guard._INHERITED.append(dbapi_connection)
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
                guard.send(conn, {"ok": False, "error": f"no socket for the branch: {guard.describe(exc)}"})
                return  # the stream is out of step: the parent starts a new app
            child = _fork_branch(conn, fd, request)
            if child is not None:  # the branch's copy of this process: serve it from here on
                conn, loop = child, asyncio.new_event_loop()
                client = httpx.AsyncClient(transport=httpx.ASGITransport(app=app, raise_app_exceptions=False), base_url="http://awm.local")
            else:
                guard.send(conn, {"ok": True})
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
            reply = {"ok": False, "error": guard.describe(exc)}
        guard.send(conn, reply)


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
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # stopped copies are reaped by the kernel, no zombies
    gc.freeze()  # the copy's collector then leaves the shared pages alone
    guard._FORKING = True
    try:
        pid = os.fork()
    finally:
        guard._FORKING = False
    if pid == 0:
        conn.close()  # else the parent would not see the original exit
        return _become_branch(fd, request)
    os.close(fd)
    return None


def _become_branch(fd: int, request: dict[str, Any]):
    from multiprocessing.connection import Connection

    # The original's connections stay open here and are never used: closing them would let
    # SQLite act on the original's file from this process.
    for conn in list(guard._CONNECTIONS):
        guard._INHERITED.append(conn)
        try:
            conn.set_authorizer(guard._deny_all)
        except sqlite3.Error:
            pass
    guard._CONNECTIONS.clear()
    folder, database = str(request["folder"]), str(request["database"])
    if guard._STATE["guard"] is not None:
        guard._STATE["guard"].move(folder, {database})
    guard._STATE["database"] = database
    os.chdir(folder)
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM, 0, fileno=fd)
    pidfd = os.pidfd_open(os.getpid())
    try:
        socket.send_fds(sock, [b"P"], [pidfd])
    finally:
        os.close(pidfd)
        sock.detach()
    return Connection(fd)
