"""No-op siblings: commands that do nothing, tried in branches from a trajectory's states.

A meter trained on trajectories sees one action per state, so nothing teaches it that ``look``
is worth less than the expert's step. At every ``every``-th state this module branches the real
engine, takes up to ``per_state`` commands that change nothing (:data:`.evaluation.NOOP_VERBS`,
plus ``help``) and keeps each history with its expert target (the plan
before it, one turn later); training ranks each against the trajectory's own next state
(``RegressionConfig.sibling_weight``). ``best=True`` also adds the planner's next command as a
sibling, which every no-op sibling of its state is paired with (the comparison a guide makes).

Needs an env with an exact planner (ALFWorld) and trajectories recorded through
:class:`~ttg_envs.wrappers.PlanLength` (``expert_ttg`` and ``plan_length`` in their infos).
"""

from __future__ import annotations

import os
import random
from collections.abc import Callable, Sequence
from typing import Any

from .datasets import Sibling, Trajectory

__all__ = ["add_noop_siblings", "noop_commands"]


def noop_commands(admissible: Sequence[str]) -> list[str]:
    """The commands of ``admissible`` that change nothing for the task, and ``help``."""
    from .evaluation import NOOP_VERBS

    return list(dict.fromkeys([c for c in admissible if c.split(" ")[0] in NOOP_VERBS] + ["help"]))


def add_noop_siblings(
    trajectories: Sequence[Trajectory],
    env_id: str,
    *,
    respond: Callable[[str], str],
    turn_limit: int | None = None,
    every: int = 3,
    per_state: int = 2,
    always: Sequence[str] = (),
    seed: int = 0,
    env_kwargs: dict[str, Any] | None = None,
    progress: bool = True,
    best: bool = False,
) -> int:
    """Fill ``trajectory.siblings`` of each trajectory with no-op branches; returns how many were made.

    Replays each trajectory in a fresh env of its split (checking that the engine gives back the
    recorded transcript), and at states ``t = 0, every, 2 * every, ...`` before its last action
    tries ``per_state`` no-op commands: those of ``always`` that are no-ops there first, the rest drawn
    with ``random.Random(f"{seed}:{file name}:{line}:{t}")`` (the trajectory's id without the folders
    its file was read from, so a copy of the recordings elsewhere draws the same), written as
    ``respond(command)`` (the expert's format), each in its own branch. A sibling's target is the
    state's own ``expert_ttg`` while the state's plan still fits in the turns left after the no-op
    (``limit - t - 1``, the limit being the trajectory's own ``turn_limit`` when it was recorded with
    one, else ``turn_limit``, else the env's ``max_steps``), else None (the expert would no
    longer finish). ``best`` adds the planner's next command from each such state (``kind="best"``),
    its target the expert's TTG from the state after it, counted by the env's ``TokenCounter``
    (0 when it wins, None when its plan no longer fits or the planner timed out).
    """
    from ...bars import progress_bar
    from ...wrappers import make_env
    from ...wrappers.branching import find_wrapper
    from ...wrappers.token_counter import TokenCounter

    made = 0
    envs: dict[str, Any] = {}
    try:
        for traj in progress_bar(list(trajectories), desc="no-op siblings", disable=not progress):
            if traj.expert_ttg is None or traj.plan_lengths is None:
                raise ValueError(f"{traj.id}: siblings need expert_ttg and plan_length (record through PlanLength)")
            split = traj.task.get("split", "train")
            if split not in envs:
                stack = make_env(env_id, **{"split": split, **(env_kwargs or {})})
                counter = find_wrapper(stack, TokenCounter)
                if best and counter is None:
                    raise ValueError(f"{env_id}: best siblings need a TokenCounter in the env stack to count the expert's tokens")
                envs[split] = (stack.unwrapped, counter.count if counter is not None else None)
            env, count = envs[split]
            _, info = env.reset(seed=0, options={"task_id": traj.task["id"]})
            siblings = []
            for t, i in enumerate(traj.actions):
                if t % every == 0:
                    if env.messages != traj.prefix(t):
                        raise ValueError(f"{traj.id}: the engine's transcript left the recorded one before action {t}")
                    limit = traj.turn_limit or (env.max_steps if turn_limit is None else turn_limit)
                    siblings += _state_siblings(env, info, traj, t, respond, limit, per_state, always, seed)
                    if best:
                        siblings += _best_sibling(env, traj, t, respond, limit, count)
                _, _, terminated, truncated, info = env.step(traj.messages[i]["content"])
                if terminated or truncated:
                    break
            traj.siblings = siblings
            made += len(siblings)
    finally:
        for env, _ in envs.values():
            env.close()
    return made


def _state_siblings(
    env: Any,
    info: dict[str, Any],
    traj: Trajectory,
    t: int,
    respond: Callable[[str], str],
    turn_limit: int,
    per_state: int,
    always: Sequence[str],
    seed: int,
) -> list[Sibling]:
    """Up to ``per_state`` no-op siblings of state ``t`` (never the trajectory's own next action)."""
    taken = traj.messages[traj.actions[t]]["content"]
    commands = [c for c in noop_commands(info.get("admissible_commands") or []) if respond(c) != taken]
    first = [c for c in commands if c in always][:per_state]
    rest = [c for c in commands if c not in first]
    rng = random.Random(f"{seed}:{os.path.basename(traj.id)}:{t}")
    chosen = first + rng.sample(rest, min(per_state - len(first), len(rest)))
    plan = traj.plan_lengths[t]
    fits = traj.expert_ttg[t] is not None and plan is not None and plan <= turn_limit - t - 1
    out = []
    for command in chosen:
        branch = env.branch()
        try:
            branch.step(respond(command))
            out.append(Sibling(step=t, messages=[dict(m) for m in branch.messages], expert_ttg=traj.expert_ttg[t] if fits else None))
        finally:
            branch.close()
    return out


def _best_sibling(
    env: Any, traj: Trajectory, t: int, respond: Callable[[str], str], turn_limit: int, count: Callable[[str], int]
) -> list[Sibling]:
    """The planner's next command from state ``t`` as a sibling (none when the trajectory took it,
    or the planner has no plan there)."""
    plan = env.expert_plan()
    if not plan or getattr(env, "last_plan_timed_out", False) or respond(plan[0]) == traj.messages[traj.actions[t]]["content"]:
        return []
    branch = env.branch()
    try:
        *_, info = branch.step(respond(plan[0]))
        if info.get("success"):
            target = 0
        else:
            after = branch.expert_plan()
            fits = bool(after) and not getattr(branch, "last_plan_timed_out", False) and len(after) <= turn_limit - t - 1
            target = sum(count(respond(c)) for c in after) if fits else None
        return [Sibling(step=t, messages=[dict(m) for m in branch.messages], expert_ttg=target, kind="best")]
    finally:
        branch.close()
