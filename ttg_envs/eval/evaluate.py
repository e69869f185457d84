"""Evaluate an actor under natural, random-of-k and guided-of-k selection over splits and seeds.

Conditions are named ``natural``, ``random-<k>`` and ``guided-<k>``
(:mod:`ttg_envs.agents.conditions`). Episodes are :class:`~ttg_envs.runner.EpisodeResult` rows
played by the episode runner; their ``policy`` field holds the condition. Guided conditions see
the env through a ``ProgressMeterWrapper``, the others without it.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

from ..agents.conditions import (
    DEFAULT_CONDITIONS,
    make_agent,
    needs_meter,
    parse_condition,
)
from ..runner import EpisodeResult, EpisodeTask, run_tasks, split_tasks

__all__ = ["DEFAULT_CONDITIONS", "evaluate", "evaluation_tasks", "make_agent", "parse_condition"]


def evaluation_tasks(
    env_id: str,
    splits: Sequence[str],
    conditions: Sequence[str],
    actor: str,
    *,
    seeds: Sequence[int],
    meter: Any = None,
    meter_kwargs: dict[str, Any] | None = None,
    env_kwargs: dict[str, Any] | None = None,
    actor_kwargs: dict[str, Any] | None = None,
    tasks: dict[str, Sequence[int]] | None = None,
    limit: int | None = None,
    carry_noops: bool = False,
) -> list[EpisodeTask]:
    """Every condition and seed on each split's tasks (``tasks[split]``, else ``limit`` spread over the split).

    ``meter`` is a ``load_meter`` spec (or, in one process, a meter object); guided conditions need it;
    ``meter_kwargs`` go to ``load_meter`` (``device``, ``threads``...); ``carry_noops`` goes to the
    guided conditions' ``ProgressMeterWrapper``.
    """
    for condition in conditions:
        if needs_meter(condition) and meter is None:
            raise ValueError(f"condition {condition!r} needs a meter")
    if isinstance(meter, (str, os.PathLike)):
        from ..meters.loading import check_meter_spec

        check_meter_spec(meter)  # a mistyped path fails here, before any worker starts
    out = []
    for split in splits:
        kwargs = {"split": split, **(env_kwargs or {})}
        indices = split_tasks(env_id, kwargs, tasks=(tasks or {}).get(split), limit=limit)
        out += [
            EpisodeTask(
                env_id,
                kwargs,
                index,
                seed,
                actor,
                condition,
                dict(actor_kwargs or {}),
                meter=meter,
                meter_kwargs=dict(meter_kwargs or {}),
                carry_noops=carry_noops,
            )
            for index in indices
            for condition in conditions
            for seed in seeds
        ]
    return out


def evaluate(
    env_id: str,
    splits: Sequence[str],
    conditions: Sequence[str],
    actor: str,
    *,
    seeds: Sequence[int],
    meter: Any = None,
    workers: int = 1,
    **task_kwargs: Any,
) -> list[EpisodeResult]:
    """Play :func:`evaluation_tasks` over ``workers`` processes with one progress bar.

    Results are sorted by split, condition, seed and task, whatever the number of workers.
    """
    tasks = evaluation_tasks(env_id, splits, conditions, actor, seeds=seeds, meter=meter, **task_kwargs)
    results = run_tasks(tasks, workers=workers, desc="evaluate")
    order = {c: i for i, c in enumerate(conditions)}
    split_order = {s: i for i, s in enumerate(splits)}
    return sorted(results, key=lambda r: (split_order.get(r.split, len(split_order)), order[r.policy], r.seed, r.task_id))
