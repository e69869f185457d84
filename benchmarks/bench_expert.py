"""The ALFWorld scripted expert's per-call time: the fast path against the old planner path, in one run.

The noisy experts the project uses (eps 0.25, 0.5, 0.75) play every valid task (valid_seen +
valid_unseen, one episode per task and eps, seed 0 by the runner's seed rule), and every call of
the expert inside them is timed:

- ``fast`` (what ``ExpertPolicy`` does now): :meth:`ALFWorldEnv.policy_plan`, the state's known
  plan or the fast domain expert, never a search;
- ``old`` (what it did before): :meth:`ALFWorldEnv.expert_plan`, plan repair and otherwise a
  planner search under the engine's 30 s limit, which is what the exact labels still use.

The old path runs on every ``--old-every``-th task (all three eps), right after the fast path on
the same task and in its own env (its own engine core: neither reads the other's plan cache), so
load falls on both alike. Prints per path and eps: expert calls, p50 / p99 / max per call, planner
limit hits, fast-path fallbacks to the planner, wins; and the same for the tasks both paths played.

Run: ``python benchmarks/bench_expert.py [--old-every 10] [--eps 0.25 0.5 0.75] [--splits valid_seen valid_unseen]``.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


class TimedExpert:
    """An expert that takes the first command of ``plan_of(env)`` and times each call."""

    def __init__(self, plan_of, respond) -> None:
        self.plan_of, self.respond, self.times = plan_of, respond, []

    def __call__(self, env) -> str:
        start = time.perf_counter()
        plan = self.plan_of(env.unwrapped)
        self.times.append(time.perf_counter() - start)
        return self.respond(plan[0] if plan else "look")


def percentile(values: list[float], q: float) -> float:
    """The ``q``-quantile of ``values`` (nearest rank)."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


def play(env, path: str, eps: float, index: int, stats: dict) -> None:
    """One noisy-expert episode on task ``index`` with the ``path`` expert; adds to ``stats``."""
    from ttg_envs.envs.alfworld import NoisyExpertPolicy
    from ttg_envs.envs.alfworld.policies import react
    from ttg_envs.runner import policy_seed, run_episode

    base = env.unwrapped
    plan_of = {"fast": lambda b: b.policy_plan(), "old": lambda b: b.expert_plan()}[path]
    policy = NoisyExpertPolicy(eps=eps, seed=policy_seed(0, index))
    policy.expert = TimedExpert(plan_of, react)
    hits, fallbacks = base.planner_timeouts, base._engine.fast_fallbacks if base._engine else 0
    result = run_episode(env, policy, task_index=index, seed=0, policy_name=path)
    stats["times"] += policy.expert.times
    stats["hits"] += base.planner_timeouts - hits
    stats["fallbacks"] += base._engine.fast_fallbacks - fallbacks
    stats["wins"] += result.success
    stats["episodes"] += 1


def row(name: str, eps: float, stats: dict) -> str:
    """One table row."""
    t = [x * 1000 for x in stats["times"]]
    return (
        f"| {name} | {eps:g} | {stats['episodes']} | {len(t)} | {percentile(t, 0.5):.2f} | {percentile(t, 0.99):.2f} | "
        f"{max(t) if t else float('nan'):.1f} | {statistics.fmean(t) if t else float('nan'):.2f} | {stats['hits']} | "
        f"{stats['fallbacks']} | {stats['wins']} |"
    )


def main() -> None:
    """Play the episodes and print the table."""
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--eps", type=float, nargs="+", default=[0.25, 0.5, 0.75])
    p.add_argument("--splits", nargs="+", default=["valid_seen", "valid_unseen"])
    p.add_argument("--old-every", type=int, default=10, help="the old path on every N-th task (0: never)")
    p.add_argument("--limit", type=int, default=0, help="only the first N tasks per split (0: all)")
    args = p.parse_args()

    sys.path.insert(0, str(ROOT))
    import gymnasium as gym

    import ttg_envs  # noqa: F401  (registers the ids)

    def empty() -> dict:
        return {"times": [], "hits": 0, "fallbacks": 0, "wins": 0, "episodes": 0}

    fast = {eps: empty() for eps in args.eps}
    old = {eps: empty() for eps in args.eps}
    fast_paired = {eps: empty() for eps in args.eps}
    start = time.perf_counter()
    for split in args.splits:
        envs = {path: gym.make("ttg/ALFWorld-v0", split=split) for path in ("fast", "old")}
        n = len(envs["fast"].unwrapped.tasks)
        for index in range(n if not args.limit else min(n, args.limit)):
            paired = args.old_every and index % args.old_every == 0
            for k, eps in enumerate(args.eps):
                order = ["fast", "old"] if (index + k) % 2 == 0 else ["old", "fast"]
                for path in order if paired else ["fast"]:
                    if path == "fast":
                        before = len(fast[eps]["times"]), fast[eps]["wins"], fast[eps]["hits"], fast[eps]["fallbacks"]
                        play(envs["fast"], "fast", eps, index, fast[eps])
                        if paired:
                            s = fast_paired[eps]
                            s["times"] += fast[eps]["times"][before[0] :]
                            s["wins"] += fast[eps]["wins"] - before[1]
                            s["hits"] += fast[eps]["hits"] - before[2]
                            s["fallbacks"] += fast[eps]["fallbacks"] - before[3]
                            s["episodes"] += 1
                    else:
                        play(envs["old"], "old", eps, index, old[eps])
            print(f"{split} task {index + 1}/{n}: {time.perf_counter() - start:.0f} s", file=sys.stderr, flush=True)
        for env in envs.values():
            env.close()
    print(
        f"\nsplits {' '.join(args.splits)}, seed 0; old path on every {args.old_every}-th task; {time.perf_counter() - start:.0f} s in all\n"
    )
    print(
        "| expert path | eps | episodes | expert calls | p50 (ms) | p99 (ms) | max (ms) | mean (ms) | planner limit hits | fallbacks | wins |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for eps in args.eps:
        print(row("fast, all tasks", eps, fast[eps]))
    if args.old_every:
        for eps in args.eps:
            print(row("fast, paired tasks", eps, fast_paired[eps]))
            print(row("old, paired tasks", eps, old[eps]))


if __name__ == "__main__":
    main()
