"""Roll scripted policies out over an env's splits and summarise success rate and steps, overall and per task type."""

from __future__ import annotations

import json
import os
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .._io import markdown_table
from ..registry import parse_policy, policy_factory
from ..runner import EpisodeResult, EpisodeTask, run_tasks, split_tasks

__all__ = ["rollout", "rollout_table", "rollout_tasks", "summarize", "write_report"]


def rollout_tasks(
    env_id: str,
    splits: Sequence[str],
    policies: Sequence[str],
    *,
    seed: int = 0,
    limit: int | None = None,
    env_kwargs: dict[str, Any] | None = None,
    eps: float = 0.3,
    record_dir: str | os.PathLike | None = None,
) -> list[EpisodeTask]:
    """One episode per policy (``name[:eps]``; a bare ``noisy_expert`` takes ``eps``) and task of each split
    (``limit`` tasks spread over it, else all); ``record_dir`` gets ``trajectories-<split>-<policy>.jsonl`` files."""
    policy_factory(env_id)  # an unknown env id fails here, naming the known ones
    tasks = []
    for split in splits:
        kwargs = {"split": split, **(env_kwargs or {})}
        indices = split_tasks(env_id, kwargs, limit=limit)
        for spec in policies:
            policy = parse_policy(spec)
            extra = {"eps": eps} if policy.name == "noisy_expert" and not policy.kwargs else {}
            record = str(Path(record_dir) / f"trajectories-{split}-{policy.file_label}.jsonl") if record_dir else None
            tasks += [EpisodeTask(env_id, kwargs, index, seed, spec, kwargs=extra, record=record) for index in indices]
    return tasks


def rollout(env_id: str, splits: Sequence[str], policies: Sequence[str], *, workers: int = 1, **task_kwargs: Any) -> list[EpisodeResult]:
    """Play :func:`rollout_tasks` (results in split, policy, task order), one env per split and policy."""
    return run_tasks(rollout_tasks(env_id, splits, policies, **task_kwargs), workers=workers, desc="rollouts", job=_policy_of)


def _policy_of(task: EpisodeTask) -> str:
    """One env per split and policy, as ``ttg rollout`` has always played them."""
    return task.policy


def summarize(results: Sequence[EpisodeResult]) -> list[dict[str, Any]]:
    """One row per (policy, split) and per (policy, split, task type): episodes, success rate, mean steps."""
    groups: dict[tuple[str, str, str], list[EpisodeResult]] = defaultdict(list)
    for r in results:
        groups[(r.policy, r.split, "all")].append(r)
        groups[(r.policy, r.split, r.task_type)].append(r)
    rows = []
    for (policy, split, task_type), rs in groups.items():
        rows.append(
            {
                "policy": policy,
                "split": split,
                "task_type": task_type,
                "episodes": len(rs),
                "success_rate": sum(r.success for r in rs) / len(rs),
                "avg_steps": sum(r.steps for r in rs) / len(rs),
                "avg_assistant_tokens": sum(r.assistant_tokens for r in rs) / len(rs),
            }
        )
    return sorted(rows, key=lambda row: (row["split"], row["policy"], row["task_type"] != "all", row["task_type"]))


def rollout_table(rows: Sequence[dict[str, Any]], *, per_type: bool = False) -> str:
    """A Markdown table of ``summarize`` rows (overall rows only unless ``per_type``)."""
    return markdown_table(
        ("split", "policy", "task type", "episodes", "success rate", "avg steps", "avg tokens"),
        (
            (
                row["split"],
                row["policy"],
                row["task_type"],
                row["episodes"],
                f"{100 * row['success_rate']:.1f}%",
                f"{row['avg_steps']:.2f}",
                f"{row['avg_assistant_tokens']:.0f}",
            )
            for row in rows
            if row["task_type"] == "all" or per_type
        ),
        right=4,
    )


def write_report(path: str | os.PathLike, results: Sequence[EpisodeResult], rows: Sequence[dict[str, Any]], config: dict[str, Any]) -> None:
    """Write results, summary rows and the run's configuration as one JSON file."""
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        json.dump({"config": config, "summary": list(rows), "episodes": [r.record() for r in results]}, f, indent=1)
