"""Whole ALFWorld workloads, this checkout against an earlier revision, interleaved in one run.

The engine benchmark (``bench_alfworld.py``) times loads and steps; this one times what users
wait for, with each version's own code end to end:

- ``record``: the recording phase of ``ttg demo`` (``collect_trajectories`` with the demo's meter
  policies: expert and noisy experts at eps 0.25, 0.5 and 1) on train tasks spread over the split;
- ``expert``: the expert policy on every ``--every``-th bundled validation game (what the old
  expert-on-every-game test did: a game load and an expert episode each);
- ``noisy``: the demo's actor, the noisy expert at eps 0.75, on validation tasks (the planner's
  worst case: most steps leave the expert's plan).
- ``walk``: a trainer step's env side (``benchmarks/bench_trainer.py``'s env bucket): per train
  task 8 rollouts of 30 random admissible commands through ``TokenCounter(ALFWorldEnv)``
  (lenient actions, admissible list in the observation), the same commands for both versions;
  reports milliseconds per ``env.step`` and the share of steps that reached a state the engine
  had not met (those run the engine and derive text; the others are cache hits).

Each workload is cut into chunks of tasks; every chunk runs once per version in a fresh
subprocess (``PYTHONPATH`` set to that version's tree, an empty translation cache: a first run),
the order of the two alternating from chunk to chunk, so machine load falls on both alike.
The baseline defaults to the revision before the engine-speed work (``git archive`` of it into a
temp dir). Prints seconds per version and the ratio this/baseline per workload, and how often
this version's planner hit its time limit or reused an earlier plan.

Run: ``python benchmarks/bench_alfworld_workloads.py [--baseline REV] [--record-tasks 24]
[--every 3] [--noisy-tasks 12] [--walk-tasks 12] [--chunk 6] [--workloads record expert noisy walk]``.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

#: The revision before the engine-speed work (issue 11): textworld's stack as alfworld ships it.
DEFAULT_BASELINE = "68128a1"

# Runs inside a subprocess with one version's tree on PYTHONPATH; only APIs both versions have.
DRIVER = r"""
import json, sys, time, tempfile
from pathlib import Path
import gymnasium as gym
import ttg_envs
try:
    from ttg_envs.registry import policy_factory
    from ttg_envs.runner import run_episode
except ImportError:  # revisions before the restructuring of issue 14
    from ttg_envs.envs import policy_factory
    from ttg_envs.eval.rollout import run_episode
workload, indices = sys.argv[1], [int(i) for i in sys.argv[2].split(",")]
start = time.perf_counter()
stats = {}
if workload == "record":
    try:
        from ttg_envs.training.meter.record import collect_trajectories
    except ImportError:  # revisions before issue 14
        from ttg_envs.training.meter_cli import collect_trajectories
    with tempfile.TemporaryDirectory() as out:
        collect_trajectories("ttg/ALFWorld-v0", {}, "train",
                             ["expert", "noisy_expert:0.25", "noisy_expert:0.5", "noisy_expert:1"],
                             Path(out), tasks=indices, seed=3, workers=1)
elif workload == "walk":
    import random
    from ttg_envs.wrappers import TokenCounter
    env = TokenCounter(gym.make("ttg/ALFWorld-v0", split="train", action_format="lenient", max_steps=30))
    env.reset(options={"task_index": indices[0]})  # imports and the first load outside the timing
    spent, steps, new = 0.0, 0, 0
    for i in indices:
        rng = random.Random(i)
        for _ in range(8):
            obs, info = env.reset(options={"task_index": i})
            core = env.unwrapped._engine._core
            for _ in range(30):
                admissible = info["admissible_commands"]
                command = f"<action>{admissible[rng.randrange(len(admissible))]}</action>"
                known = len(core.states)
                t0 = time.perf_counter()
                obs, reward, terminated, truncated, info = env.step(command)
                spent += time.perf_counter() - t0
                steps += 1
                new += len(core.states) > known
                if terminated or truncated:
                    break
    stats = {"step_seconds": spent, "steps": steps, "new_states": new}
else:
    make_policy = policy_factory("ttg/ALFWorld-v0")
    env = gym.make("ttg/ALFWorld-v0", split="valid_seen")
    wins = 0
    for i in indices:
        policy = make_policy("expert") if workload == "expert" else make_policy("noisy_expert", eps=0.75, seed=3 * 1_000_003 + i)
        wins += run_episode(env, policy, task_index=i, seed=3, policy_name="p").success
    base = env.unwrapped
    stats = {"wins": wins, "planner_timeouts": getattr(base, "planner_timeouts", 0),
             "plans_repaired": getattr(base, "plans_repaired", 0)}
