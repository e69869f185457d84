"""fast-downward's ``replan`` under a time limit.

``replan`` is a C search that nothing can interrupt in-process, and from some states it searches
for minutes. :func:`run_replan` forks the process (the child inherits the loaded game and the
current state for free, copy-on-write), runs the search in the child and kills it at the
deadline (:func:`ttg_envs.tools.limits.run_limited`, which tool calls use too). Where ``fork`` is unavailable, or with no time limit, it searches in-process.
"""

from __future__ import annotations

import os
from typing import Any

from ...tools.limits import ToolCrashed, ToolTimeout, run_limited


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
    try:
        status, value = run_limited(lambda: _replan_names(lib), timeout)
    except ToolTimeout:
        return None
    except ToolCrashed as exc:
        raise RuntimeError("the planner worker process failed without a plan") from exc
    if status != "ok":
        raise RuntimeError(f"the planner failed: {value[0]}: {value[1]}")
    return value
