"""The one episode runner: ``ttg rollout``, ``ttg eval``, meter recording and the demo play through it.

Work is data: an :class:`EpisodeTask` names the env (id and kwargs), the task index, the seed and
who plays (a scripted policy ``name[:eps]`` of the env, or a selection condition over a
``load_actor`` spec), plus what to record. :func:`run_tasks` plays a list of them, in one process
or over a pool of spawned workers, with one progress display, and returns an
:class:`EpisodeResult` per task in the order given.

One seed rule everywhere: the env resets with ``seed`` and the policy's RNG gets
:func:`policy_seed` ``(seed, task index)``, so results do not depend on how work is split.
Tasks that share an env stack play in one env (one game load per task, whatever the number of
policies, conditions and seeds on it).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass, field, fields
from functools import cache
from multiprocessing import get_context
from typing import Any

import gymnasium as gym
import numpy as np

from .agents.conditions import make_agent, needs_meter
from .bars import progress_bar
from .info_fields import EPISODE_COUNTS
from .registry import counted_info, make_policy
from .wrappers import PlanLength, make_env, wrap_env
from .wrappers.recorder import sort_by_task

__all__ = [
    "POLICY_SEED_STRIDE",
    "EpisodeResult",
    "EpisodeTask",
    "Policy",
    "count_phrases",
    "count_totals",
    "num_tasks",
    "policy_seed",
    "run_episode",
    "run_tasks",
    "split_tasks",
    "spread_indices",
]

#: A policy maps an env (any wrapper stack) to the assistant text of its next step.
Policy = Callable[[gym.Env], str]

POLICY_SEED_STRIDE = 1_000_003


def policy_seed(seed: int, task_index: int) -> int:
    """The policy RNG seed of an episode: ``seed * 1_000_003 + task index`` (the env resets with ``seed``)."""
    return seed * POLICY_SEED_STRIDE + task_index


def spread_indices(n: int, limit: int | None, skip: int = 0) -> tuple[int, ...]:
    """``limit`` task indices out of ``skip..n-1``, spread evenly (all of them when ``limit`` is None or larger).

    Task lists are sorted by id, which groups task types (ALFWorld's first ten tasks are all
    ``look_at_obj_in_light``), so a limit takes evenly spaced tasks from the first to the last
    (``numpy.linspace`` rounded) rather than the first ones.
    """
    count = max(0, n - skip)
    if limit is None or limit >= count:
        return tuple(range(skip, n))
    return tuple(skip + int(i) for i in np.linspace(0, count - 1, max(0, limit)).round())


def _key(env_kwargs: Mapping[str, Any]) -> str:
    return json.dumps(dict(env_kwargs), sort_keys=True, default=repr)


@cache
def _probe(env_id: str, kwargs_key: str) -> int:
    import ttg_envs  # noqa: F401  (registers the ids)

    env = gym.make(env_id, **json.loads(kwargs_key))
    try:
        return env.unwrapped.num_tasks
    finally:
        env.close()


def num_tasks(env_id: str, env_kwargs: Mapping[str, Any] | None = None) -> int:
    """How many tasks ``gym.make(env_id, **env_kwargs)`` serves (a probe env, once per process and kwargs)."""
    return _probe(env_id, _key(env_kwargs or {}))


def split_tasks(
    env_id: str, env_kwargs: Mapping[str, Any] | None = None, *, tasks: Sequence[int] | None = None, limit: int | None = None
) -> tuple[int, ...]:
    """The task indices a run plays of the split ``env_kwargs`` names: ``tasks`` (checked against the
    split's size), else ``limit`` of them spread over it (:func:`spread_indices`), else all."""
    n = num_tasks(env_id, env_kwargs)
    if tasks is None:
        return spread_indices(n, limit)
    bad = next((int(i) for i in tasks if not 0 <= int(i) < n), None)  # lazily: a range of --tasks may be huge
    if bad is not None:
        split = (env_kwargs or {}).get("split")
        raise ValueError(f"task indices must lie in 0..{n - 1} for split {split!r}; got {bad}")
    return tuple(int(i) for i in tasks)


@dataclass(frozen=True)
class EpisodeResult:
    """The outcome of one episode."""

    policy: str
    split: str
    task_id: str
    task_type: str
    seed: int
    success: bool
    steps: int
    assistant_tokens: int
    #: Per count of :data:`~ttg_envs.info_fields.EPISODE_COUNTS`: the steps whose ``info`` set its flag.
    counts: Mapping[str, int] = field(default_factory=dict)

    def record(self) -> dict[str, Any]:
        """The episode as reports write it: its fields, then each count under its own name."""
        out = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "counts"}
        return {**out, **self.counts}


