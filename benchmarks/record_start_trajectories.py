"""Record the committed tiny start policy's own ALFWorld episodes as meter-training trajectories.

The shipped ALFWorld meter learned from scripted policies at a 50-turn limit; the trainer asks it about
the tiny start's bare-command transcripts at 15 turns (``benchmarks/diagnose_credit.py`` measures what
that costs). This records the start as the trainer plays it (``run_episodes`` with the
``AdmissibleGenerator``, the paper's E.5 window, lenient bare commands, ``--max-turns``), each state
labelled by :class:`~ttg_envs.wrappers.plan_length.PlanLength` with the expert's roll-out tokens
(``expert_ttg``: None when the expert's plan no longer fits in the turns left), into the trajectory
format ``ttg train-meter --trajectories`` reads. ``metadata["turn_limit"]`` holds the limit, so a
budget-aware meter reads each trajectory's own turns left.

Default tasks: the even train-split indices (the start's SFT tasks; the RL pool is the odd ones).

    PYTHONPATH=. python benchmarks/record_start_trajectories.py --out runs/start-trajectories [--episodes 8] [--seed 0]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import train_compare  # noqa: E402  (the comparison's own envs, window and start)

START = Path(__file__).resolve().parent / "results" / "train_compare" / "start"


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--start", default=str(START))
    p.add_argument("--out", required=True, help="folder for train-start.jsonl")
    p.add_argument("--tasks", default="even", help="'even' (default), 'odd', or comma-separated train-split indices")
    p.add_argument("--episodes", type=int, default=8, help="sampled episodes per task")
    p.add_argument("--max-turns", type=int, default=15)
    p.add_argument("--batch", type=int, default=64, help="episodes played together")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=1)
    return p.parse_args(argv)


def task_indices(spec: str, num_tasks: int) -> list[int]:
    """``even`` / ``odd`` train-split indices, or an explicit comma-separated list."""
    if spec in ("even", "odd"):
        return list(range(0 if spec == "even" else 1, num_tasks, 2))
    return [int(x) for x in spec.split(",")]


def main(argv=None) -> int:
    """Play the start on the tasks and record every episode with its expert targets."""
    import torch

    from ttg_envs.bars import progress_bar
    from ttg_envs.registry import make_policy
    from ttg_envs.training.actor.admissible import AdmissibleGenerator
    from ttg_envs.training.actor.rollout import run_episodes
    from ttg_envs.wrappers import make_env
    from ttg_envs.wrappers.plan_length import PlanLength
    from ttg_envs.wrappers.stack import wrap_env

    args = parse_args(argv)
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    cmp = train_compare.parse_args(["--max-turns", str(args.max_turns)])
    model, tokenizer = train_compare.load_start(Path(args.start))
    generator = AdmissibleGenerator(model, tokenizer)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    path = out / "train-start.jsonl"
    path.unlink(missing_ok=True)  # the recorder appends
    respond = getattr(make_policy(train_compare.ENV_ID, "expert"), "respond", None)

    def stack():
        base = PlanLength(
            make_env(train_compare.ENV_ID, max_steps=args.max_turns, **train_compare.env_kwargs(cmp, "train")), respond=respond
        )
        return wrap_env(base, recorder=str(path), record_metadata={"policy": "start", "turn_limit": args.max_turns})

    envs = [stack() for _ in range(args.batch)]
    tasks = task_indices(args.tasks, envs[0].unwrapped.num_tasks)
    plays = [(i, task, args.seed * 1_000_003 + i) for i, task in enumerate(t for t in tasks for _ in range(args.episodes))]
    begin, won, played = time.perf_counter(), 0, 0
    for start in progress_bar(range(0, len(plays), args.batch), desc="record start"):
        chunk = plays[start : start + args.batch]
        episodes = run_episodes(
            envs[: len(chunk)], generator, tokenizer, chunk, train_compare.max_tokens(cmp), window=train_compare.window(cmp)
        )
        won += sum(e.success for e in episodes)
        played += len(episodes)
    for env in envs:
        env.close()
    print(f"{played} episodes of {len(tasks)} tasks, success {won / played:.1%}, {time.perf_counter() - begin:.0f} s -> {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
