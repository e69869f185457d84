"""A fork server for the AWM sandbox: one clean interpreter per parent process that forks the children.

The zygote is started with ``python -c`` (so no caller module is ever re-imported in it), imports
FastAPI/SQLAlchemy once through :mod:`.sandbox`, and then serves a control socket
(``AF_UNIX``/``SOCK_SEQPACKET``): ``{"op": "spawn", "target"}`` with one socket attached forks a
child that closes the control socket, reads its job (JSON) from the attached socket and runs the
target; ``{"op": "kill", "pid"}`` stops a child it forked. Children are reaped by the zygote, so a
pid it kills is never a recycled one.
"""

from __future__ import annotations

import json
import os
import signal
import socket
from multiprocessing.connection import Connection

from . import sandbox

TARGETS = {"app": sandbox.serve_app, "verify": sandbox.run_verifier}


def _reap(live: set[int]) -> None:
    for pid in list(live):
        try:
            done, _ = os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            done = pid
        if done:
            live.discard(pid)


def _run_child(fd: int, target: str) -> None:
    # Only stdio and the job's socket cross into model-written code.
    os.closerange(3, fd)
    os.closerange(fd + 1, 1 << 16)
    conn = Connection(fd)
    job = json.loads(conn.recv_bytes())
    TARGETS[target](conn, **job)


def _not_dumpable() -> None:
    import ctypes

    ctypes.CDLL(None, use_errno=True).prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE = 4


def _sweep() -> None:
    """Kill every process this one may signal (in the sandbox: all but itself and init) and reap."""
    try:
        os.kill(-1, signal.SIGKILL)
    except ProcessLookupError:
        pass
    while True:
        try:
            if os.waitpid(-1, os.WNOHANG) == (0, 0):
                break
        except ChildProcessError:
            break


def main(control_fd: int, isolated: bool = False) -> None:
    """Serve spawn and kill requests on ``control_fd`` until the parent closes it."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent's Ctrl-C is the parent's to handle
    # kill(-1) is only safe as an unprivileged uid in a PID namespace of our own (bwrap's init is 1).
    sweep = isolated and os.getuid() != 0 and os.getpid() == 2
    if isolated:
        _not_dumpable()
    control = socket.socket(fileno=control_fd)
    live: set[int] = set()
    try:
        while True:
            try:
                data, fds, _, _ = socket.recv_fds(control, 4096, 1)
            except OSError:
                break
            if not data:
                break
            _reap(live)
            message = json.loads(data)
            if message["op"] == "spawn" and fds and message.get("target") in TARGETS:
                pid = os.fork()
                if pid == 0:
                    control.close()
                    try:
                        _run_child(fds[0], message["target"])
                    finally:
                        os._exit(0)
                live.add(pid)
                control.send(json.dumps({"pid": pid}).encode())
            elif message["op"] == "kill":
                pid = int(message["pid"])
                if pid in live:
                    os.kill(pid, signal.SIGKILL)
                    os.waitpid(pid, 0)
                    live.discard(pid)
                if sweep:
                    _sweep()
                control.send(b'{"ok": true}')
            else:
                control.send(b'{"error": "bad request"}')
            for fd in fds:
                os.close(fd)
    finally:
        for pid in live:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