def count_totals(results: Sequence[EpisodeResult], env_id: str) -> dict[str, int]:
    """The episode counts a report of ``env_id`` carries (its record's ``counted_info``), summed over ``results``."""
    names = [EPISODE_COUNTS[flag][0] for flag in counted_info(env_id)]
    return {name: sum(r.counts.get(name, 0) for r in results) for name in names}


def count_phrases(totals: Mapping[str, int]) -> str:
    """``totals`` as a run's last line says them (``planner time limit hit 0 times``); '' for none."""
    phrases = dict(EPISODE_COUNTS.values())
    return "; ".join(phrases[name].format(n) for name, n in totals.items())


def run_episode(env: gym.Env, policy: Policy, *, task_index: int, seed: int, policy_name: str) -> EpisodeResult:
    """Play task ``task_index`` with ``policy`` until the episode ends."""
    _, info = env.reset(seed=seed, options={"task_index": task_index})
    task = info["task"]
    terminated = truncated = False
    counts = dict.fromkeys((name for name, _ in EPISODE_COUNTS.values()), 0)
    while not (terminated or truncated):
        _, _, terminated, truncated, info = env.step(policy(env))
        for flag, (name, _) in EPISODE_COUNTS.items():
            counts[name] += bool(info.get(flag))
    return EpisodeResult(
        policy=policy_name,
        split=task["split"],
        task_id=task["id"],
        task_type=task["type"],
        seed=seed,
        success=bool(info["success"]),
        steps=int(info["elapsed_steps"]),
        assistant_tokens=int(info.get("assistant_tokens_total", 0)),
        counts=counts,
    )


@dataclass(frozen=True)
class EpisodeTask:
    """One episode to play (picklable, so a worker process can run it).

    Attributes:
        env_id, env_kwargs: the env, ``gym.make(env_id, **env_kwargs)``, wrapped by ``make_env``.
        task_index, seed: the task, and the env's reset seed (the policy's is :func:`policy_seed`).
        policy: a scripted policy of the env as ``name[:eps]``; with ``condition``, a ``load_actor`` spec.
        condition: ``natural``, ``random-<k>`` or ``guided-<k>`` (None: the scripted policy plays alone).
        kwargs: the policy factory's kwargs, or with ``condition`` the actor's constructor kwargs.
        label: the name results and reports use (default: the condition, else ``policy``).
        meter: a ``load_meter`` spec (or, in one process, a meter) for guided conditions.
        meter_kwargs: ``load_meter`` keyword arguments for a spec (``device``, ``threads``...).
        carry_noops: the meter wrapper carries its estimate across steps that leave the task state
            unchanged (``ProgressMeterWrapper(carry_noops=True)``).
        record, record_label: a trajectory file to append the episode to, and its ``policy`` metadata.
        plan_lengths: record the planner's plan length at every state, and the expert roll-out's
            TTG (``expert_ttg``) where the expert policy says how it responds (envs with ``expert_plan()``).
    """

    env_id: str
    env_kwargs: Mapping[str, Any]
    task_index: int
    seed: int
    policy: str
    condition: str | None = None
    kwargs: Mapping[str, Any] = field(default_factory=dict)
    label: str | None = None
    meter: Any = None
    meter_kwargs: Mapping[str, Any] = field(default_factory=dict)
    carry_noops: bool = False
    record: str | None = None
    record_label: str | None = None
    plan_lengths: bool = False

    @property
    def name(self) -> str:
        """The name results carry."""
        return self.label or self.condition or self.policy

    def stack_key(self) -> tuple:
        """Tasks with equal keys can share one env."""
        return self.env_id, _key(self.env_kwargs), self.plan_lengths

    def agent(self) -> Policy:
        """The seeded policy (or selector) that plays this episode."""
        seed = policy_seed(self.seed, self.task_index)
        if self.condition is None:
            return make_policy(self.env_id, self.policy, seed=seed, **self.kwargs)
        return make_agent(self.condition, seed=seed, actor=self.policy, actor_kwargs=dict(self.kwargs))


