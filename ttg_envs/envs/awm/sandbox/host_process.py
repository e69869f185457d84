"""Host side of the AWM sandbox: the fork server and the children it starts, with time limits, and the verifier run.

Children come from a fork server (:mod:`.inside_forkserver`) that has imported FastAPI and SQLAlchemy once,
so starting one costs a fork, not an interpreter start. A child that does not answer within its
time limit is killed (and a new one is started on the next call); a child that crashes or sends
anything but one JSON object becomes a :class:`SandboxError`, never a crash of the caller.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import sqlite3
import subprocess
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from . import host_bwrap, host_cgroup, host_db, host_seccomp
from .host_cgroup import SandboxCgroup
from .host_folder import EpisodeFolder, UnsafeEntry

#: Largest reply a child may send (bytes); anything longer is junk.
MAX_REPLY_BYTES = 8 << 20
#: How much of the sandbox's stdout/stderr the host keeps (the last bytes), and reads at a time.
OUTPUT_BYTES = 64 << 10

_LAUNCHERS: dict[int, ThreadPoolExecutor] = {}
_LAUNCHERS_LOCK = threading.Lock()


def _launch(start):
    """``start()`` (which starts a sandbox) run on this process's launcher thread; its result.

    bwrap's ``--die-with-parent`` (``PR_SET_PDEATHSIG``) fires when the *thread* that started it
    ends, not the process: a sandbox started from a pool's worker thread died with that thread, and
    its app failed the next call. One thread that lives as long as the process starts them all.
    """
    with _LAUNCHERS_LOCK:
        launcher = _LAUNCHERS.get(os.getpid())  # a forked process has none of its parent's threads
        if launcher is None:
            launcher = _LAUNCHERS[os.getpid()] = ThreadPoolExecutor(1, thread_name_prefix="ttg-awm-launcher")
    return launcher.submit(start).result()


class SandboxError(RuntimeError):
    """The sandboxed child failed: it crashed, sent junk, or reported an error."""


class SandboxTimeout(SandboxError):
    """The sandboxed child did not answer within its time limit and was killed."""


class Zygote:
    """The fork server (:mod:`.inside_forkserver`) of one episode folder, started on first use and after a fork.

    ``mode="bwrap"`` starts it inside the OS sandbox of :mod:`.host_bwrap` (only ``folder`` is
    writable; as root, as ``uid``), in ``cgroup`` when there is one; ``"python"`` as a plain process. Either way it gets an allow-listed environment,
    ``/dev/null`` for stdin and a pipe for stdout/stderr, read in chunks of :data:`OUTPUT_BYTES`,
    whose last :data:`OUTPUT_BYTES` :attr:`output` keeps (output without newlines cannot grow the host).

    Everything that speaks to the sandbox does so inside :meth:`awake`: the cgroup (when there is one,
    and :data:`.host_cgroup.FREEZE`) is thawed for it and frozen again :data:`.host_cgroup.FREEZE_AFTER`
    seconds after the last such call ended, by one thread per fork server (stopped by :meth:`close`).
    A process forked from the host that made the cgroup starts its fork server outside it (the
    parent, not knowing its calls, would freeze it) and leaves it alone.
    """

    def __init__(self, folder: str | Path, mode: str = "bwrap", uid: int | None = None, cgroup: SandboxCgroup | None = None) -> None:
        self.folder, self.mode, self.uid, self.cgroup = str(folder), mode, uid, cgroup
        self._lock = threading.Lock()
        self._pid: int | None = None
        self._control: socket.socket | None = None
        self._process: subprocess.Popen | None = None
        self._output = bytearray()
        self._wake = threading.Condition()  # guards the freezing state below
        self._busy = 0  # calls inside awake()
        self._freeze_at: float | None = None
        self._freezer: threading.Thread | None = None
        self._unswept = False  # a kill was answered since the last sweep request

    @contextmanager
    def awake(self) -> Iterator[None]:
        """The sandbox thawed for what runs inside; frozen again a moment after the last such block ended."""
        cgroup = self.cgroup
        if cgroup is None or not cgroup.owned:  # a process forked from the host leaves its cgroup alone
            yield
            return
        with self._wake:
            self._busy += 1
            self._freeze_at = None
            cgroup.thaw()
        try:
            yield
        finally:
            with self._wake:
                self._busy -= 1
                if self._busy == 0 and host_cgroup.FREEZE and cgroup.switch is not None:
                    self._freeze_at = time.monotonic() + host_cgroup.FREEZE_AFTER
                    if self._freezer is None:
                        self._freezer = threading.Thread(target=self._freeze_later, name="ttg-awm-freezer", daemon=True)
                        self._freezer.start()
                    else:
                        self._wake.notify()

    def _freeze_later(self) -> None:
        me = threading.current_thread()
        with self._wake:
            while self._freezer is me:
                if self._freeze_at is None:
                    self._wake.wait()
                elif (delay := self._freeze_at - time.monotonic()) > 0:
                    self._wake.wait(delay)
                elif self._unswept:
                    # A kill is answered before the fork server has swept what the killed app left
                    # running; freezing now would leave those processes alive (frozen) until the
                    # next call. The sweep request waits for it; its awake() schedules the freeze again.
                    self._unswept = False
                    self._wake.release()
                    try:
                        self._sweep_if_running()
                    finally:
                        self._wake.acquire()
                else:
                    self._freeze_at = None
                    if self._busy == 0:
                        self.cgroup.freeze()

    def _stop_freezing(self) -> None:
        """Stop the freezing thread and thaw the sandbox (a frozen process can be neither stopped nor asked)."""
        with self._wake:
            thread, self._freezer, self._freeze_at = self._freezer, None, None
            self._wake.notify_all()
            if self.cgroup is not None and self.cgroup.owned:
                self.cgroup.thaw()
        if thread is not None and thread is not threading.current_thread():
            thread.join()

    @property
    def output(self) -> str:
        """The last (at most :data:`OUTPUT_BYTES`) bytes the sandbox wrote to stdout/stderr, as text."""
        return bytes(self._output).decode("utf-8", "replace")

    def _drain(self, stream) -> None:
        while chunk := stream.read(OUTPUT_BYTES):
            self._output += chunk
            del self._output[:-OUTPUT_BYTES]
        stream.close()

    def _running(self) -> bool:
        return self._pid == os.getpid() and self._process is not None and self._process.poll() is None

    @property
    def running(self) -> bool:
        """Whether the fork server is up (in this process); not yet started counts as up."""
        return self._process is None or self._running()

    def sweep(self) -> bool:
        """Stop every process the fork server's children left running; False when it did not answer."""
        if self._process is None:
            return True
        self._unswept = False
        try:
            return self._ask({"op": "kill", "pid": 0}).get("ok") is True
        except SandboxError:
            return False

    def settle(self) -> None:
        """Sweep first when a kill was answered since the last sweep (a no-op otherwise).

        A kill is answered before the killed process and what it left running are gone, so a burst
        of closes never waits on each exit. Until the sweep, those processes still count against the
        sandbox's process cap, which every app of the sandbox shares (an episode and its branches):
        what starts a process or a thread there next (a request, a fork, a spawn) settles first.
        """
        if self._unswept and self._running():
            self.sweep()

    def clear_tmp(self) -> bool:
        """Empty the sandbox's private ``/tmp`` (a fork server not running has a fresh one at its start)."""
        if not self._running():
            return True
        try:
            return self._ask({"op": "clear_tmp"}).get("ok") is True
        except SandboxError:
            return False

    def _ensure(self) -> socket.socket:
        if self._running():
            return self._control
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        isolated = self.mode == "bwrap"
        code = (
            f"import sys; sys.path[:0] = {host_bwrap.python_path()!r}; "
            f"from ttg_envs.envs.awm.sandbox.inside_forkserver import main; main({theirs.fileno()}, isolated={isolated})"
        )
        argv = [host_bwrap.python_executable(), "-I", "-c", code]
        seccomp = host_seccomp.open_program() if isolated else None
        if isolated:
            argv = host_bwrap.bwrap_command(self.folder, argv, self.uid, seccomp)
            if self.cgroup is not None and self.cgroup.owned:  # a forked host's would be frozen by its parent
                argv = self.cgroup.wrap(argv)
        env = {**host_bwrap.ENV_ALLOWLIST, "HOME": self.folder}
        try:
            self._process = _launch(
                lambda: subprocess.Popen(
                    argv,
                    bufsize=0,  # stdout is then a raw file: each read is one read(2) of at most OUTPUT_BYTES
                    pass_fds=(theirs.fileno(),) if seccomp is None else (theirs.fileno(), seccomp),
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.STDOUT,
                    close_fds=True,
                    env=env,
                    cwd=self.folder,
                )
            )
        finally:
            if seccomp is not None:
                os.close(seccomp)
        threading.Thread(target=self._drain, args=(self._process.stdout,), daemon=True).start()
        theirs.close()
        self._control, self._pid = ours, os.getpid()
        return ours

    def _sweep_if_running(self) -> None:
        # The freezing thread's sweep: never starts a fork server, and runs outside awake() (only
        # this thread freezes, so the sandbox stays thawed meanwhile).
        with self._lock:
            if self._running():
                try:
                    self._exchange(self._control, {"op": "kill", "pid": 0})
                except SandboxError:
                    pass

    def _ask(self, message: dict[str, Any], fds: list[int] | None = None) -> dict[str, Any]:
        with self.awake(), self._lock:
            return self._exchange(self._ensure(), message, fds)

    def _exchange(self, control: socket.socket, message: dict[str, Any], fds: list[int] | None = None) -> dict[str, Any]:
        """Send ``message`` (with ``fds``) on ``control`` and read the reply; the caller holds the lock."""
        try:
            socket.send_fds(control, [json.dumps(message).encode()], fds or [])
            control.settimeout(60)
            reply = control.recv(4096)
        except (OSError, TimeoutError) as exc:
            self._stop()
            raise SandboxError(f"the sandbox fork server did not answer ({exc}); {self.output[-300:]}") from None
        if not reply:
            self._stop()
            raise SandboxError(f"the sandbox fork server exited; {self.output[-300:]}")
        return json.loads(reply)

    def spawn(self, target: str, job: dict[str, Any]) -> tuple[int, Connection]:
        """Fork a child running ``target`` with ``job``; its pid and a connection to it."""
        self.settle()
        with self.awake():
            ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                pid = int(self._ask({"op": "spawn", "target": target}, [theirs.fileno()])["pid"])
            finally:
                theirs.close()
            conn = Connection(ours.detach())
            conn.send_bytes(json.dumps(job).encode("utf-8"))
            return pid, conn

    def keep(self, pid: int) -> None:
        """Spare ``pid`` (a branch app, a pid in the sandbox) from the sweeps until :meth:`kill` names it.

        Not answered: requests are served in order, so every later sweep knows it.
        """
        with self.awake(), self._lock:
            if not self._running():
                return
            try:
                self._control.send(json.dumps({"op": "keep", "pid": int(pid)}).encode())
            except OSError as exc:
                self._stop()
                raise SandboxError(f"the sandbox fork server did not answer ({exc}); {self.output[-300:]}") from None

    def kill(self, pid: int) -> None:
        """Stop a child the fork server forked (in the OS sandbox: every process but the server)."""
        if self._running():
            self._unswept = True
            try:
                self._ask({"op": "kill", "pid": pid})
            except SandboxError:
                pass

    def _stop(self) -> None:
        if self._control is not None and self._pid == os.getpid():
            self._control.close()
            try:
                self._process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait()
        self._control = self._process = self._pid = None

    def close(self) -> None:
        """Stop the fork server (it stops its children; the OS sandbox goes with it), thawed first; no freezing thread is left."""
        with self.awake(), self._lock:  # thawed while it stops: a frozen process does not exit
            self._stop()
        self._stop_freezing()


