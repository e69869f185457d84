"""ALFWorld cost, as ratios against baselines measured in the same run.

0. ``ttg/ALFWorld-v0`` vs the stock stack exactly as alfworld ships it (``PddlEnv`` +
   ``AlfredDemangler`` + ``AlfredInfos``: ``load`` + ``reset``, ``step``), same games and commands,
   interleaved: new-game load with an empty translation cache (cold) and in a fresh process whose
   cache an earlier process filled (warm), reset of the same game, step, and a group of 8
   rollouts x 20 random admissible steps of one task. Targets ttg/stock: warm load <= 0.1,
   step <= 0.2, group <= 0.2.
   ``--resources N``: RSS, mapped libdownward copies and temp-dir bytes over N
   gym.make/reset/close cycles (then exits).
1. Step cost of ``TrajectoryRecorder(TokenCounter(ALFWorldEnv))`` vs the bare engine
   (textworld ``PddlEnv`` + ``AlfredDemangler`` + ``AlfredInfos``) on the same command sequences
   (target ratio <= 1.10).
2. Branch cost at step 40 vs step 1 with the engine snapshot (target <= 1.5), and vs replay.

Run: ``python benchmarks/bench_alfworld.py [--tasks N] [--repeats R] [--stock-only]``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
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


# ------------------------------------------------------------------ 0. ttg vs the stock stack
def stock_stack():
    """The stack exactly as alfworld ships it."""
    import textworld
    from alfworld.agents.environment.alfred_tw_env import AlfredDemangler, AlfredInfos
    from textworld.envs.pddl.pddl import PddlEnv

    return AlfredInfos(AlfredDemangler(PddlEnv(textworld.EnvInfos(admissible_commands=True, won=True)), shuffle=False))


def _walk(admissible, rng):
    return admissible[int(rng.integers(len(admissible)))]


def _stock_group(stock, seeds, n_steps):
    """8 rollouts of one task on the stock stack (a reset re-translates, as alfworld's env does)."""
    start = time.perf_counter()
    commands = []
    for seed in seeds:
        rng = np.random.default_rng(seed)
        state = stock.reset()
        rollout = []
        for _ in range(n_steps):
            c = _walk(state["admissible_commands"], rng)
            state, _, done = stock.step(c)
            rollout.append(c)
            if done:
                break
        commands.append(rollout)
    return time.perf_counter() - start, commands


def _ttg_group(env, index, seeds, n_steps):
    start = time.perf_counter()
    commands = []
    for seed in seeds:
        rng = np.random.default_rng(seed)
        _, info = env.reset(options={"task_index": index})
        rollout = []
        for _ in range(n_steps):
            c = _walk(info["admissible_commands"], rng)
            _, _, terminated, _, info = env.step(f"<action>{c}</action>")
            rollout.append(c)
            if terminated:
                break
        commands.append(rollout)
    return time.perf_counter() - start, commands


def warm_loads(indices: list[int], warmup: int) -> list[float]:
    """Seconds of the first reset of each game in this process (its translation from disk)."""
    env = gym.make("ttg/ALFWorld-v0", split="valid_seen")
    env.reset(options={"task_index": warmup})  # imports and first-use setup, not a load cost
    out = []
    for index in indices:
        start = time.perf_counter()
        env.reset(options={"task_index": index})
        out.append(time.perf_counter() - start)
        assert env.unwrapped._engine.translation.origin == "disk"
    return out


def compare_with_stock(n_tasks: int, n_steps: int = 20, group: int = 8) -> dict[str, float]:
    """Section 0: per-operation seconds for stock and ttg, and their ratios."""
    from ttg_envs.envs.alfworld import translation

    tasks = gym.make("ttg/ALFWorld-v0", split="valid_seen").unwrapped.tasks
    indices = list(range(1, 1 + n_tasks))
    stock = stock_stack()
    t = {k: [] for k in ("stock_load", "ttg_cold", "stock_reset", "ttg_reset", "stock_step", "ttg_step", "stock_group", "ttg_group")}
    with tempfile.TemporaryDirectory() as cache:
        os.environ["TTG_ENVS_CACHE"] = cache
        env = gym.make("ttg/ALFWorld-v0", split="valid_seen", max_steps=10_000)
        env.reset(options={"task_index": 0})  # imports and first-use setup
        for index in indices:
            game = dict(tasks[index].game())
            # new-game load: stock load + reset; ttg reset to a game it has not seen (empty cache)
            start = time.perf_counter()
            stock.load(game)
            state = stock.reset()
            t["stock_load"].append(time.perf_counter() - start)
            translation._MEMORY.clear()
            start = time.perf_counter()
            _, info = env.reset(options={"task_index": index})
            t["ttg_cold"].append(time.perf_counter() - start)
            assert env.unwrapped._engine.translation.origin == "built"
            # reset of the same game
            start = time.perf_counter()
            state = stock.reset()
            t["stock_reset"].append(time.perf_counter() - start)
            start = time.perf_counter()
            _, info = env.reset(options={"task_index": index})
            t["ttg_reset"].append(time.perf_counter() - start)
            # step: the same random admissible walk on both (first visits of its states)
            rng = np.random.default_rng(index)
            for _ in range(n_steps):
                c = _walk(state["admissible_commands"], rng)
                start = time.perf_counter()
                state, _, done = stock.step(c)
                t["stock_step"].append(time.perf_counter() - start)
                start = time.perf_counter()
                _, _, terminated, _, info = env.step(f"<action>{c}</action>")
                t["ttg_step"].append(time.perf_counter() - start)
                assert info["admissible_commands"] == state["admissible_commands"] and terminated == bool(state["won"])
                if done:
                    break
        # a group of 8 rollouts x 20 random admissible steps of one task (fresh game for both)
        for index in indices[:2]:
            seeds = [1000 * index + g for g in range(group)]
            stock.load(dict(tasks[index + n_tasks].game()))
            env.reset(options={"task_index": index + n_tasks})
            # the group starts from a loaded game on both sides (load is measured above)
            seconds, stock_commands = _stock_group(stock, seeds, n_steps)
            t["stock_group"].append(seconds)
            seconds, ttg_commands = _ttg_group(env, index + n_tasks, seeds, n_steps)
            t["ttg_group"].append(seconds)
            assert stock_commands == ttg_commands
        env.close()
        # warm: a fresh process, the cache filled by this one
        out = subprocess.run(
            [sys.executable, __file__, "--warm-child", json.dumps(indices)],
            capture_output=True,
            text=True,
            check=True,
            env={**os.environ, "TTG_ENVS_CACHE": cache},
        )
        t["ttg_warm"] = json.loads(out.stdout.strip().splitlines()[-1])
    return {k: statistics.mean(v) for k, v in t.items()}


def _rss_mb() -> float:
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmRSS")) / 1024


def _libdownward_maps() -> int:
    with open("/proc/self/maps") as f:
        return len({line.split()[4] for line in f if "libdownward" in line})  # distinct inodes


def _tmp_bytes() -> int:
    total = 0
    for root, _, files in os.walk(tempfile.gettempdir()):
        for name in files:
            try:
                total += os.lstat(os.path.join(root, name)).st_size
            except OSError:
                pass
    return total


def resource_cycles(n: int) -> None:
    """RSS, mapped libdownward copies and temp-dir usage over ``n`` gym.make/reset/close cycles."""
    import gc

    tmp0 = _tmp_bytes()
    print(f"{'cycle':>6s} {'RSS MB':>8s} {'libdownward copies':>19s} {'temp dir +MB':>13s}")
    for i in range(n + 1):
        if i in (1, 10, 50, 100, 200, n) or i == 0:
            gc.collect()
            print(f"{i:6d} {_rss_mb():8.1f} {_libdownward_maps():19d} {(_tmp_bytes() - tmp0) / 2**20:13.1f}")
        if i == n:
            break
        env = gym.make("ttg/ALFWorld-v0", split="valid_seen")
        env.reset(options={"task_index": i % 20})
        env.step(f"<action>{env.unwrapped.admissible_commands[0]}</action>")
        env.close()
        del env


def print_comparison(m: dict[str, float]) -> None:
    """Print section 0 as a table of ms and ratios."""
    rows = [
        ("new-game load, cold cache", "stock_load", "ttg_cold", None),
        ("new-game load, warm (fresh process)", "stock_load", "ttg_warm", 0.1),
        ("reset of the same game", "stock_reset", "ttg_reset", None),
        ("step", "stock_step", "ttg_step", 0.2),
        ("group of 8 rollouts x 20 steps", "stock_group", "ttg_group", 0.2),
    ]
    print(f"{'operation':38s} {'stock ms':>10s} {'ttg ms':>10s} {'ttg/stock':>10s}")
    for name, a, b, target in rows:
        goal = f"(target <= {target})" if target else ""
        print(f"{name:38s} {1e3 * m[a]:10.1f} {1e3 * m[b]:10.2f} {m[b] / m[a]:10.3f} {goal}")


def main() -> None:
    """Print the step and branch ratios."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tasks", type=int, default=8)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--stock-only", action="store_true", help="only section 0 (ttg vs the stock stack)")
    parser.add_argument("--resources", type=int, metavar="N", help="only the N make/reset/close cycles")
    parser.add_argument("--warm-child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.resources:
        resource_cycles(args.resources)
        return
    if args.warm_child:
        print(json.dumps(warm_loads(json.loads(args.warm_child), warmup=0)))
        return
    print_comparison(compare_with_stock(args.tasks))
    if args.stock_only:
        return

    env = gym.make("ttg/ALFWorld-v0", split="valid_seen")
    tasks = env.unwrapped.tasks
    sequences = command_sequences(args.tasks, 40, seed=0)
    with tempfile.TemporaryDirectory() as tmp:
        for _ in range(2):  # warm-up round, then the measured one
            bare = time_bare(tasks, sequences)
            wrapped = time_wrapped(sequences, Path(tmp) / "traj.jsonl")
    print(
        f"step: bare engine {1e3 * bare:.2f} ms, TokenCounter+TrajectoryRecorder {1e3 * wrapped:.2f} ms, "
        f"ratio {wrapped / bare:.3f} (target <= 1.10)"
    )

    snap1 = time_branch(sequences, 1, "snapshot", args.repeats)
    snap40 = time_branch(sequences, 40, "snapshot", args.repeats)
    replay40 = time_branch(sequences, 40, "replay", max(1, args.repeats // 2))
    print(
        f"branch+1 step: snapshot at step 1 {1e3 * snap1:.1f} ms, at step 40 {1e3 * snap40:.1f} ms, "
        f"ratio {snap40 / snap1:.2f} (target <= 1.5)"
    )
    print(
        f"branch+1 step at step 40: replay {1e3 * replay40:.1f} ms, snapshot {1e3 * snap40:.1f} ms, "
        f"replay/snapshot {replay40 / snap40:.1f}x"
    )


if __name__ == "__main__":
    main()
