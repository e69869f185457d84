"""What settling a sandbox's killed branches before the next call costs a guided AWM step.

A guided step forks k branches of the episode's running app, sends each a call, closes them and
goes on in the episode. A close is answered before the killed app and what it left running are
gone; ``Zygote.settle`` (this checkout) sweeps them before the next request, fork or spawn in the
same sandbox, so leftovers never hold the process cap the episode shares. Two variants, interleaved
in one process on the bundled ``crm_1`` app (branches fork the running app: ``state_in_database``):

- ``settled``: this checkout;
- ``unsettled``: ``Zygote.settle`` a no-op (the behaviour before).

Printed: median wall ms of one round (k branches, a read call in each, their closes, then a read
call in the episode), each variant's, and their ratio.

    PYTHONPATH=. python benchmarks/bench_awm_settle.py [--rounds 30] [--k 4]
"""

from __future__ import annotations

import argparse
import statistics
import time


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=30, help="rounds per variant (default: %(default)s)")
    parser.add_argument("--k", type=int, default=4, help="branches per round (default: %(default)s)")
    args = parser.parse_args(argv)

    from ttg_envs.envs.awm import AWMEnv
    from ttg_envs.envs.awm.policies import call_text
    from ttg_envs.envs.awm.sandbox.host_process import Zygote
    from ttg_envs.wrappers import branch

    read = call_text("list_deals", {})
    settle = Zygote.settle
    env = AWMEnv(scenarios=["crm_1"], state_in_database=True, max_steps=10_000)
    env.reset(options={"task_id": "crm_1/0"})
    env.step(read)  # the app runs: branches fork it

    def one_round() -> float:
        start = time.perf_counter()
        children = [branch(env, "snapshot") for _ in range(args.k)]
        for child in children:
            child.step(read)
        for child in children:
            child.close()
        env.step(read)
        return time.perf_counter() - start

    times: dict[str, list[float]] = {"unsettled": [], "settled": []}
    try:
        for _ in range(args.rounds):
            for name in times:
                Zygote.settle = settle if name == "settled" else (lambda self: None)
                times[name].append(one_round())
    finally:
        Zygote.settle = settle
        env.close()
    print(f"{args.rounds} rounds per variant, {args.k} branches a round (median wall ms of a round)")
    for name, values in times.items():
        print(f"  {name}: {1e3 * statistics.median(values):.1f} ms")
    print(f"  ratio (settled / unsettled): {statistics.median(times['settled']) / statistics.median(times['unsettled']):.2f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