class Child:
    """One sandboxed child process running a target of :mod:`.inside_forkserver`, spoken to in JSON messages."""

    def __init__(self, zygote: Zygote, target: str, job: dict[str, Any]):
        self._zygote = zygote
        self._pid, self._conn = zygote.spawn(target, job)
        self._alive = True

    _pidfd: int | None = None

    @classmethod
    def attached(cls, zygote: Zygote, pidfd: int, pid: int, conn: Connection) -> Child:
        """A branch app that another app forked: stopped through ``pidfd``, kept by ``zygote`` as ``pid``."""
        child = cls.__new__(cls)
        child._zygote, child._pid, child._conn, child._alive, child._pidfd = zygote, pid, conn, True, pidfd
        return child

    def send_fd(self, message: dict[str, Any], fd: int) -> None:
        """Send ``message`` and then the descriptor ``fd`` (one byte with it attached)."""
        with self._zygote.awake():
            self._send_fd(message, fd)

    def _send_fd(self, message: dict[str, Any], fd: int) -> None:
        try:
            self._conn.send_bytes(json.dumps(message).encode("utf-8"))
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM, 0, fileno=self._conn.fileno())
            try:
                socket.send_fds(sock, [b"F"], [fd])
            finally:
                sock.detach()
        except (OSError, ValueError) as exc:
            self.kill()
            raise SandboxError(f"the sandboxed process is gone ({type(exc).__name__})") from None

    def receive(self, timeout: float) -> dict[str, Any]:
        """The child's next reply; kills the child on timeout, crash or junk."""
        with self._zygote.awake():
            return self._receive(timeout)

    def _receive(self, timeout: float) -> dict[str, Any]:
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
        except (ValueError, RecursionError):
            reply = None
        if not isinstance(reply, dict):
            self.kill()
            raise SandboxError("the sandboxed process sent a malformed reply")
        return reply

    def ask(self, message: dict[str, Any], timeout: float) -> dict[str, Any]:
        """Send ``message`` and wait for the reply."""
        with self._zygote.awake():
            self._send(message)
            return self._receive(timeout)

    def send(self, message: dict[str, Any]) -> None:
        """Send ``message`` without waiting (its reply is :meth:`receive`'s)."""
        with self._zygote.awake():
            self._send(message)

    def _send(self, message: dict[str, Any]) -> None:
        try:
            self._conn.send_bytes(json.dumps(message).encode("utf-8"))
        except (OSError, ValueError) as exc:
            self.kill()
            raise SandboxError(f"the sandboxed process is gone ({type(exc).__name__})") from None

    @property
    def alive(self) -> bool:
        """True until the child was stopped or failed."""
        return self._alive

    def kill(self) -> None:
        """Stop the child now and release the connection."""
        if self._alive:
            with self._zygote.awake():  # a frozen process dies only once thawed
                self._kill()

    def _kill(self) -> None:
        if self._alive:
            self._alive = False
            self._conn.close()
            if self._pidfd is not None:
                try:
                    signal.pidfd_send_signal(self._pidfd, signal.SIGKILL)
                except OSError:
                    pass
                os.close(self._pidfd)
                self._pidfd = None
            self._zygote.kill(self._pid)


