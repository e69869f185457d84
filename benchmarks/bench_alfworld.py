"""ALFWorld step and branch cost, as ratios against baselines measured in the same run.

1. Step cost of ``TrajectoryRecorder(TokenCounter(ALFWorldEnv))`` vs the bare engine
   (textworld ``PddlEnv`` + ``AlfredDemangler`` + ``AlfredInfos``) on the same command sequences
   (target ratio <= 1.10).
2. Branch cost at step 40 vs step 1 with the engine snapshot (target <= 1.5), and vs replay.

Run: ``python benchmarks/bench_alfworld.py [--tasks N] [--repeats R]``.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import gymnasium as gym
import numpy as np

import ttg_envs  # noqa: F401
from ttg_envs.envs.alfworld.engine import AlfredEngine
from ttg_envs.wrappers import TokenCounter, TrajectoryRecorder, branch


def command_sequences(n_tasks: int, n_steps: int, seed: int) -> list[tuple[int, list[str]]]:
    """Per task, a fixed sequence of admissible commands (random walk) that lasts ``n_steps``."""
    env = gym.make("ttg/ALFWorld-v0", split="valid_seen", show_admissible=False, max_steps=10_000)
    rng = np.random.default_rng(seed)
    out = []
    for index in range(n_tasks):
        env.reset(options={"task_index": index})
        commands = []
        while len(commands) < n_steps:
            admissible = env.unwrapped.admissible_commands
            c = admissible[int(rng.integers(len(admissible)))]
            _, _, terminated, _, _ = env.step(f"<action>{c}</action>")
            if terminated:  # restart the walk; keep only non-winning prefixes
                env.reset(options={"task_index": index})
                commands = []
                continue
            commands.append(c)
        out.append((index, commands))
    return out


def time_bare(tasks, sequences) -> float:
    """Seconds per step of the bare engine."""
    engine = AlfredEngine()
    total, steps = 0.0, 0
    for index, commands in sequences:
        task = tasks[index]
        engine.load(task.game(), task.id)
        engine.reset(owner=engine)
        start = time.perf_counter()
        for c in commands:
            engine.step(c)
        total += time.perf_counter() - start
        steps += len(commands)
    return total / steps


def time_wrapped(sequences, path: Path) -> float:
    """Seconds per step through TrajectoryRecorder(TokenCounter(ALFWorldEnv))."""
    # max_steps = sequence length, so the recorder writes each episode inside the timed loop.
    n_steps = len(sequences[0][1])
    env = TrajectoryRecorder(TokenCounter(gym.make("ttg/ALFWorld-v0", split="valid_seen", max_steps=n_steps)), path)
    total, steps = 0.0, 0
    for index, commands in sequences:
        env.reset(options={"task_index": index})
        texts = [f"<think>Next I will {c}.</think><action>{c}</action>" for c in commands]
        start = time.perf_counter()
        for t in texts:
            env.step(t)
        total += time.perf_counter() - start
        steps += len(commands)
    return total / steps


def time_branch(sequences, at_step: int, method: str, repeats: int) -> float:
    """Median seconds to branch the wrapped env after ``at_step`` steps and take one step on the branch."""
    env = TokenCounter(gym.make("ttg/ALFWorld-v0", split="valid_seen", max_steps=10_000))
    samples = []
    for index, commands in sequences:
        env.reset(options={"task_index": index})
        for c in commands[:at_step]:
            env.step(f"<action>{c}</action>")
        for _ in range(repeats):
            start = time.perf_counter()
            child = branch(env, method)
            child.step("<action>look</action>")
            samples.append(time.perf_counter() - start)
            del child
    return statistics.median(samples)


def main() -> None:
    """Print the step and branch ratios."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tasks", type=int, default=8)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()

    env = gym.make("ttg/ALFWorld-v0", split="valid_seen")
    tasks = env.unwrapped.tasks
    sequences = command_sequences(args.tasks, 40, seed=0)
    with tempfile.TemporaryDirectory() as tmp:
        for _ in range(2):  # warm-up round, then the measured one
            bare = time_bare(tasks, sequences)
            wrapped = time_wrapped(sequences, Path(tmp) / "traj.jsonl")
    print(f"step: bare engine {1e3 * bare:.2f} ms, TokenCounter+TrajectoryRecorder {1e3 * wrapped:.2f} ms, "
          f"ratio {wrapped / bare:.3f} (target <= 1.10)")

    snap1 = time_branch(sequences, 1, "snapshot", args.repeats)
    snap40 = time_branch(sequences, 40, "snapshot", args.repeats)
    replay40 = time_branch(sequences, 40, "replay", max(1, args.repeats // 2))
    print(f"branch+1 step: snapshot at step 1 {1e3 * snap1:.1f} ms, at step 40 {1e3 * snap40:.1f} ms, "
          f"ratio {snap40 / snap1:.2f} (target <= 1.5)")
    print(f"branch+1 step at step 40: replay {1e3 * replay40:.1f} ms, snapshot {1e3 * snap40:.1f} ms, "
          f"replay/snapshot {replay40 / snap40:.1f}x")


if __name__ == "__main__":
    main()
