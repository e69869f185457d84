"""Inside the sandbox: the fork server, one clean interpreter per sandbox that forks the children.

The zygote is started with ``python -c`` (so no caller module is ever re-imported in it), imports
FastAPI/SQLAlchemy once through :mod:`.inside_app`, and then serves a control socket
(``AF_UNIX``/``SOCK_SEQPACKET``): ``{"op": "spawn", "target"}`` with one socket attached forks a
child that closes the control socket, reads its job (JSON) from the attached socket and runs the
target; ``{"op": "kill", "pid"}`` stops a child it forked; ``{"op": "keep", "pid"}`` (not answered)
marks an app that an app forked for a branch (the parent stops that one itself, through a pidfd). Children are
reaped by the zygote, so a pid it kills is never a recycled one; it is the sandbox's subreaper, so
a branch app whose original stopped is reaped here too. In the OS sandbox, ``kill`` also stops every
process there but the zygote, its live children and the kept apps (what apps forked on their own),
once the killed one is gone (:class:`_Dying`; ``kill`` of a kept pid releases it to that sweep);
``kill`` of pid 0 is a sweep request, answered once every killed process is gone and swept.
``{"op": "clear_tmp"}`` empties the sandbox's private ``/tmp`` (in the OS sandbox only).
"""

from __future__ import annotations

import json
import os
import select
import shutil
import signal
import socket
import time
from multiprocessing.connection import Connection

from . import inside_app, inside_verifier

TARGETS = {"app": inside_app.serve_app, "verify": inside_verifier.verify}


def _run_child(fd: int, target: str) -> None:
    # Only stdio and the job's socket cross into model-written code.
    os.closerange(3, fd)
    os.closerange(fd + 1, 1 << 16)
    conn = Connection(fd)
    job = json.loads(conn.recv_bytes())
    TARGETS[target](conn, **job)


def _prctl(option: int, value: int) -> None:
    import ctypes

    ctypes.CDLL(None, use_errno=True).prctl(option, value, 0, 0, 0)


def _not_dumpable() -> None:
    _prctl(4, 0)  # PR_SET_DUMPABLE = 4


def _running(pid: int) -> bool:
    """Whether any thread of process ``pid`` exists and is not a zombie.

    A killed process's main thread can be a zombie while its other threads still exit; its children
    go to the subreaper only once the last one has, so the main thread's state alone is not enough.
    """
    try:
        threads = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return False
    for tid in threads:
        try:
            with open(f"/proc/{pid}/task/{tid}/stat", "rb") as f:
                stat = f.read()
        except OSError:
            continue
        # The command name (in parentheses) may hold anything: the state is the field after its last ")".
        if stat[stat.rfind(b")") + 2 : stat.rfind(b")") + 3] not in (b"Z", b"X", b""):
            return True
    return False


def _children() -> list[int]:
    me = os.getpid()
    try:
        with open(f"/proc/self/task/{me}/children") as f:
            return [int(p) for p in f.read().split()]
    except OSError:  # no CONFIG_PROC_CHILDREN: read every process's parent
        found = []
        for name in filter(str.isdigit, os.listdir("/proc")):
            try:
                with open(f"/proc/{name}/stat", "rb") as f:
                    stat = f.read()
            except OSError:
                continue
            fields = stat[stat.rfind(b")") + 2 :].split()
            if len(fields) > 1 and int(fields[1]) == me:
                found.append(int(name))
        return found


def _reap_all(live: set[int]) -> None:
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        live.discard(pid)


def _sweep(live: set[int], kept: set[int]) -> None:
    """Kill and reap every child of this process but the ``live`` ones and ``kept``, until none is left.

    As the sandbox's subreaper this process inherits what a stopped app left running (its forks,
    theirs in turn, as each parent dies): those are the children it did not fork itself.
    """
    for _ in range(1000):
        _reap_all(live)
        victims = [pid for pid in _children() if pid not in live and pid not in kept]
        if not victims:
            return
        for pid in victims:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        for pid in victims:  # dead, so their own children are ours on the next round
            try:
                os.waitpid(pid, 0)
            except ChildProcessError:
                pass


