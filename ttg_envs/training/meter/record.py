"""Recording trajectories for meter training and evaluation: scripted policies through the episode runner."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

__all__ = ["DEFAULT_POLICIES", "EVAL_POLICIES", "collect_trajectories"]

DEFAULT_POLICIES = ("expert", "noisy_expert:0.25", "noisy_expert:0.5", "noisy_expert:1")
#: Evaluation policies: the planner's labels after long random walks cost minutes per state.
EVAL_POLICIES = ("expert", "noisy_expert:0.25", "noisy_expert:0.5")


def collect_trajectories(
    env_id: str,
    env_kwargs: dict[str, Any],
    split: str,
    policies: Sequence[str],
    out: Path,
    *,
    limit: int | None = None,
    tasks: Sequence[int] | None = None,
    seed: int = 0,
    workers: int = 1,
    plan_lengths: bool = False,
) -> list[Path]:
    """Record one episode per task and policy on ``split``; returns the trajectory files (one per policy).

    The tasks are ``tasks`` (indices) when given, else ``limit`` tasks spread over the split.
    Episodes go through the episode runner (:func:`ttg_envs.runner.run_tasks`): every policy plays
    a task in the same env, so each game loads once, and tasks spread over ``workers`` processes.
    ``plan_lengths`` records the planner's plan length at every state (ALFWorld; step-quality
    labels for evaluation; it costs a planner call per step, slow after random actions).
    """
    from ...registry import parse_policy
    from ...runner import EpisodeTask, count_phrases, count_totals, run_tasks, split_tasks

    env_kwargs = {"split": split, **env_kwargs}
    indices = split_tasks(env_id, env_kwargs, tasks=tasks, limit=limit)
    out.mkdir(parents=True, exist_ok=True)
    labels = [parse_policy(spec).file_label for spec in policies]
    paths = [out / f"{split}-{label}.jsonl" for label in labels]
    for path in paths:
        path.unlink(missing_ok=True)  # the recorder appends
    episodes = [
        EpisodeTask(env_id, env_kwargs, index, seed, spec, label=label, record=str(path), plan_lengths=plan_lengths)
        for index in indices
        for spec, label, path in zip(policies, labels, paths)
    ]
    results = run_tasks(episodes, workers=workers, desc=f"record {split}")
    totals = count_totals(results, env_id)
    if totals:
        print(f"record {split}: {count_phrases(totals)}")
    return paths
