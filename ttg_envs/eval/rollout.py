"""Roll policies out over a split and summarise success rate and steps, overall and per task type."""

from __future__ import annotations

import json
import os
from collections import defaultdict
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, dataclass
from multiprocessing import get_context
from typing import Any, Callable, Sequence

import gymnasium as gym
import numpy as np
from ..progress import progress_bar

from ..wrappers import TokenCounter, TrajectoryRecorder
from ..wrappers.recorder import sort_by_task

#: A policy maps an env (any wrapper stack) to the assistant text of its next step.
Policy = Callable[[gym.Env], str]


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
    #: Steps taken after the planner ran out of its time limit (ALFWorld's ``info["planner_timeout"]``).
    planner_timeouts: int = 0


def run_episode(env: gym.Env, policy: Policy, *, task_index: int, seed: int, policy_name: str) -> EpisodeResult:
    """Play task ``task_index`` with ``policy`` until the episode ends."""
    _, info = env.reset(seed=seed, options={"task_index": task_index})
    task = info["task"]
    terminated = truncated = False
    timeouts = 0
    while not (terminated or truncated):
        _, _, terminated, truncated, info = env.step(policy(env))
        timeouts += bool(info.get("planner_timeout"))
    return EpisodeResult(
        policy=policy_name,
        split=task["split"],
        task_id=task["id"],
        task_type=task["type"],
        seed=seed,
        success=bool(info["success"]),
        steps=int(info["elapsed_steps"]),
        assistant_tokens=int(info.get("assistant_tokens_total", 0)),
        planner_timeouts=timeouts,
    )


@dataclass(frozen=True)
class RolloutJob:
    """Episodes of one policy on one split (picklable, so a worker process can run it)."""

    env_id: str
    env_kwargs: dict[str, Any]
    policy: str
    policy_kwargs: dict[str, Any]
    task_indices: tuple[int, ...]
    seed: int
    record_path: str | None = None
    #: The name reports use (default: ``policy``), e.g. ``noisy_expert:0.5``.
    label: str | None = None


def run_job(job: RolloutJob, make_policy: Callable[..., Policy], progress: Callable[[int], None] | None = None) -> list[EpisodeResult]:
    """Run every episode of ``job`` in one env; ``make_policy(name, seed=..., **kw)`` builds the policy."""
    env = TokenCounter(gym.make(job.env_id, **job.env_kwargs))
    if job.record_path:
        env = TrajectoryRecorder(env, job.record_path, metadata={"policy": job.label or job.policy})
    results = []
    for index in job.task_indices:
        # One policy RNG per (job seed, task) so results do not depend on how tasks are chunked.
        policy = make_policy(job.policy, seed=job.seed * 1_000_003 + index, **job.policy_kwargs)
        results.append(run_episode(env, policy, task_index=index, seed=job.seed, policy_name=job.label or job.policy))
        if progress:
            progress(1)
    env.close()
    return results


def run_jobs(jobs: Sequence[RolloutJob], make_policy: Callable[..., Policy], *, workers: int = 1,
             desc: str = "rollouts") -> list[EpisodeResult]:
    """Run jobs (split into chunks over ``workers`` processes) with one progress bar; results in job order."""
    total = sum(len(j.task_indices) for j in jobs)
    with progress_bar(total=total, desc=desc, unit="ep") as bar:
        if workers <= 1:
            return [r for job in jobs for r in run_job(job, make_policy, bar.update)]
        chunks = [_chunk(job, workers) for job in jobs]
        with ProcessPoolExecutor(workers, mp_context=get_context("spawn")) as pool:
            futures = [[pool.submit(run_job, part, make_policy) for part in parts] for parts in chunks]
            results = []
            for job_futures in futures:
                for fut in job_futures:
                    part = fut.result()
                    bar.update(len(part))
                    results.extend(part)
        for path in dict.fromkeys(j.record_path for j in jobs if j.record_path and os.path.exists(j.record_path)):
            sort_by_task(path)  # workers appended in completion order
        return results


def _chunk(job: RolloutJob, n: int) -> list[RolloutJob]:
    size = max(1, -(-len(job.task_indices) // n))
    # Workers append to the same trajectory file: each episode is one O_APPEND write.
    return [
        RolloutJob(job.env_id, job.env_kwargs, job.policy, job.policy_kwargs,
                   job.task_indices[start:start + size], job.seed, job.record_path)
        for start in range(0, len(job.task_indices), size)
    ]


def summarize(results: Sequence[EpisodeResult]) -> list[dict[str, Any]]:
    """One row per (policy, split) and per (policy, split, task type): episodes, success rate, mean steps."""
    groups: dict[tuple[str, str, str], list[EpisodeResult]] = defaultdict(list)
    for r in results:
        groups[(r.policy, r.split, "all")].append(r)
        groups[(r.policy, r.split, r.task_type)].append(r)
    rows = []
    for (policy, split, task_type), rs in groups.items():
        rows.append({
            "policy": policy,
            "split": split,
            "task_type": task_type,
            "episodes": len(rs),
            "success_rate": sum(r.success for r in rs) / len(rs),
            "avg_steps": sum(r.steps for r in rs) / len(rs),
            "avg_assistant_tokens": sum(r.assistant_tokens for r in rs) / len(rs),
        })
    return sorted(rows, key=lambda row: (row["split"], row["policy"], row["task_type"] != "all", row["task_type"]))


def markdown_table(rows: Sequence[dict[str, Any]], *, per_type: bool = False) -> str:
    """A Markdown table of ``summarize`` rows (overall rows only unless ``per_type``)."""
    header = "| split | policy | task type | episodes | success rate | avg steps | avg tokens |"
    lines = [header, "|---|---|---|---:|---:|---:|---:|"]
    for row in rows:
        if row["task_type"] != "all" and not per_type:
            continue
        lines.append(
            f"| {row['split']} | {row['policy']} | {row['task_type']} | {row['episodes']} | "
            f"{100 * row['success_rate']:.1f}% | {row['avg_steps']:.2f} | {row['avg_assistant_tokens']:.0f} |"
        )
    return "\n".join(lines)


def write_report(path: str | os.PathLike, results: Sequence[EpisodeResult], rows: Sequence[dict[str, Any]],
                 config: dict[str, Any]) -> None:
    """Write results, summary rows and the run's configuration as one JSON file."""
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        json.dump({"config": config, "summary": list(rows), "episodes": [asdict(r) for r in results]}, f, indent=1)