class AppProcess:
    """A scenario's FastAPI app served by a sandboxed child over one episode database."""

    def __init__(
        self,
        zygote: Zygote,
        folder: str | Path,
        database: str | Path,
        code: str,
        *,
        openapi: bool = True,
        start_timeout: float = 60.0,
        limits: dict[str, int] | None = None,
    ):
        self._child = Child(
            zygote, "app", {"folder": str(folder), "database": str(database), "code": code, "openapi": openapi, "limits": limits or {}}
        )
        try:
            reply = self._child.receive(start_timeout)
            if not reply.get("ok"):
                raise SandboxError(str(reply.get("error", "the environment failed to start")))
            openapi_doc = reply.get("openapi") or {}
            if not isinstance(openapi_doc, dict):
                raise SandboxError("the sandboxed process sent a malformed reply")
        except BaseException:
            self._child.kill()
            raise
        self.openapi: dict[str, Any] = openapi_doc

    @classmethod
    def _of(cls, child: Child) -> AppProcess:
        app = cls.__new__(cls)
        app._child, app.openapi = child, {}
        return app

    def fork(self, zygote: Zygote, folder: str | Path, database: str | Path, *, timeout: float) -> AppProcess:
        """A copy of this app (its memory included) serving ``database`` in ``folder``.

        The copy is forked by this app, in the same sandbox, and adopted by ``zygote`` (this app's
        fork server). :class:`SandboxError` when the app does not do so in ``timeout`` seconds
        (then this app is stopped, as after any late answer).
        """
        zygote.settle()
        with zygote.awake():
            return self._fork(zygote, folder, database, timeout)

    def _fork(self, zygote: Zygote, folder: str | Path, database: str | Path, timeout: float) -> AppProcess:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        pidfd = None
        try:
            try:
                self._child.send_fd({"op": "fork", "folder": str(folder), "database": str(database)}, theirs.fileno())
            finally:
                theirs.close()
            reply = self._child.receive(timeout)
            if not reply.get("ok"):
                self._child.kill()  # its stream may be out of step
                raise SandboxError(str(reply.get("error", "the app did not fork")))
            ours.settimeout(timeout)
            _, fds, _, _ = socket.recv_fds(ours, 1, 1)
            pidfd = fds[0] if fds else None
            pid = _pidfd_pid(pidfd)
            if pid is None:
                raise SandboxError("the forked app sent no handle of its process")
            zygote.keep(pid)
            conn = Connection(ours.detach())
        except (EOFError, OSError, ValueError) as exc:
            ours.close()
            if pidfd is not None:
                os.close(pidfd)
            raise SandboxError(f"the app did not fork ({type(exc).__name__})") from None
        except BaseException:
            ours.close()
            if pidfd is not None:
                os.close(pidfd)
            raise
        return AppProcess._of(Child.attached(zygote, pidfd, pid, conn))

    def request(self, method: str, path: str, query: dict[str, Any], body: Any, *, has_body: bool, timeout: float) -> tuple[int, str]:
        """One HTTP request to the app: ``(status, body text)``."""
        self.send_request(method, path, query, body, has_body=has_body)
        return self.response(timeout)

    def send_request(self, method: str, path: str, query: dict[str, Any], body: Any, *, has_body: bool) -> None:
        """The first half of :meth:`request`: send it, and return while the app works on it."""
        message: dict[str, Any] = {"method": method, "path": path, "query": query}
        if has_body:
            message["body"] = body
        self._child._zygote.settle()  # the app may need a thread: a killed branch's leftovers must not hold the cap
        self._child.send(message)

    def response(self, timeout: float) -> tuple[int, str]:
        """The second half of :meth:`request`: the app's answer to the request sent last."""
        reply = self._child.receive(timeout)
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


