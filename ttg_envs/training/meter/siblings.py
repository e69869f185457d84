"""Siblings: other actions tried in branches from a trajectory's states, each with its exact target.

A meter trained on trajectories sees one action per state, so nothing teaches it that ``look`` is
worth less than the expert's step. Training ranks each sibling against the trajectory's own next
state (``RegressionConfig.sibling_weight``), and a ``noop`` or ``departure`` sibling also against
its state's ``best`` sibling (the comparison a guide makes).

- :func:`add_noop_siblings` (ALFWorld, recorded through :class:`~ttg_envs.wrappers.PlanLength`):
  commands that change nothing (:data:`.evaluation.NOOP_VERBS`, ``help``), target the plan before
  them one turn later; ``best=True`` adds the planner's next command.
- :func:`add_gold_siblings` (BFCL, tau2, labelled by :func:`~.evaluation.label_gold_path`): gold's
  move and departures from it (skipping ahead, or a call dropped, added or given a wrong argument),
  targets gold's remaining tokens from where the replays say each branch stands.
"""

from __future__ import annotations

import os
import random
from collections.abc import Callable, Sequence
from typing import Any

from .datasets import Sibling, Trajectory

__all__ = ["add_gold_siblings", "add_noop_siblings", "noop_commands"]


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


def add_gold_siblings(
    trajectories: Sequence[Trajectory],
    env_id: str,
    *,
    env_kwargs: dict[str, Any] | None = None,
    every: int = 1,
    per_state: int = 2,
    seed: int = 0,
    progress: bool = True,
) -> int:
    """Fill ``trajectory.siblings`` of tool-env trajectories with departures from gold's path; returns
    how many were made.

    Every trajectory needs ``gold_positions`` and ``expert_ttg`` (``label_gold_path(targets=True)``,
    what ``train-meter --targets gold`` runs first). Each is replayed in a fresh env of its task
    (checking that the engine gives back the recorded transcript), and at states ``t = 0, every, ...``
    that are still on gold's path (``k = gold_positions[t]`` of gold's moves done, gold's next move
    ``gold[k]``) it tries, each in its own branch: gold's move itself where the trajectory took another
    (``kind="best"``), and up to ``per_state`` departures (``kind="departure"``), each different from
    the step the trajectory took: first the moves that skip ahead, gold's next move and gold's last
    (a tau2 conversation closed before its write, a BFCL turn ended before its calls), then, drawn
    with ``random.Random(f"{seed}:{file name}:{line}:{t}")``, gold's move with one call dropped, an
    extra call of gold's other moves, or one argument changed. A sibling's target is what ``gold_walk`` gives a step
    to the same state: the tokens of ``gold[k + 1:]`` when they still win after it, else of
    ``gold[k:]`` when those do, else None (failure); 0 when the branch ends in a win.
    """
    from ...bars import progress_bar
    from ...wrappers import make_env
    from ...wrappers.gold_path import gold_actions, gold_to_go

    made = 0
    envs: dict[str, Any] = {}
    golds: dict[tuple[str, str], Any] = {}
    try:
        ordered = sorted(trajectories, key=lambda t: (str(t.task.get("split", "train")), str(t.task["id"])))
        for traj in progress_bar(ordered, desc="gold siblings", disable=not progress):
            if traj.gold_positions is None:
                raise ValueError(f"{traj.id}: gold siblings need the gold path's positions (label_gold_path first)")
            split = str(traj.task.get("split", "train"))
            key = (split, str(traj.task["id"]))
            if split not in envs:
                envs[split] = make_env(env_id, **{"split": split, **(env_kwargs or {})})
            if key not in golds:
                gold = gold_actions(envs[split], traj.task["id"], env_id)
                golds[key] = None if gold is None else (gold, gold_to_go(gold))
            if golds[key] is None:
                traj.siblings = []
                continue
            traj.siblings = _gold_siblings(envs[split], traj, *golds[key], every, per_state, seed)
            made += len(traj.siblings)
    finally:
        for env in envs.values():
            env.close()
    return made


