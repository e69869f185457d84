"""Evaluate an actor under natural, random-of-k and guided-of-k selection over splits and seeds.

Conditions are named ``natural``, ``random-<k>`` and ``guided-<k>``. Episodes are
:class:`~ttg_envs.eval.rollout.EpisodeResult` rows played by the rollout runner's ``run_episode``;
their ``policy`` field holds the condition.
"""

from __future__ import annotations

import os
import re
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass, replace
from multiprocessing import get_context
from typing import Any, Callable, Sequence

from ..progress import progress_bar

from ..agents import GuidedSelector, NaturalSelector, RandomSelector, load_actor
from .rollout import EpisodeResult, run_episode, spread_indices

DEFAULT_CONDITIONS = ("natural", "random-4", "guided-4")
_CONDITION_RE = re.compile(r"^(natural|random-(\d+)|guided-(\d+))$")
# Model actors are loaded once per process and re-seeded per episode; scripted ones are rebuilt.
_LOADED: dict[tuple, Any] = {}


def parse_condition(condition: str) -> tuple[str, int]:
    """``natural`` -> ("natural", 1); ``random-4`` -> ("random", 4); ``guided-4`` -> ("guided", 4)."""
    match = _CONDITION_RE.match(condition)
    if not match or int(match.group(2) or match.group(3) or 1) < 1:
        raise ValueError(f"condition must be natural, random-<k> or guided-<k>; got {condition!r}")
    return condition.split("-")[0], int(match.group(2) or match.group(3) or 1)


def make_agent(condition: str, *, seed: int, actor: str, actor_kwargs: dict[str, Any] | None = None) -> NaturalSelector:
    """The selector of ``condition`` over the actor ``actor`` (a ``load_actor`` spec), seeded with ``seed``.

    Module-level and picklable, so it also serves as a ``make_policy`` for the rollout runner.
    """
    kind, k = parse_condition(condition)
    agent = _actor(actor, seed, actor_kwargs or {})
    if kind == "natural":
        return NaturalSelector(agent)
    if kind == "random":
        return RandomSelector(agent, k, seed=seed)
    return GuidedSelector(agent, k)


def _actor(spec: str, seed: int, kwargs: dict[str, Any]) -> Any:
    if spec.startswith("scripted:"):
        return load_actor(spec, seed=seed, **kwargs)
    key = (spec, tuple(sorted(kwargs.items())))
    if key not in _LOADED:
        _LOADED[key] = load_actor(spec, **kwargs)
    actor = _LOADED[key]
    actor.sampling = replace(actor.sampling, seed=seed)
    return actor


@dataclass(frozen=True)
class EvalJob:
    """Every condition and seed on some tasks of one split (picklable, so a worker process can run it).

    Work goes task by task: each game loads once and all (condition, seed) episodes play it,
    since loading an ALFWorld game costs far more than a reset to the same task.
    """

    env_id: str
    env_kwargs: dict[str, Any]
    conditions: tuple[str, ...]
    seeds: tuple[int, ...]
    actor: str
    actor_kwargs: dict[str, Any]
    task_indices: tuple[int, ...]
    meter: Any = None


def run_eval_job(job: EvalJob, progress: Callable[[int], None] | None = None) -> list[EpisodeResult]:
    """Play ``job``; guided conditions see the env through a ``ProgressMeterWrapper``, the others without it.

    Policy seeds follow ``ttg rollout``: ``seed * 1_000_003 + task index``, the env reset seed is ``seed``.
    """
    import gymnasium as gym

    import ttg_envs  # noqa: F401  (registers the ids)

    from ..meters import load_meter
    from ..wrappers import ProgressMeterWrapper, TokenCounter

    plain = TokenCounter(gym.make(job.env_id, **job.env_kwargs))
    needs_meter = any(parse_condition(c)[0] == "guided" for c in job.conditions)
    metered = ProgressMeterWrapper(plain, _meter(job.meter, load_meter)) if needs_meter else None
    results = []
    for index in job.task_indices:
        for condition in job.conditions:
            env = metered if parse_condition(condition)[0] == "guided" else plain
            for seed in job.seeds:
                agent = make_agent(condition, seed=seed * 1_000_003 + index, actor=job.actor, actor_kwargs=job.actor_kwargs)
                results.append(run_episode(env, agent, task_index=index, seed=seed, policy_name=condition))
                if progress:
                    progress(1)
    plain.close()
    return results


