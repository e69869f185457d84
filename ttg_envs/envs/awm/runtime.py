"""The parent side of the AWM sandbox: child processes with time limits, and the verifier run.

Children come from a fork server (:mod:`.zygote`) that has imported FastAPI and SQLAlchemy once,
so starting one costs a fork, not an interpreter start. A child that does not answer within its
time limit is killed (and a new one is started on the next call); a child that crashes or sends
anything but one JSON object becomes a :class:`SandboxError`, never a crash of the caller.
"""

from __future__ import annotations

import atexit
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
from dataclasses import dataclass
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from . import db

#: Largest reply a child may send (bytes); anything longer is junk.
MAX_REPLY_BYTES = 8 << 20


class SandboxError(RuntimeError):
    """The sandboxed child failed: it crashed, sent junk, or reported an error."""


class SandboxTimeout(SandboxError):
    """The sandboxed child did not answer within its time limit and was killed."""


class _Zygote:
    """This process's fork server (:mod:`.zygote`), started on first use and after a fork."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pid: int | None = None
        self._control: socket.socket | None = None
        self._process: subprocess.Popen | None = None

    def _ensure(self) -> socket.socket:
        if self._pid == os.getpid() and self._process is not None and self._process.poll() is None:
            return self._control
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        code = (f"import sys; sys.path[:0] = {[p for p in sys.path if p]!r}; "
                f"from ttg_envs.envs.awm.zygote import main; main({theirs.fileno()})")
        self._process = subprocess.Popen([sys.executable, "-c", code], pass_fds=(theirs.fileno(),),
                                         stdin=subprocess.DEVNULL, close_fds=True)
        theirs.close()
        self._control, self._pid = ours, os.getpid()
        return ours

    def _ask(self, message: dict[str, Any], fds: list[int] | None = None) -> dict[str, Any]:
        with self._lock:
            control = self._ensure()
            socket.send_fds(control, [json.dumps(message).encode()], fds or [])
            control.settimeout(60)
            try:
                reply = control.recv(4096)
            except (OSError, TimeoutError) as exc:
                raise SandboxError(f"the sandbox fork server did not answer ({exc})") from None
            if not reply:
                raise SandboxError("the sandbox fork server exited")
            return json.loads(reply)

    def spawn(self, target: str, job: dict[str, Any]) -> tuple[int, Connection]:
        """Fork a child running ``target`` with ``job``; its pid and a connection to it."""
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            pid = int(self._ask({"op": "spawn", "target": target}, [theirs.fileno()])["pid"])
        finally:
            theirs.close()
        conn = Connection(ours.detach())
        conn.send_bytes(json.dumps(job).encode("utf-8"))
        return pid, conn

    def kill(self, pid: int) -> None:
        """Stop a child the fork server forked (no-op when it is already gone)."""
        if self._pid == os.getpid() and self._process is not None and self._process.poll() is None:
            self._ask({"op": "kill", "pid": pid})

    def close(self) -> None:
        """Stop the fork server (it stops its children)."""
        if self._control is not None and self._pid == os.getpid():
            self._control.close()
            self._process.wait(timeout=10)
        self._control = self._process = self._pid = None


_ZYGOTE = _Zygote()
atexit.register(_ZYGOTE.close)


class Child:
    """One sandboxed child process running a :mod:`.sandbox` target, spoken to in JSON messages."""

    def __init__(self, target: str, job: dict[str, Any]):
        self._pid, self._conn = _ZYGOTE.spawn(target, job)
        self._alive = True

    def receive(self, timeout: float) -> dict[str, Any]:
        """The child's next reply; kills the child on timeout, crash or junk."""
        try:
            if not self._conn.poll(timeout):
                self.kill()
                raise SandboxTimeout(f"no answer within {timeout:g} s; the process was stopped")
            data = self._conn.recv_bytes(MAX_REPLY_BYTES)
        except (EOFError, OSError) as exc:
            self.kill()
            raise SandboxError(f"the sandboxed process exited or broke the connection ({type(exc).__name__})") from None
        try:
            reply = json.loads(data)
        except ValueError:
            reply = None
        if not isinstance(reply, dict):
            self.kill()
            raise SandboxError("the sandboxed process sent a malformed reply")
        return reply

    def ask(self, message: dict[str, Any], timeout: float) -> dict[str, Any]:
        """Send ``message`` and wait for the reply."""
        try:
            self._conn.send_bytes(json.dumps(message).encode("utf-8"))
        except (OSError, ValueError) as exc:
            self.kill()
            raise SandboxError(f"the sandboxed process is gone ({type(exc).__name__})") from None
        return self.receive(timeout)

    @property
    def alive(self) -> bool:
        """True until the child was stopped or failed."""
        return self._alive

    def kill(self) -> None:
        """Stop the child now and release the connection."""
        if self._alive:
            self._alive = False
            self._conn.close()
            _ZYGOTE.kill(self._pid)


class AppProcess:
    """A scenario's FastAPI app served by a sandboxed child over one episode database."""

    def __init__(self, folder: str | Path, database: str | Path, code: str, *, openapi: bool = True,
                 start_timeout: float = 60.0):
        self._child = Child("app", {"folder": str(folder), "database": str(database), "code": code, "openapi": openapi})
        reply = self._child.receive(start_timeout)
        if not reply.get("ok"):
            self._child.kill()
            raise SandboxError(str(reply.get("error", "the environment failed to start")))
        self.openapi: dict[str, Any] = reply.get("openapi") or {}

    def request(self, method: str, path: str, query: dict[str, Any], body: Any, *, has_body: bool,
                timeout: float) -> tuple[int, str]:
        """One HTTP request to the app: ``(status, body text)``."""
        message: dict[str, Any] = {"method": method, "path": path, "query": query}
        if has_body:
            message["body"] = body
        reply = self._child.ask(message, timeout)
        if not reply.get("ok"):
            raise SandboxError(str(reply.get("error", "the request failed")))
        status, text = reply.get("status"), reply.get("body")
        if not isinstance(status, int) or not isinstance(text, str):
            raise SandboxError("the sandboxed process sent a malformed reply")
        return status, text

    @property
    def alive(self) -> bool:
        """True while the app process runs."""
        return self._child.alive

    def close(self) -> None:
        """Stop the app process."""
        self._child.kill()


@dataclass(frozen=True)
class Verdict:
    """A verifier's outcome: ``success`` when it returned ``{"result": "complete"}``."""

    success: bool
    result: Any = None
    error: str | None = None


def run_verifier(code: str, initial: bytes, final_db: str | Path, final_answer: str | None, *,
                 timeout: float = 60.0, workdir: str | Path | None = None) -> Verdict:
    """Run an AWM verifier on a copy of the initial database (``initial`` snapshot) and of ``final_db``."""
    folder = Path(tempfile.mkdtemp(prefix="verify-", dir=workdir))
    try:
        initial_path, final_path = folder / "initial.db", folder / "final.db"
        db.restore(initial_path, initial)
        db.restore(final_path, db.snapshot(final_db))
        child = Child("verify", {"folder": str(folder), "code": code, "initial": str(initial_path),
                                 "final": str(final_path), "final_answer": final_answer})
        try:
            reply = child.receive(timeout)
        finally:
            child.kill()
        if not reply.get("ok"):
            return Verdict(False, error=str(reply.get("error", "the verifier failed")))
        result = reply.get("result")
        return Verdict(isinstance(result, dict) and result.get("result") == "complete", result)
    except SandboxError as exc:
        return Verdict(False, error=f"the verifier failed: {exc}")
    finally:
        shutil.rmtree(folder, ignore_errors=True)
