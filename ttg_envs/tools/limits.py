"""Tool calls with a time limit that cannot change the caller's process state.

A call such as ``10 ** 10 ** 9`` runs in C holding the GIL: no thread or signal handler of the
caller can stop it. :func:`run_limited` therefore runs the call in a forked child process (a
copy of the caller, so the backend objects are there as they are now), waits at most
``timeout`` seconds and kills it when it is late. What the child changes (objects, ``decimal``
context, mpmath precision, module globals) stays in the child.

Tool envs run the calls of stateless tools this way (BFCL's ``MathAPI``, tau2's generic tools such
as ``calculate``: the known arithmetic bombs) and take the child's result. Calls that change
episode objects run in the caller under :func:`preserved_numeric_state`: a fork per call (its cost
grows with the caller's memory) is too much for every call.
Where ``os.fork`` does not exist the call runs in the caller without a limit.
"""

from __future__ import annotations

import contextlib
import decimal
import os
import pickle
import resource
import select
import signal
import sys
import time
from collections.abc import Callable, Iterator
from typing import Any

#: Extra address space (bytes) a call's child may map beyond what the caller has mapped.
CHILD_EXTRA_MEMORY = 2 << 30


class ToolTimeout(RuntimeError):
    """The call did not finish within its time limit and was stopped."""


class ToolCrashed(RuntimeError):
    """The call's process died (out of memory, a crash) before it returned."""


def _mapped_bytes() -> int:
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmSize:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def _die_with(parent: int) -> None:
    """Have the kernel kill this process when ``parent`` exits (Linux; elsewhere a no-op), so a
    child whose caller was killed does not go on computing as an orphan."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        return
    if os.getppid() != parent:  # the caller died before prctl took effect
        os._exit(1)


def _child(fn: Callable[[], Any], write_fd: int, timeout: float, parent: int) -> None:
    try:
        _die_with(parent)
        # A backstop that needs no caller: the CPU time the call may use (its wall-clock limit
        # kills it first whenever the caller is alive, as CPU time never exceeds wall time).
        cpu = int(timeout) + 2
        resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu))
        mapped = _mapped_bytes()
        if mapped:
            limit = mapped + CHILD_EXTRA_MEMORY
            resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
        try:
            payload = ("ok", fn())
        except BaseException as exc:  # noqa: BLE001 - reported to the caller, never raised here
            payload = ("raised", (type(exc).__name__, str(exc)))
        try:
            data = pickle.dumps(payload)
        except Exception as exc:  # noqa: BLE001
            data = pickle.dumps(("raised", (type(exc).__name__, "the result could not be sent back")))
        view = memoryview(data)
        while view:
            view = view[os.write(write_fd, view) :]
    finally:
        os._exit(0)


def run_limited(fn: Callable[[], Any], timeout: float) -> tuple[str, Any]:
    """Run ``fn()`` in a forked child within ``timeout`` seconds.

    Returns ``("ok", value)`` (``value`` pickled back) or ``("raised", (type name, message))``. Raises
    :class:`ToolTimeout` when late (the child is killed) and :class:`ToolCrashed` when it died.
    """
    if not hasattr(os, "fork"):
        try:
            return "ok", fn()
        except Exception as exc:  # noqa: BLE001
            return "raised", (type(exc).__name__, str(exc))
    read_fd, write_fd = os.pipe()
    sys.stdout.flush()
    sys.stderr.flush()
    parent = os.getpid()
    pid = os.fork()
    if pid == 0:
        os.close(read_fd)
        _child(fn, write_fd, timeout, parent)
    os.close(write_fd)
    chunks, deadline, late = [], time.monotonic() + timeout, False
    try:
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                late = True
                break
            ready, _, _ = select.select([read_fd], [], [], left)
            if not ready:
                continue
            chunk = os.read(read_fd, 1 << 16)
            if not chunk:
                break
            chunks.append(chunk)
    finally:
        os.close(read_fd)
        if late:
            os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
    if late:
        raise ToolTimeout(f"the call did not finish within {timeout:g} s and was stopped")
    try:
        return pickle.loads(b"".join(chunks))
    except Exception:  # noqa: BLE001 - empty or cut: the child died
        raise ToolCrashed("the call's process died before it returned (out of memory?)") from None


@contextlib.contextmanager
def preserved_numeric_state() -> Iterator[None]:
    """Restore the thread's ``decimal`` context and mpmath's precision (if loaded) after the block."""
    mpmath = sys.modules.get("mpmath")
    prec = mpmath.mp.prec if mpmath is not None else 53  # mpmath's default, should the call import it
    with decimal.localcontext():
        try:
            yield
        finally:
            mpmath = sys.modules.get("mpmath")
            if mpmath is not None and mpmath.mp.prec != prec:
                mpmath.mp.prec = prec
