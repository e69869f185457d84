"""Tool envs (ttg/BFCL-v0, ttg/Tau2-v0): step and branch cost against baselines measured in the same run,
and (``--gold``) the full gold-replay sweeps behind the issue's "must show" counts.

1. Step cost: ``env.step`` of a tool-call response vs the bare engine executing the same call
   (BFCL: the backend method through the name table; tau2: ``Environment.get_response``).
2. Branch cost at step 20 vs step 1 (engine snapshot), and replay at step 20 for contrast.
3. ``--gold``: every BFCL entry and every tau2 task replayed with the gold policy, and with its last
   ground-truth call dropped; counts per category / domain.
4. ``--worker``: tau2 with ``stateful_timeout`` (each database call in the episode's call worker) vs
   without, interleaved in this process: a read-only and a writing tool step with the worker warm,
   the first call of an episode (it forks the worker), and whole gold episodes per domain.

Run: ``python benchmarks/bench_tool_envs.py [--repeats R] [--gold] [--worker]``.
"""

from __future__ import annotations

import argparse
import resource
import statistics
import time
from collections import defaultdict

from ttg_envs.envs.bfcl import BFCLEnv
from ttg_envs.envs.bfcl import GoldPolicy as BFCLGold
from ttg_envs.envs.bfcl.backends import Backends
from ttg_envs.envs.bfcl.data import GROUPS
from ttg_envs.envs.tau2 import GoldPolicy as Tau2Gold
from ttg_envs.envs.tau2 import Tau2Env
from ttg_envs.envs.tau2.gold import last_action_writes
from ttg_envs.tools import ToolCall, format_tool_calls


def timed(fn, repeats: int) -> float:
    """Median seconds of ``fn()`` over ``repeats`` runs."""
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


def bfcl_costs(repeats: int) -> dict[str, float]:
    env = BFCLEnv("multi_turn_base", max_steps=1000, max_steps_per_turn=1000)
    env.reset(options={"task_id": "multi_turn_base_0"})
    call = ToolCall("ls", {"a": True})
    text = format_tool_calls([call])
    entry = env.task_entry.entry
    bare = Backends(entry["involved_classes"], entry["initial_config"], long_context=False)
    out = {"bare call (ms)": 1e3 * timed(lambda: bare.execute(call), repeats * 20)}
    out["env.step (ms)"] = 1e3 * timed(lambda: env.step(text), repeats * 20)
    out.update(_branch_costs(env, text, repeats, "multi_turn_base_0"))
    return out


def tau2_costs(repeats: int) -> dict[str, float]:
    from ttg_envs.envs.tau2.data import new_environment, tau2

    env = Tau2Env("retail", user="gold", max_steps=1000, max_errors=10**6)
    env.reset(options={"task_index": 0})
    arguments = {"first_name": "Yusuf", "last_name": "Rossi", "zip": "19122"}
    text = format_tool_calls([ToolCall("find_user_id_by_name_zip", arguments)])
    bare = new_environment("retail")
    message = tau2("tau2.data_model.message").ToolCall(id="c", name="find_user_id_by_name_zip", arguments=arguments)
    out = {"bare call (ms)": 1e3 * timed(lambda: bare.get_response(message), repeats * 20)}
    out["env.step (ms)"] = 1e3 * timed(lambda: env.step(text), repeats * 20)
    out.update(_branch_costs(env, text, repeats, 0))
    return out