def _pidfd_pid(fd: int | None) -> int | None:
    """The pid in its own (the sandbox's) namespace of the process pidfd ``fd``; None if not a pidfd."""
    if fd is None:
        return None
    try:
        if os.readlink(f"/proc/self/fd/{fd}") != "anon_inode:[pidfd]":
            return None
        with open(f"/proc/self/fdinfo/{fd}") as f:
            for line in f:
                if line.startswith("NSpid:"):
                    pid = int(line.split()[-1])
                    return pid if pid > 0 else None
    except (OSError, ValueError):
        return None
    return None


@dataclass(frozen=True)
class Verdict:
    """A verifier's outcome: ``success`` when it returned ``{"result": "complete"}``."""

    success: bool
    result: Any = None
    error: str | None = None


def copy_out(folder: EpisodeFolder, name: str, memo: host_db.SnapshotMemo | None = None) -> bytes:
    """A snapshot of database ``name`` in an untrusted ``folder``, read through its descriptor
    (the files' bytes are read each time; ``memo`` remembers what they parse to).

    Raises :class:`SandboxError` when the file is missing, a link, not a regular file, too large or
    not a database.
    """
    try:
        main = folder.read(name)
        wal, journal = folder.read_optional(f"{name}-wal"), folder.read_optional(f"{name}-journal")
        return (memo.from_files if memo is not None else host_db.from_files)(main, wal, journal)
    except UnsafeEntry as exc:
        raise SandboxError(f"the episode database is unusable: {exc}") from None
    except (sqlite3.Error, MemoryError) as exc:
        raise SandboxError(f"the episode database is unusable: {type(exc).__name__}: {exc}") from None


