"""``ttg serve`` step latency and throughput against in-process steps measured in the same run.

For ALFWorld and BFCL: a ``ttg serve`` subprocess on 127.0.0.1, then 1, 8 and 32 concurrent
``RemoteEnv`` sessions (one client thread each, in this process) stepping the same kind of
actions as the in-process baseline (ALFWorld: random admissible commands from ``info``; BFCL: one
``ls`` tool call per step on a multi-turn entry). Prints p50 / p99 step latency and steps/s, each
as a ratio to the in-process env (one env, same actions), and the server's memory per session.

Localhost only, bounded in count (``--steps`` per configuration) and time (``--time-limit``).
Run: ``python benchmarks/bench_serve.py [--sessions 1 8 32] [--steps 320] [--out FILE]``.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import select
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

import ttg_envs  # noqa: F401
from ttg_envs.serve.remote_env import RemoteEnv
from ttg_envs.tools import ToolCall, format_tool_calls
from ttg_envs.wrappers import make_env

ROOT = Path(__file__).resolve().parent.parent
ENVS = {
    "alfworld": ("ttg/ALFWorld-v0", {"split": "valid_seen", "max_steps": 1000}),
    "bfcl": ("ttg/BFCL-v0", {"categories": "multi_turn_base", "max_steps": 1000, "max_steps_per_turn": 1000}),
}
BFCL_LS = format_tool_calls([ToolCall("ls", {"a": True})])


def next_action(name: str, info: dict, rng: random.Random) -> str:
    """The benchmark's policy: a random admissible ALFWorld command, or BFCL's ``ls`` call."""
    if name == "alfworld":
        return f"<action>{rng.choice(info['admissible_commands'])}</action>"
    return BFCL_LS


def play(env, name: str, seed: int, info: dict, steps: int, deadline: float, latencies: list[float]) -> None:
    """``steps`` steps on from a reset of task ``seed`` (its ``info`` given; reset again when an episode ends), each timed."""
    rng = random.Random(seed)
    options = {"task_index": seed % 20}
    for _ in range(steps):
        if time.monotonic() > deadline:
            return
        action = next_action(name, info, rng)
        start = time.perf_counter()
        _, _, terminated, truncated, info = env.step(action)
        latencies.append(time.perf_counter() - start)
        if terminated or truncated:
            _, info = env.reset(seed=seed, options=options)


def summary(latencies: list[float], wall: float) -> dict[str, float]:
    """p50 / p99 latency in ms and steps per second."""
    ordered = sorted(latencies)
    p99 = ordered[min(len(ordered) - 1, int(round(0.99 * (len(ordered) - 1))))]
    return {"steps": len(ordered), "p50_ms": 1e3 * statistics.median(ordered), "p99_ms": 1e3 * p99, "steps_per_s": len(ordered) / wall}


def in_process(name: str, steps: int, time_limit: float) -> dict[str, float]:
    """The baseline: one env in this process, same policy, the tasks of 8 sessions in turn."""
    env_id, kwargs = ENVS[name]
    env = make_env(env_id, **kwargs)
    latencies: list[float] = []
    deadline = time.monotonic() + time_limit
    for seed in range(8):  # load the same games the sessions use, untimed
        env.reset(seed=seed, options={"task_index": seed % 20})
    wall = 0.0
    for seed in range(8):
        _, info = env.reset(seed=seed, options={"task_index": seed % 20})
        start = time.perf_counter()
        play(env, name, seed, info, steps // 8, deadline, latencies)
        wall += time.perf_counter() - start
    env.close()
    return summary(latencies, wall)


def start_server(name: str, max_sessions: int) -> tuple[subprocess.Popen, str]:
    """``ttg serve`` for env ``name`` on a free loopback port."""
    env_id, kwargs = ENVS[name]
    environ = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    cmd = [sys.executable, "-m", "ttg_envs.cli", "serve", env_id, "--env-kwargs", json.dumps(kwargs), "--port", "0"]
    proc = subprocess.Popen([*cmd, "--max-sessions", str(max_sessions)], stdout=subprocess.PIPE, text=True, env=environ)
    deadline, line = time.monotonic() + 120, ""
    while "http://" not in line:
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            raise RuntimeError("ttg serve did not start")
        if select.select([proc.stdout], [], [], 1)[0]:
            line = proc.stdout.readline()
    return proc, line.split(" on ", 1)[1].split()[0]


def rss_mb(pid: int) -> float:
    """Resident memory of process ``pid`` in MB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def remote(name: str, url: str, sessions: int, steps: int, time_limit: float, pid: int) -> dict[str, float]:
    """``sessions`` RemoteEnvs in threads, ``steps`` steps in all, each timed."""
    envs = [RemoteEnv(url, ENVS[name][0]) for _ in range(sessions)]
    infos = [env.reset(seed=i, options={"task_index": i % 20})[1] for i, env in enumerate(envs)]  # untimed, as the baseline's
    per = [[] for _ in envs]
    deadline = time.monotonic() + time_limit
    threads = [
        threading.Thread(target=play, args=(env, name, i, infos[i], max(1, steps // sessions), deadline, per[i]))
        for i, env in enumerate(envs)
    ]
    start = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    wall = time.perf_counter() - start
    memory = rss_mb(pid)
    for env in envs:
        env.close()
    return {**summary([x for part in per for x in part], wall), "server_rss_mb": memory}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--envs", nargs="+", default=list(ENVS), choices=list(ENVS))
    parser.add_argument("--sessions", nargs="+", type=int, default=[1, 8, 32])
    parser.add_argument("--steps", type=int, default=320, help="steps per configuration (default: %(default)s)")
    parser.add_argument("--time-limit", type=float, default=60.0, help="seconds per configuration at most (default: %(default)s)")
    parser.add_argument("--out", default=None, help="write the results as JSON here")
    args = parser.parse_args(argv)
    results: dict[str, dict] = {"load_average_at_start": os.getloadavg()}
    rows = [
        "| env | sessions | steps | p50 ms | p99 ms | steps/s | p50 / local | p99 / local | steps/s / local | server RSS MB |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for name in args.envs:
        local = in_process(name, args.steps, args.time_limit)
        results[name] = {"in_process": local}
        rows.append(
            f"| {name} | in process | {local['steps']} | {local['p50_ms']:.2f} | {local['p99_ms']:.2f} | {local['steps_per_s']:.0f} | 1 | 1 | 1 | |"
        )
        proc, url = start_server(name, max(args.sessions))
        try:
            idle = rss_mb(proc.pid)
            results[name]["server_rss_idle_mb"] = idle
            for sessions in args.sessions:
                r = remote(name, url, sessions, args.steps, args.time_limit, proc.pid)
                r["ratios"] = {
                    "p50": r["p50_ms"] / local["p50_ms"],
                    "p99": r["p99_ms"] / local["p99_ms"],
                    "steps_per_s": r["steps_per_s"] / local["steps_per_s"],
                }
                results[name][str(sessions)] = r
                rows.append(
                    f"| {name} | {sessions} | {r['steps']} | {r['p50_ms']:.2f} | {r['p99_ms']:.2f} | {r['steps_per_s']:.0f} | "
                    f"{r['ratios']['p50']:.1f} | {r['ratios']['p99']:.1f} | {r['ratios']['steps_per_s']:.2f} | {r['server_rss_mb']:.0f} |"
                )
                print(rows[-1], flush=True)
        finally:
            proc.kill()
            proc.wait(timeout=30)
    print("\n".join(rows))
    idle = ", ".join(f"{n} {results[n]['server_rss_idle_mb']:.0f} MB" for n in args.envs)
    print(f"server RSS with no session: {idle}")
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(json.dumps(results, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
