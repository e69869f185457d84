"""Task lists for verl: one parquet row per task reference, read by verl's RLHFDataset and the ``ttg_agent`` loop."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ...._optional import require

__all__ = ["task_rows", "write_task_parquet"]


def task_rows(env_id: str, env_kwargs: dict[str, Any] | None = None, limit: int | None = None, seed: int = 0) -> list[dict[str, Any]]:
    """One row per task of ``env_id``: a reference to the task in ``extra_info["ttg"]``, no game loaded.

    The ``ttg_agent`` loop resets the env on ``task_index`` itself and builds the real first
    transcript there, so a row only names its task: ``prompt`` is one user message with the task's
    goal (or its id), which verl's dataset needs as a chat. ``env_kwargs`` travel as a JSON string
    (parquet cannot store an empty struct).
    """
    import gymnasium as gym

    import ttg_envs  # noqa: F401  (registers the ids)

    env = gym.make(env_id, **(env_kwargs or {}))
    tasks = env.unwrapped
    n = tasks.num_tasks if limit is None else min(limit, tasks.num_tasks)
    rows = []
    for index in range(n):
        info = tasks._task_info(index)  # the task list's own record: no engine start
        rows.append(
            {
                "data_source": env_id,
                "agent_name": "ttg_agent",
                "prompt": [{"role": "user", "content": info.get("goal") or f"{env_id} task {info['id']}"}],
                "extra_info": {
                    "ttg": {
                        "env_id": env_id,
                        "env_kwargs": json.dumps(env_kwargs or {}),
                        "task_index": index,
                        "task_id": str(info["id"]),
                        "task_type": str(info.get("type", "")),
                        "seed": seed + index,
                    }
                },
            }
        )
    env.close()
    return rows


def write_task_parquet(
    path: str | Path, env_id: str, env_kwargs: dict[str, Any] | None = None, limit: int | None = None, seed: int = 0
) -> Path:
    """Write :func:`task_rows` to ``path`` (parquet); returns the path."""
    pandas = require("pandas", "verl")
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    pandas.DataFrame(task_rows(env_id, env_kwargs, limit, seed)).to_parquet(path)
    return path


def main(argv: list[str] | None = None) -> int:
    """``python -m ttg_envs.training.actor.verl_plugin.dataset --env ttg/ALFWorld-v0 --split train --out f.parquet``."""
    import argparse

    from ....cli_args import add_env, add_limit, add_seed

    p = argparse.ArgumentParser(prog="python -m ttg_envs.training.actor.verl_plugin.dataset", description=main.__doc__)
    add_env(p)
    # One split per file (the --split of the other commands' --splits; --splits X parses too).
    p.add_argument("--split", default=None, help="env split (passed as split=...)")
    p.add_argument("--splits", dest="split", help=argparse.SUPPRESS)
    add_limit(p, help="the first N tasks (default: all)")
    add_seed(p)
    p.add_argument("--out", required=True, help="parquet file to write")
    args = p.parse_args(argv)
    kwargs = json.loads(args.env_kwargs) | ({"split": args.split} if args.split else {})
    path = write_task_parquet(args.out, args.env, kwargs, args.limit, args.seed)
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