def _branch_costs(env, text: str, repeats: int, task) -> dict[str, float]:
    key = "task_id" if isinstance(task, str) else "task_index"
    env.reset(options={key: task})
    env.step(text)
    at_1 = timed(env.branch, repeats)
    for _ in range(19):
        env.step(text)
    at_20 = timed(env.branch, repeats)
    replay_20 = timed(lambda: env.branch("replay"), max(1, repeats // 2))
    return {
        "branch at step 1 (ms)": 1e3 * at_1,
        "branch at step 20 (ms)": 1e3 * at_20,
        "step 20 / step 1": at_20 / at_1,
        "replay at step 20 (ms)": 1e3 * replay_20,
    }


def bfcl_gold() -> None:
    for drop in (False, True):
        counts: dict[str, list[int]] = defaultdict(lambda: [0, 0])
        misses = []
        for group in GROUPS:
            env = BFCLEnv(group)
            policy = BFCLGold(drop_last=drop)
            for i in range(env.num_tasks):
                env.reset(options={"task_index": i})
                if drop and env.task_entry.ground_truth is None:
                    continue
                info = _play(env, policy)
                counts[env.task["type"]][0] += info["success"]
                counts[env.task["type"]][1] += 1
                if not info["success"] and not drop:
                    misses.append(env.task["id"])
        print(f"\nBFCL {'gold_drop_last' if drop else 'gold'}: successes / entries")
        for category, (won, total) in counts.items():
            print(f"  {category:28s} {won:5d} / {total}")
        if misses:
            print("  misses:", ", ".join(misses))


def tau2_gold() -> None:
    print("\ntau2: gold successes / tasks; gold_drop_last successes / tasks, split by whether the last gold action writes")
    for domain in ("airline", "retail", "telecom", "mock"):
        gold_env, drop_env = Tau2Env(domain, user="gold"), Tau2Env(domain, user="gold_drop_last")
        won, misses, dropped = 0, [], defaultdict(lambda: [0, 0])
        for i in range(gold_env.num_tasks):
            gold_env.reset(options={"task_index": i})
            info = _play(gold_env, Tau2Gold())
            won += info["success"]
            if not info["success"]:
                misses.append(gold_env.task["id"])
            writes = last_action_writes(gold_env.task_object, gold_env.environment)
            drop_env.reset(options={"task_index": i})
            dropped[writes][0] += _play(drop_env, Tau2Gold(drop_last=True))["success"]
            dropped[writes][1] += 1
        w, r = dropped[True], dropped[False]
        print(
            f"  {domain:8s} gold {won:4d} / {gold_env.num_tasks}   drop_last: last action writes {w[0]} / {w[1]}, "
            f"read-only or none {r[0]} / {r[1]}" + (f"   misses: {', '.join(misses)}" if misses else "")
        )


def _cpu() -> float:
    """CPU seconds of this process and its reaped children (a call worker counts once it is reaped)."""
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return time.process_time() + children.ru_utime + children.ru_stime


def tau2_worker_costs(repeats: int) -> None:
    """Step cost with and without tau2's call worker, the two timed in turns in this process: wall
    clock, and CPU time of this process and the workers (each reaped when its row ends)."""
    print("\ntau2 stateful_timeout=10 (call worker) vs None, interleaved: ms per step, off / on / ratio")
    print(f"  {'':34s} {'wall':>26s} {'CPU':>26s}")

    def row(name: str, envs: dict, fn, times: int, steps=None) -> None:
        wall = {"off": 0.0, "on": 0.0}
        cpu = {"off": 0.0, "on": 0.0}
        for _ in range(times):
            for mode, env in envs.items():
                w, c = time.perf_counter(), _cpu()
                fn(env)
                wall[mode] += time.perf_counter() - w
                cpu[mode] += _cpu() - c
        w, c = time.perf_counter(), _cpu()
        envs["on"].unwrapped._episode.drop_worker()  # reaped: its CPU time counts
        wall["on"] += time.perf_counter() - w
        cpu["on"] += _cpu() - c
        n = steps() if steps else times
        cells = "".join(f" {1e3 * d['off'] / n:8.3f} {1e3 * d['on'] / n:8.3f} {d['on'] / d['off']:7.2f}x" for d in (wall, cpu))
        print(f"  {name:34s}{cells}")

    pair = {"off": Tau2Env("airline", user="gold", max_steps=10**6, max_errors=10**6)}
    pair["on"] = Tau2Env("airline", user="gold", max_steps=10**6, max_errors=10**6, stateful_timeout=10.0)
    for env in pair.values():
        env.reset(options={"task_index": 0})
    reservation = next(iter(pair["off"].environment.tools.db.reservations))
    read = format_tool_calls([ToolCall("get_reservation_details", {"reservation_id": reservation})])
    passengers = [p.model_dump() for p in pair["off"].environment.tools.db.reservations[reservation].passengers]
    write = format_tool_calls([ToolCall("update_reservation_passengers", {"reservation_id": reservation, "passengers": passengers})])

    def first_call(env):
        env.reset(options={"task_index": 0})
        env.step(read)

    row("airline read-only step", pair, lambda env: env.step(read), repeats * 40)
    row("airline writing step", pair, lambda env: env.step(write), repeats * 40)
    row("airline reset + first call (fork)", pair, first_call, repeats * 5)
    for env in pair.values():
        env.close()
    for domain, tasks in (("airline", range(0, 50, 10)), ("retail", range(0, 114, 23)), ("telecom", range(0, 114, 23))):
        envs = {"off": Tau2Env(domain, user="gold"), "on": Tau2Env(domain, user="gold", stateful_timeout=10.0)}
        counted = [0]

        def episode(env, tasks=tasks, envs=envs, counted=counted):
            for index in tasks:
                env.reset(options={"task_index": index})
                assert _play(env, Tau2Gold())["success"]
                counted[0] += env.elapsed_steps * (env is envs["on"])

        row(f"{domain} gold episodes", envs, episode, max(1, repeats // 2), steps=lambda counted=counted: counted[0])
        for env in envs.values():
            env.close()


def _play(env, policy) -> dict:
    terminated = truncated = False
    info: dict = {}
    while not (terminated or truncated):
        _, _, terminated, truncated, info = env.step(policy(env))
    return info


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--gold", action="store_true", help="also run the full gold-replay sweeps (minutes)")
    parser.add_argument("--worker", action="store_true", help="only tau2's call worker (stateful_timeout) against no worker")
    args = parser.parse_args()
    if args.worker:
        tau2_worker_costs(args.repeats)
        return
    for name, costs in (
        ("ttg/BFCL-v0 (multi_turn_base_0)", bfcl_costs(args.repeats)),
        ("ttg/Tau2-v0 (retail task 0)", tau2_costs(args.repeats)),
    ):
        print(f"\n{name}")
        for key, value in costs.items():
            print(f"  {key:24s} {value:9.3f}")
        print(f"  {'step / bare call':24s} {costs['env.step (ms)'] / costs['bare call (ms)']:9.2f}")
    if args.gold:
        bfcl_gold()
        tau2_gold()


if __name__ == "__main__":
    main()
