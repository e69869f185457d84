"""Long-lived worker processes that run stateful tool calls under a deadline, without a fork per call.

:func:`call_with_deadline` hands ``fn(*args)`` to a worker forked once per process and waits for its
pickled answer at most ``timeout`` seconds. It keeps nothing between calls: the caller sends the
state a call needs and takes back what the call made of it, so every episode and branch shares one
worker, and an overrunning call's worker is killed with the caller's state untouched (the next call
forks a new one). :func:`ttg_envs.tools.limits.run_limited`'s fork per call costs with the caller's
memory; this does not.

:class:`StateWorker` owns state instead: forked from the caller with a ``handler`` closed over the
caller's objects (a database inherited copy-on-write, nothing sent), it answers each request within a
deadline with what the handler returns (say, the records a call changed). The caller applies those
answers, and forks a new worker when its state changes otherwise. Workers die with their caller;
without ``os.fork`` a call runs in the caller, unbounded.
"""

from __future__ import annotations

import os
import pickle
import select
import signal
import threading
import time
import weakref
from collections.abc import Callable
from typing import Any

from .limits import ToolCrashed, ToolTimeout, _die_with, preserved_numeric_state

_HEADER = 8  # bytes of a message's length prefix


class _Worker:
    """One forked worker and the two pipes to it; the child answers each request with
    ``handler(request)`` (default: run a pickled ``(fn, args)``)."""

    def __init__(self, handler: Callable[[Any], Any] | None = None) -> None:
        to_child, from_parent = os.pipe()
        to_parent, from_child = os.pipe()
        parent = os.getpid()
        pid = os.fork()
        if pid == 0:  # the worker: serve until the caller closes its end
            try:
                os.close(from_parent)
                os.close(to_parent)
                _die_with(parent)
                _serve(to_child, from_child, handler or _run_pickled)
            finally:
                os._exit(0)
        os.close(to_child)
        os.close(from_child)
        self.pid, self.send_fd, self.recv_fd = pid, from_parent, to_parent
        self.owner = parent

    def call(self, payload: bytes, timeout: float) -> tuple[str, Any]:
        # The deadline counts from the call, not from the end of the write: a large payload's write
        # returns only once the worker has read it, and a caller descheduled there (a loaded machine)
        # would otherwise find a late answer already waiting and take it as in time.
        deadline = time.monotonic() + timeout
        _write(self.send_fd, payload)
        data = _read(self.recv_fd, deadline)
        if data is None:
            raise ToolCrashed("the call's worker process died before it returned")
        return pickle.loads(data)

    def kill(self) -> None:
        if os.getpid() != self.owner:  # a process forked from the caller leaves the caller's worker alone
            return
        for fd in (self.send_fd, self.recv_fd):
            try:
                os.close(fd)
            except OSError:
                pass
        try:
            os.kill(self.pid, signal.SIGKILL)
            os.waitpid(self.pid, 0)
        except (ProcessLookupError, ChildProcessError):
            pass


def _run_pickled(request: Any) -> Any:
    fn, args = request
    return fn(*args)


def _serve(recv_fd: int, send_fd: int, handler: Callable[[Any], Any]) -> None:
    while True:
        data = _read(recv_fd, None)
        if data is None:
            return
        try:
            request = pickle.loads(data)
            with preserved_numeric_state():  # one call's decimal / mpmath changes do not reach the next
                payload = ("ok", handler(request))
            out = pickle.dumps(payload)
        except BaseException as exc:  # noqa: BLE001 - reported to the caller
            out = pickle.dumps(("raised", (type(exc).__name__, str(exc))))
        _write(send_fd, out)


def _write(fd: int, data: bytes) -> None:
    view = memoryview(len(data).to_bytes(_HEADER, "little") + data)
    while view:
        view = view[os.write(fd, view) :]