def run_verifier(
    zygote: Zygote,
    folder: EpisodeFolder,
    code: str,
    initial: bytes,
    final: bytes,
    final_answer: str | None,
    *,
    timeout: float = 60.0,
    limits: dict[str, int] | None = None,
) -> Verdict:
    """Run an AWM verifier on copies of the ``initial`` and ``final`` snapshots, in a new subfolder of ``folder``.

    The episode's own app must be stopped (nothing of it runs beside its verifier); other apps of
    the sandbox (branches, warm apps) go on.
    """
    try:
        sub = folder.subfolder("verify-")
    except OSError as exc:
        return Verdict(False, error=f"the verifier failed: no folder for it ({exc})")
    try:
        sub.write("initial.db", initial)
        sub.write("final.db", final)
        with zygote.awake():  # thawed from the spawn to the kill
            child = Child(
                zygote,
                "verify",
                {
                    "folder": str(sub.path),
                    "code": code,
                    "initial": str(sub.path / "initial.db"),
                    "final": str(sub.path / "final.db"),
                    "final_answer": final_answer,
                    "limits": limits or {},
                },
            )
            try:
                reply = child.receive(timeout)
            finally:
                child.kill()
        if not reply.get("ok"):
            return Verdict(False, error=str(reply.get("error", "the verifier failed")))
        result = reply.get("result")
        return Verdict(isinstance(result, dict) and result.get("result") == "complete", result)
    except (SandboxError, OSError) as exc:
        return Verdict(False, error=f"the verifier failed: {exc}")
    finally:
        sub.close()
