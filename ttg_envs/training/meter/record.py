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
    episodes_per_task: int = 1,
) -> list[Path]:
    """Record one episode per task and policy on ``split``; returns the trajectory files (one per policy,
    and one per policy and extra seed).

    The tasks are ``tasks`` (indices) when given, else ``limit`` tasks spread over the split.
    ``episodes_per_task`` N > 1 has every policy that draws (a noisy or perturbed one with eps above
    0, :func:`~ttg_envs.registry.policy_draws`) play each task N times, with seeds ``seed`` to
    ``seed + N - 1`` (env reset and policy), the extra seeds into ``{split}-{label}-seed{k}.jsonl``;
    a policy that draws nothing (the expert, gold) would repeat its episode exactly, so it plays once.
    Episodes go through the episode runner (:func:`ttg_envs.runner.run_tasks`): every policy plays
    a task in the same env, so each game loads once, and tasks spread over ``workers`` processes.
    ``plan_lengths`` records the planner's plan length at every state (ALFWorld; step-quality
    labels for evaluation; it costs a planner call per step, slow after random actions).
    """
    from ...registry import parse_policy, policy_draws
    from ...runner import EpisodeTask, count_phrases, count_totals, run_tasks, split_tasks

    if episodes_per_task < 1:
        raise ValueError(f"episodes_per_task must be at least 1, got {episodes_per_task}")
    env_kwargs = {"split": split, **env_kwargs}
    indices = split_tasks(env_id, env_kwargs, tasks=tasks, limit=limit)
    out.mkdir(parents=True, exist_ok=True)
    # (policy, its seed, file label, file) for every file; seed's files first, as with one episode per task.
    labels = {spec: parse_policy(spec).file_label for spec in policies}
    drawing = [spec for spec in policies if episodes_per_task > 1 and policy_draws(env_id, spec)]
    plays = [(spec, seed, labels[spec], out / f"{split}-{labels[spec]}.jsonl") for spec in policies]
    plays += [
        (spec, seed + k, labels[spec], out / f"{split}-{labels[spec]}-seed{seed + k}.jsonl")
        for k in range(1, episodes_per_task)
        for spec in drawing
    ]
    paths = [path for *_, path in plays]
    for path in paths:
        path.unlink(missing_ok=True)  # the recorder appends
    episodes = [
        EpisodeTask(env_id, env_kwargs, index, episode_seed, spec, label=label, record=str(path), plan_lengths=plan_lengths)
        for index in indices
        for spec, episode_seed, label, path in plays
    ]
    results = run_tasks(episodes, workers=workers, desc=f"record {split}")
    totals = count_totals(results, env_id)
    if totals:
        print(f"record {split}: {count_phrases(totals)}")
    return paths