#: Seconds a killed process may take to go before it is swept anyway.
GONE_TIMEOUT = 5.0
#: How often (seconds) the zygote looks, between requests, whether a killed process is gone.
GONE_POLL = 0.002


class _Dying:
    """Processes killed at the parent's request that may not be gone yet; once one is, :func:`_sweep` runs.

    ``kill`` is answered at once, and the zygote looks between requests (every :data:`GONE_POLL`
    seconds) for what has gone, so a burst of closes never waits on each exit; a sweep request
    (``kill`` of pid 0) and ``clear_tmp`` first wait for every one of them and sweep.
    """

    def __init__(self) -> None:
        self.deadlines: dict[int, float] = {}

    def add(self, pid: int) -> None:
        self.deadlines[pid] = time.monotonic() + GONE_TIMEOUT

    def settle(self, live: set[int], kept: set[int], wait: bool = False) -> None:
        """Sweep when any of them is gone (or late); with ``wait``, until none is left."""
        while self.deadlines:
            _reap_all(live)
            now = time.monotonic()
            gone = [pid for pid, at in self.deadlines.items() if pid not in live and (not _running(pid) or now >= at)]
            late = [pid for pid, at in self.deadlines.items() if pid in live and now >= at]
            for pid in late:  # a direct child that does not exit: it is reaped by the sweep's round
                live.discard(pid)
            for pid in gone + late:
                del self.deadlines[pid]
            if gone or late:
                _sweep(live, kept)
            if not wait:
                return
            if self.deadlines:
                time.sleep(0.001)


def _mounted_under_tmp() -> set[str]:
    """The names in ``/tmp`` that are, or hold, a mount point (the episode folder, a Python under /tmp)."""
    names = set()
    with open("/proc/self/mountinfo") as f:
        for line in f:
            point = line.split()[4]
            if point.startswith("/tmp/"):
                names.add(point.split("/")[2])
    return names


def _clear_tmp() -> None:
    """Remove everything in ``/tmp`` but the host's folders mounted there (links removed, never followed)."""
    keep = _mounted_under_tmp()
    for entry in os.scandir("/tmp"):
        if entry.name in keep:
            continue
        try:
            if entry.is_dir(follow_symlinks=False):
                shutil.rmtree(entry.path)
            else:
                os.unlink(entry.path)
        except OSError:
            pass


def main(control_fd: int, isolated: bool = False) -> None:
    """Serve spawn and kill requests on ``control_fd`` until the parent closes it."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent's Ctrl-C is the parent's to handle
    if isolated:
        _not_dumpable()
    _prctl(36, 1)  # PR_SET_CHILD_SUBREAPER: orphans of the apps (branch apps, their leftovers) come here
    control = socket.socket(fileno=control_fd)
    live: set[int] = set()
    kept: set[int] = set()
    dying = _Dying()
    try:
        while True:
            while dying.deadlines and not select.select([control], [], [], GONE_POLL)[0]:
                dying.settle(live, kept)
            try:
                data, fds, _, _ = socket.recv_fds(control, 4096, 1)
            except OSError:
                break
            if not data:
                break
            _reap_all(live)
            dying.settle(live, kept)
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
                    os.kill(pid, signal.SIGKILL)  # reaped by _reap_all once it has exited
                    dying.add(pid)
                elif pid in kept:  # stopped by the parent: once it is gone, its children are ours
                    kept.discard(pid)
                    dying.add(pid)
                # A kill is answered at once (the parent goes on; the sweep follows once the process
                # is gone); a sweep request (or a kill of what is gone already) once it has swept.
                if pid not in dying.deadlines:
                    dying.settle(live, kept, wait=True)
                    _sweep(live, kept)
                control.send(b'{"ok": true}')
            elif message["op"] == "clear_tmp":
                dying.settle(live, kept, wait=True)
                if isolated:
                    _clear_tmp()
                control.send(b'{"ok": true}')
            elif message["op"] == "keep":  # not answered (the parent goes on at once)
                kept.add(int(message["pid"]))
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