def _gold_siblings(stack: Any, traj: Trajectory, gold: list, to_go: list[int], every: int, per_state: int, seed: int) -> list[Sibling]:
    """The siblings of one trajectory (see :func:`add_gold_siblings`)."""
    from ...tools import action_text

    env = stack.unwrapped
    env.reset(seed=0, options={"task_id": traj.task["id"]})
    siblings: list[Sibling] = []
    for t, i in enumerate(traj.actions):
        k = traj.gold_positions[t]
        if t % every == 0 and k is not None and k < len(gold):
            if env.messages != traj.prefix(t):
                raise ValueError(f"{traj.id}: the engine's transcript left the recorded one before action {t}")
            rng = random.Random(f"{seed}:{os.path.basename(traj.id)}:{t}")
            siblings += _gold_state_siblings(env, traj, t, k, gold, to_go, per_state, rng)
        env.step(action_text(traj.messages[i]))
        if env.done:
            break
    return siblings


def _gold_state_siblings(
    env: Any, traj: Trajectory, t: int, k: int, gold: list, to_go: list[int], per_state: int, rng: random.Random
) -> list[Sibling]:
    """Gold's move (where the trajectory took another) and up to ``per_state`` departures from state ``t``."""
    from ...tools import action_text
    from .evaluation import _move

    taken = _move(traj.messages[traj.actions[t]])
    own = _move(gold[k])
    out = []
    if taken != own:
        out += _gold_branch(env, traj, t, action_text(gold[k]), k, gold, to_go, "best", {taken})
    ends, changes = _departures(gold, k, rng)
    chosen: list[Sibling] = []
    for text in ends + rng.sample(changes, len(changes)):  # ends first, then drawn; stop once per_state are made
        if len(chosen) == per_state:
            break
        chosen += _gold_branch(env, traj, t, text, k, gold, to_go, "departure", {taken, own})
    return out + chosen


def _departures(gold: list, k: int, rng: random.Random) -> tuple[list[str], list[str]]:
    """Texts that depart from gold's move ``k``: the moves that skip ahead (gold's next move, then
    gold's last move: the conversation or turn ended early), and the move's calls with one dropped,
    an extra one, or one argument changed (distinct texts, each list in a fixed order)."""
    from ...envs.perturb import KINDS, Perturber
    from ...tools import CALL_STYLES, action_text, format_tool_calls, message_calls, parse_tool_calls

    ends = list(dict.fromkeys(action_text(gold[j]) for j in (k + 1, len(gold) - 1) if k < j < len(gold)))
    texts: list[str] = []
    calls = message_calls(gold[k])
    if calls:
        style = parse_tool_calls(str(gold[k].get("content") or "")).style
        style = style if style in CALL_STYLES else "hermes"
        others = [c for j, m in enumerate(gold) if j != k for c in message_calls(m) if c not in calls]
        perturber = Perturber(1.0, seed=rng.randrange(2**32))
        for kind in KINDS:
            departed = perturber.depart(kind, list(calls), others)
            if departed and departed != calls:
                texts.append(format_tool_calls(departed, style))
    return ends, [text for text in dict.fromkeys(texts) if text not in ends]


def _gold_branch(
    env: Any, traj: Trajectory, t: int, text: str, k: int, gold: list, to_go: list[int], kind: str, exclude: set
) -> list[Sibling]:
    """``text`` taken in a branch from state ``t`` (gold's ``k`` moves done) as a sibling with its
    target, or none when the move it made is one of ``exclude``."""
    from ...wrappers.gold_path import replay_wins
    from .evaluation import _move

    branch = env.branch()
    try:
        branch.step(text)
        messages = [dict(m) for m in branch.messages]
        if _move(messages[traj.actions[t]]) in exclude:
            return []
        if branch.done:
            target = 0 if branch.success else None
        elif replay_wins(branch, gold[k + 1 :]):
            target = to_go[k + 1]
        elif replay_wins(branch, gold[k:]):
            target = to_go[k]
        else:
            target = None
        return [Sibling(step=t, messages=messages, expert_ttg=target, kind=kind)]
    finally:
        branch.close()