def _meter(spec: Any, load: Callable[[Any], Any]) -> Any:
    """A meter loaded once per process (jobs are per task, so a worker sees the same spec many times).

    A saved folder is keyed by its ``meter.json`` modification time too, so a meter retrained at
    the same path is loaded again.
    """
    if not isinstance(spec, str):
        return spec
    config = os.path.join(spec, "meter.json")
    key = ("meter", spec, os.path.getmtime(config) if os.path.exists(config) else None)
    if key not in _LOADED:
        _LOADED[key] = load(spec)
    return _LOADED[key]


def evaluation_jobs(env_id: str, splits: Sequence[str], conditions: Sequence[str], actor: str, *, seeds: Sequence[int],
                    meter: Any = None, env_kwargs: dict[str, Any] | None = None,
                    actor_kwargs: dict[str, Any] | None = None, tasks: dict[str, Sequence[int]] | None = None,
                    limit: int | None = None, chunks: int | None = 1) -> list[EvalJob]:
    """Jobs over each split's tasks (``tasks[split]``, else ``limit`` spread over the split), cut into ``chunks`` per split
    (at most one job per task; None: one job per task).

    ``meter`` is a ``load_meter`` spec (or, in one process, a meter object); guided conditions need it.
    """
    import gymnasium as gym

    import ttg_envs  # noqa: F401  (registers the ids)

    for condition in conditions:
        if parse_condition(condition)[0] == "guided" and meter is None:
            raise ValueError(f"condition {condition!r} needs a meter")
    if isinstance(meter, (str, os.PathLike)):
        from ..meters.loading import check_meter_spec

        check_meter_spec(meter)  # a mistyped path fails here, before any worker starts
    jobs = []
    for split in splits:
        kwargs = {"split": split, **(env_kwargs or {})}
        if tasks and split in tasks:
            indices = tuple(tasks[split])
        else:
            probe = gym.make(env_id, **kwargs)
            n = probe.unwrapped.num_tasks
            probe.close()
            indices = spread_indices(n, limit)
        parts = max(1, len(indices) if chunks is None else min(chunks, len(indices)))
        for part in range(parts):
            # Strided chunks balance long and short tasks across workers.
            chunk = indices[part::parts]
            if chunk:
                jobs.append(EvalJob(env_id, kwargs, tuple(conditions), tuple(seeds), actor, dict(actor_kwargs or {}),
                                    chunk, meter))
    return jobs


def evaluate(env_id: str, splits: Sequence[str], conditions: Sequence[str], actor: str, *, seeds: Sequence[int],
             meter: Any = None, workers: int = 1, **job_kwargs: Any) -> list[EpisodeResult]:
    """Run :func:`evaluation_jobs` over ``workers`` processes with one progress bar.

    With several workers every task is its own job: the bar moves task by task and a long task
    does not hold up a whole chunk. Results are sorted by split, condition, seed and task,
    whatever the number of workers.
    """
    jobs = evaluation_jobs(env_id, splits, conditions, actor, seeds=seeds, meter=meter,
                           chunks=1 if workers <= 1 else None, **job_kwargs)
    total = sum(len(j.task_indices) * len(j.conditions) * len(j.seeds) for j in jobs)
    with progress_bar(total=total, desc="evaluate", unit="ep") as bar:
        if workers <= 1:
            results = [r for job in jobs for r in run_eval_job(job, bar.update)]
        else:
            with ProcessPoolExecutor(workers, mp_context=get_context("spawn")) as pool:
                futures = [pool.submit(run_eval_job, job) for job in jobs]
                results = []
                for future in as_completed(futures):
                    part = future.result()
                    bar.update(len(part))
                    results.extend(part)
    order = {c: i for i, c in enumerate(conditions)}
    split_order = {s: i for i, s in enumerate(splits)}
    return sorted(results, key=lambda r: (split_order.get(r.split, len(split_order)), order[r.policy], r.seed, r.task_id))