print(json.dumps({"seconds": time.perf_counter() - start, **stats}))
"""


def baseline_tree(rev: str, into: Path) -> Path:
    """Extract ``rev`` of this repository into ``into`` (no git metadata needed there)."""
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", rev], check=True, capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
    return into


def run_chunk(tree: Path, workload: str, indices: list[int]) -> dict:
    """One chunk of a workload with ``tree``'s code in a fresh process and an empty cache."""
    with tempfile.TemporaryDirectory() as cache:
        env = {**os.environ, "PYTHONPATH": str(tree), "TTG_ENVS_CACHE": cache, "PYTHONWARNINGS": "ignore"}
        done = subprocess.run(
            [sys.executable, "-c", DRIVER, workload, ",".join(map(str, indices))], env=env, capture_output=True, text=True, cwd=tree
        )
    if done.returncode:
        raise RuntimeError(f"{workload} on {tree} failed:\n{done.stderr[-3000:]}")
    result = json.loads(done.stdout.strip().splitlines()[-1])
    hits = re.search(r"planner time limit hit (\d+) times", done.stdout)  # collect_trajectories says so
    if hits:
        result["planner_timeouts"] = int(hits.group(1))
    return result


def spread(n: int, k: int) -> list[int]:
    """``k`` indices spread evenly over ``range(n)``."""
    k = min(k, n)
    return [int(i * n / k) for i in range(k)]


def main() -> None:
    """Run the workloads and print the table."""
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--baseline", default=DEFAULT_BASELINE, help="git revision to compare against (default: %(default)s)")
    p.add_argument("--workloads", nargs="+", default=["record", "expert", "noisy"], choices=["record", "expert", "noisy", "walk"])
    p.add_argument("--record-tasks", type=int, default=24, help="train tasks recorded (the demo records 90)")
    p.add_argument("--every", type=int, default=3, help="expert on every N-th valid_seen game")
    p.add_argument("--noisy-tasks", type=int, default=12, help="valid_seen tasks for the eps-0.75 noisy expert")
    p.add_argument("--walk-tasks", type=int, default=12, help="train tasks of the walk workload (8 x 30 random steps each)")
    p.add_argument("--chunk", type=int, default=6, help="tasks per subprocess")
    args = p.parse_args()

    sys.path.insert(0, str(ROOT))
    from ttg_envs.envs.alfworld import load_tasks

    n_train, n_valid = len(load_tasks("train")), len(load_tasks("valid_seen"))
    tasks = {
        "record": spread(n_train, args.record_tasks),
        "expert": list(range(0, n_valid, args.every)),
        "noisy": spread(n_valid, args.noisy_tasks),
        "walk": spread(n_train, args.walk_tasks),
    }
    rows, walks = [], []
    with tempfile.TemporaryDirectory() as tmp:
        old = baseline_tree(args.baseline, Path(tmp))
        for workload in args.workloads:
            indices = tasks[workload]
            chunks = [indices[i : i + args.chunk] for i in range(0, len(indices), args.chunk)]
            totals = {"this": 0.0, "baseline": 0.0}
            stats = {"planner_timeouts": 0, "plans_repaired": 0, "wins_this": 0, "wins_baseline": 0}
            steps = {name: {"step_seconds": 0.0, "steps": 0, "new_states": 0} for name in totals}
            for k, chunk in enumerate(chunks):
                order = [("this", ROOT), ("baseline", old)]
                for name, tree in order if k % 2 == 0 else order[::-1]:
                    t0 = time.perf_counter()
                    result = run_chunk(tree, workload, chunk)
                    totals[name] += time.perf_counter() - t0
                    stats[f"wins_{name}"] += result.get("wins", 0)
                    for key in steps[name]:
                        steps[name][key] += result.get(key, 0)
                    if name == "this":
                        stats["planner_timeouts"] += result.get("planner_timeouts", 0)
                        stats["plans_repaired"] += result.get("plans_repaired", 0)
                print(
                    f"{workload} chunk {k + 1}/{len(chunks)}: this {totals['this']:.1f}s, baseline {totals['baseline']:.1f}s so far",
                    flush=True,
                )
            rows.append((workload, len(indices), totals, stats))
            if workload == "walk":
                ms = {name: 1e3 * v["step_seconds"] / max(1, v["steps"]) for name, v in steps.items()}
                walks.append(
                    f"walk: {steps['this']['steps']} env steps ({steps['this']['new_states']} to states not met before; "
                    f"baseline {steps['baseline']['steps']}, {steps['baseline']['new_states']}): "
                    f"this {ms['this']:.3f} ms/step, baseline {ms['baseline']:.3f} ms/step, this/baseline {ms['this'] / ms['baseline']:.3f}"
                )
    print(f"\nbaseline: {args.baseline}; each chunk in a fresh process with an empty translation cache\n")
    print("| workload | tasks | this (s) | baseline (s) | this/baseline | wins this/baseline | planner limit hits | plans repaired |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for workload, n, totals, stats in rows:
        wins = f"{stats['wins_this']}/{stats['wins_baseline']}" if workload not in ("record", "walk") else "n/a"
        repaired = stats["plans_repaired"] if workload not in ("record", "walk") else "n/a"
        hits = stats["planner_timeouts"]
        print(
            f"| {workload} | {n} | {totals['this']:.1f} | {totals['baseline']:.1f} | "
            f"{totals['this'] / totals['baseline']:.3f} | {wins} | {hits} | {repaired} |"
        )
    for line in walks:
        print(line)


if __name__ == "__main__":
    main()
