"""fast-downward's ``replan`` under a time limit.

``replan`` is a C search that nothing can interrupt in-process, and from some states it searches
for minutes. :func:`run_replan` forks the process (the child inherits the loaded game and the
current state for free, copy-on-write), runs the search in the child and kills it at the
deadline. Where ``fork`` is unavailable, or with no time limit, it searches in-process.
"""

from __future__ import annotations

import json
import os
import select
import signal
import time
from typing import Any


def _replan_names(lib: Any) -> list[str]:
    from fast_downward import Operator

    if not lib.replan(False):
        return []
    operators = (Operator * lib.get_last_plan_length())()
    lib.get_last_plan(operators)
    return [op.name for op in operators]


def run_replan(lib: Any, timeout: float | None) -> list[str] | None:
    """Operator names of the planner's plan from the lib's current state, [] when there is none,
    None when the search ran past ``timeout`` seconds."""
    if timeout is None or not hasattr(os, "fork"):
        return _replan_names(lib)
    for name in ("replan", "get_last_plan_length", "get_last_plan"):
        getattr(lib, name)  # resolve the symbols before forking
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:  # child: search, send the plan, exit without running the parent's cleanup
        status = 1
        try:
            os.close(read_fd)
            data = json.dumps(_replan_names(lib)).encode()
            view = memoryview(data)
            while view:
                view = view[os.write(write_fd, view):]
            status = 0
        finally:
            os._exit(status)
    os.close(write_fd)
    chunks: list[bytes] = []
    deadline = time.monotonic() + timeout
    try:
        while True:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([read_fd], [], [], left)[0]:
                os.kill(pid, signal.SIGKILL)
                return None
            chunk = os.read(read_fd, 1 << 16)
            if not chunk:
                break
            chunks.append(chunk)
    finally:
        os.close(read_fd)
        os.waitpid(pid, 0)
    if not chunks:
        raise RuntimeError("the planner worker process failed without a plan")
    return json.loads(b"".join(chunks))