def _read(fd: int, deadline: float | None) -> bytes | None:
    """One message from ``fd``; None at end of file; :class:`ToolTimeout` past ``deadline``."""
    chunks: list[bytes] = []
    need, header = _HEADER, True
    while need:
        if deadline is not None:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                raise ToolTimeout("deadline")
        chunk = os.read(fd, min(need, 1 << 20))
        if not chunk:
            return None
        chunks.append(chunk)
        need -= len(chunk)
        if not need and header:
            need, header, chunks = int.from_bytes(b"".join(chunks), "little"), False, []
    return b"".join(chunks)


_WORKERS: dict[int, _Worker] = {}
_LOCK = threading.Lock()


def call_with_deadline(fn: Callable[..., Any], args: tuple, timeout: float) -> Any:
    """``fn(*args)`` run in this process's worker; :class:`ToolTimeout` (the worker killed) when it
    takes longer than ``timeout`` seconds, :class:`ToolCrashed` when the worker died. ``fn`` and
    ``args`` must pickle (``fn`` by reference: a module-level function); an exception ``fn`` raises
    comes back as ``RuntimeError("<type>: <message>")``."""
    if not hasattr(os, "fork"):
        return fn(*args)
    payload = pickle.dumps((fn, args))
    with _LOCK:  # one call at a time per worker; threads of one process take turns
        worker = _WORKERS.get(os.getpid())
        if worker is None:
            worker = _WORKERS[os.getpid()] = _Worker()
        return _answer(worker, payload, timeout, lambda: (worker.kill(), _WORKERS.pop(os.getpid())))


def _answer(worker: _Worker, payload: bytes, timeout: float, drop: Callable[[], Any]) -> Any:
    """``worker``'s answer to ``payload``; on a timeout or death ``drop()`` runs, then the error is raised."""
    try:
        status, value = worker.call(payload, timeout)
    except (ToolTimeout, ToolCrashed, OSError) as exc:
        drop()
        if isinstance(exc, ToolTimeout):
            raise ToolTimeout(f"the call did not finish within {timeout:g} s") from None
        raise ToolCrashed(str(exc)) from None
    if status != "ok":
        raise RuntimeError(f"{value[0]}: {value[1]}")
    return value


def close_worker() -> None:
    """Stop this process's worker, if it has one (the next call starts another)."""
    with _LOCK:
        worker = _WORKERS.pop(os.getpid(), None)
    if worker is not None:
        worker.kill()


class StateWorker:
    """A worker process forked now, owning (a copy-on-write copy of) whatever ``handler`` closes
    over; :meth:`request` runs ``handler(request)`` there within a deadline.

    ``request`` and the handler's answer must pickle; the handler need not (it is never sent).
    A request past its deadline, or a worker that died, kills the worker for good (:attr:`alive`
    turns False and every later request raises :class:`ToolCrashed`): its state is no longer the
    caller's, who forks a new one. The process is killed when the object is closed or collected,
    and dies with its caller. Needs ``os.fork`` (see :func:`can_fork`).
    """

    def __init__(self, handler: Callable[[Any], Any]) -> None:
        self._worker: _Worker | None = _Worker(handler)
        self._finalizer = weakref.finalize(self, _Worker.kill, self._worker)

    @property
    def alive(self) -> bool:
        """Whether the worker can still take requests here (it has not overrun, died or been closed,
        and this is the process that forked it: a process forked since forks its own)."""
        return self._worker is not None and self._worker.owner == os.getpid()

    @property
    def pid(self) -> int | None:
        """The worker's process id, None once it is gone."""
        return None if self._worker is None else self._worker.pid

    def request(self, request: Any, timeout: float) -> Any:
        """``handler(request)``'s answer; :class:`ToolTimeout` (the worker killed) past ``timeout``
        seconds, :class:`ToolCrashed` when the worker died, ``RuntimeError("<type>: <message>")``
        when the handler raised (the worker lives on)."""
        if self._worker is None or self._worker.owner != os.getpid():
            raise ToolCrashed("the worker was stopped")
        return _answer(self._worker, pickle.dumps(request), timeout, self.close)

    def close(self) -> None:
        """Kill the worker (idempotent)."""
        self._worker = None
        self._finalizer()


def can_fork() -> bool:
    """Whether this platform has ``os.fork`` (a :class:`StateWorker` needs it)."""
    return hasattr(os, "fork")