def _meter_key(meter: Any) -> Any:
    return os.fspath(meter) if isinstance(meter, (str, os.PathLike)) else id(meter)


def play(tasks: Sequence[EpisodeTask], progress: Callable[[int], None] | None = None) -> list[EpisodeResult]:
    """Play ``tasks`` (one env stack, see :meth:`EpisodeTask.stack_key`) in one env, in order."""
    first = tasks[0]
    base: gym.Env = make_env(first.env_id, **first.env_kwargs)
    if first.plan_lengths and hasattr(base.unwrapped, "expert_plan"):
        # Exact step-quality labels and the expert roll-out's TTG, recorded with the trajectory.
        expert = make_policy(first.env_id, "expert")
        base = PlanLength(base, respond=getattr(expert, "respond", None))
    stacks: dict[tuple, gym.Env] = {}
    results = []
    try:
        for task in tasks:
            guided = task.condition is not None and needs_meter(task.condition)
            carry = guided and task.carry_noops
            key = (guided and _meter_key(task.meter), _key(task.meter_kwargs), carry, task.record, task.record_label)
            if key not in stacks:
                stacks[key] = wrap_env(
                    base,
                    meter=task.meter if guided else None,
                    meter_kwargs=dict(task.meter_kwargs),
                    carry_noops=carry,
                    recorder=task.record or None,
                    record_metadata={"policy": task.record_label or task.name},
                )
            results.append(run_episode(stacks[key], task.agent(), task_index=task.task_index, seed=task.seed, policy_name=task.name))
            if progress:
                progress(1)
    finally:
        base.close()
    return results


def run_tasks(
    tasks: Sequence[EpisodeTask], *, workers: int = 1, desc: str = "episodes", job: Callable[[EpisodeTask], Any] | None = None
) -> list[EpisodeResult]:
    """Play every task, in this process or over ``workers`` spawned processes, with one progress bar.

    Tasks that share an env play in one env, in order. By default each env stack is made once
    in one process, and with workers each task index is its own job (all its episodes in one
    env), so a long task does not hold up others. With ``job``, tasks with equal ``job(task)``
    share an env and, with workers, each such job is cut into ``workers`` runs of consecutive
    tasks (``ttg rollout``: one env per split and policy). An env keeps state between episodes
    (the ALFWorld expert reuses plans of states it has seen), so this grouping is part of what
    makes a run reproducible. Trajectory files are rewritten in task order at the end (workers
    append in completion order). Results come in the order of ``tasks``.
    """
    for task in tasks:
        if task.condition is not None and needs_meter(task.condition) and task.meter is None:
            raise ValueError(f"condition {task.condition!r} needs a meter")
    batches: dict[tuple, list[int]] = {}
    for i, task in enumerate(tasks):
        if job is not None:
            key = (*task.stack_key(), job(task))
        else:
            key = task.stack_key() if workers <= 1 else (*task.stack_key(), task.task_index)
        batches.setdefault(key, []).append(i)
    if job is not None and workers > 1:
        cut: dict[tuple, list[int]] = {}
        for key, positions in batches.items():
            size = max(1, -(-len(positions) // workers))
            for start in range(0, len(positions), size):
                cut[(*key, start)] = positions[start : start + size]
        batches = cut
    results: list[EpisodeResult | None] = [None] * len(tasks)
    with progress_bar(total=len(tasks), desc=desc, unit="ep") as bar:
        if workers <= 1:
            for positions in batches.values():
                for i, result in zip(positions, play([tasks[i] for i in positions], bar.update)):
                    results[i] = result
        else:
            with ProcessPoolExecutor(workers, mp_context=get_context("spawn")) as pool:
                futures = {pool.submit(play, [tasks[i] for i in positions]): positions for positions in batches.values()}
                for future in as_completed(futures):
                    part = future.result()
                    bar.update(len(part))
                    for i, result in zip(futures[future], part):
                        results[i] = result
    for path in dict.fromkeys(t.record for t in tasks if t.record):
        if os.path.exists(path):
            sort_by_task(path)
    return results  # type: ignore[return-value]
