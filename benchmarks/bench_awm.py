"""AWM episode costs: reset, sandboxed tool call, verifier, and branching (snapshot vs replay).

Measured on the bundled scenarios in one run: median seconds of ``reset``, of one read-only tool
call (app process warm), of the final answer (verifier in its own sandboxed process), and of
``branch()`` after 1 and after 12 steps, by SQLite snapshot and by replay, with their ratios.
Also the gold-replay throughput over all bundled tasks.

Run: ``python benchmarks/bench_awm.py [--repeats 10]``.
"""

from __future__ import annotations

import argparse
import statistics
import time

from ttg_envs.envs.awm import AWMEnv
from ttg_envs.envs.awm.policies import call_text, load_gold, make_policy

READ = call_text("list_deals", {})


def median_time(fn, repeats: int) -> float:
    """Median wall seconds of ``fn()`` over ``repeats`` runs."""
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    """Print the table."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=10)
    args = parser.parse_args()
    env = AWMEnv(max_steps=100)
    task = {"options": {"task_id": "crm_1/0"}}
    env.reset(**task)
    env.step(READ)
    reset = median_time(lambda: env.reset(**task), args.repeats)
    env.step(READ)
    call = median_time(lambda: env.step(READ), args.repeats)

    def answer():
        env.reset(**task)
        env.step("Done.")

    final = median_time(answer, args.repeats) - reset
    rows = {}
    for steps in (1, 12):
        env.reset(**task)
        for _ in range(steps):
            env.step(READ)
        for method in ("snapshot", "replay"):
            rows[(steps, method)] = median_time(lambda m=method: env.branch(m).close(), args.repeats)
    policy = make_policy("expert")
    start = time.perf_counter()
    for task_id in sorted(load_gold()):
        env.reset(options={"task_id": task_id})
        done = False
        while not done:
            _, _, terminated, truncated, _ = env.step(policy(env))
            done = terminated or truncated
    replay = time.perf_counter() - start
    env.close()
    print(f"reset                      {1e3 * reset:8.1f} ms")
    print(f"tool call (warm app)       {1e3 * call:8.1f} ms")
    print(f"final answer + verifier    {1e3 * final:8.1f} ms")
    for (steps, method), seconds in rows.items():
        print(f"branch by {method:<8} @ {steps:>2}   {1e3 * seconds:8.1f} ms")
    print(
        f"snapshot branch @12 / @1: {rows[(12, 'snapshot')] / rows[(1, 'snapshot')]:.2f}x; "
        f"replay / snapshot @12: {rows[(12, 'replay')] / rows[(12, 'snapshot')]:.1f}x"
    )
    print(f"gold replay of {len(load_gold())} tasks: {replay:.1f} s ({len(load_gold()) / replay:.1f} episodes/s)")


if __name__ == "__main__":
    main()
