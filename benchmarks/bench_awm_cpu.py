"""AWM sandbox CPU between calls: an app's spinning background thread, frozen vs not; step costs.

Three measurements, each interleaved in one run (the variants alternate, round by round):

1. CPU the sandbox used (its cgroup's accounting) in the ``--seconds`` after a tool call returned that
   started a thread spinning forever: ``host_cgroup.FREEZE`` on (the sandbox is frozen
   ``FREEZE_AFTER`` after the call) against off.
2. The wall time of a plain AWM step (``crm_1``'s ``list_deals``), back to back and after a pause
   longer than ``FREEZE_AFTER`` (so a frozen sandbox is thawed first), freezing on against off.
3. The same two step costs with a CPU quota of ``CPUS = 1.0`` core against ``CPUS = None`` (no CPU
   cgroup), both freezing, in two sandboxes open side by side.

Needs root and writable cgroups (v1 with freezer and cpuacct, or v2). Run:
``python benchmarks/bench_awm_cpu.py [--rounds 5] [--steps 20] [--out benchmarks/results/bench_awm_cpu.txt]``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

from ttg_envs.envs.awm import AWMEnv
from ttg_envs.envs.awm.policies import call_text
from ttg_envs.envs.awm.sandbox import host_cgroup

SPINNING_APP = r"""
import threading
from fastapi import FastAPI
from sqlalchemy import create_engine, text
engine = create_engine("sqlite:///episode.db", connect_args={"check_same_thread": False})
app = FastAPI()

@app.post("/spin_thread", operation_id="spin_thread")
def spin_thread():  # returns at once, leaving a thread that spins as long as the app lives
    def spin():
        while True:
            pass
    threading.Thread(target=spin, daemon=True).start()
    return {"spinning": True}

@app.get("/count", operation_id="count")
def count():
    with engine.connect() as c:
        return {"n": c.execute(text("SELECT n FROM counter")).scalar()}
"""
VERIFY = "def verify_task_completion(initial_db_path, final_db_path, final_answer=None):\n    return {'result': 'complete'}\n"
READ = call_text("list_deals", {})


def write_dataset(folder: Path) -> Path:
    """A one-scenario AWM dataset (``spinner_1``) whose app starts a spinning thread on ``spin_thread``."""
    name = "spinner_1"
    table = {"name": "counter", "ddl": "CREATE TABLE counter (n INTEGER)", "indexes": []}
    rows = {
        "gen_scenario.jsonl": {"name": name, "description": "An app that leaves a thread spinning."},
        "gen_tasks.jsonl": {"scenario": name, "tasks": ["spin"]},
        "gen_db.jsonl": {"scenario": name, "db_path": "x", "db_schema": {"tables": [table]}},
        "gen_sample.jsonl": {
            "scenario": name,
            "sample_data": {"tables": [{"table_name": "counter", "insert_statements": ["INSERT INTO counter VALUES (0);"]}]},
        },
        "gen_envs.jsonl": {"scenario": name, "db_path": "x", "full_code": SPINNING_APP},
        "gen_verifier.pure_code.jsonl": {"scenario": name, "task_idx": 0, "task": "", "verification": {"code": VERIFY}},
    }
    for file, row in rows.items():
        (folder / file).write_text(json.dumps(row) + "\n")
    return folder


def spinning_cpu(env: AWMEnv, freeze: bool, seconds: float) -> float:
    """CPU seconds the sandbox used in the ``seconds`` after a call that left a thread spinning."""
    host_cgroup.FREEZE = freeze
    env.reset(options={"task_id": "spinner_1/0"})  # stops the last round's app and its thread
    cgroup = env._workspace.sandbox.cgroup
    obs = env.step(call_text("spin_thread", {}))[0]
    assert '"spinning":true' in obs.replace(" ", ""), obs
    before = cgroup.usage_us()
    time.sleep(seconds)
    return (cgroup.usage_us() - before) / 1e6


def step_costs(env: AWMEnv, steps: int, pause: float) -> tuple[list[float], list[float]]:
    """Wall seconds of ``steps`` steps back to back, and of ``steps`` steps each after ``pause`` seconds idle."""
    env.reset(options={"task_id": "crm_1/0"})
    env.step(READ)  # the app's first request (a new process's) is not what is measured
    back = []
    for _ in range(steps):
        start = time.perf_counter()
        env.step(READ)
        back.append(time.perf_counter() - start)
    paused = []
    for _ in range(steps):
        time.sleep(pause)
        start = time.perf_counter()
        env.step(READ)
        paused.append(time.perf_counter() - start)
    return back, paused


def _env(**kwargs) -> AWMEnv:
    env = AWMEnv(max_steps=10**6, **kwargs)
    cgroup = env._workspace.sandbox.cgroup
    if cgroup is None or cgroup.switch is None or cgroup.usage_us() is None:
        sys.exit("needs a cgroup with a freezer and CPU accounting (root, writable cgroups)")
    return env


def main() -> None:
    """Run the three measurements, print the table and write it to ``--out``."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--steps", type=int, default=20, help="steps per round and variant, back to back and after a pause each")
    parser.add_argument("--seconds", type=float, default=3.0, help="how long after the spinning call the CPU is counted")
    parser.add_argument("--pause", type=float, default=0.3, help="idle seconds before each paused step (above FREEZE_AFTER)")
    parser.add_argument("--out", default="benchmarks/results/bench_awm_cpu.txt")
    args = parser.parse_args()
    lines = [
        f"# python benchmarks/bench_awm_cpu.py --rounds {args.rounds} --steps {args.steps} --seconds {args.seconds} --pause {args.pause}",
        f"# {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, {os.cpu_count()} cores, load {os.getloadavg()[0]:.1f} at start; "
        f"FREEZE_AFTER {host_cgroup.FREEZE_AFTER} s",
    ]

    def say(line: str = "") -> None:
        print(line, flush=True)
        lines.append(line)

    for line in lines:
        print(line)
    default_freeze, default_cpus = host_cgroup.FREEZE, host_cgroup.CPUS
    cpu: dict[bool, list[float]] = {True: [], False: []}
    steps: dict[str, tuple[list[float], list[float]]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        spinner = _env(path=write_dataset(Path(tmp)))
        plain = _env(scenarios=["crm_1"])
        host_cgroup.CPUS = 1.0
        quota = _env(scenarios=["crm_1"])
        host_cgroup.CPUS = None
        free = _env(scenarios=["crm_1"])
        host_cgroup.CPUS = default_cpus
        assert len(quota._workspace.sandbox.cgroup.folders) > len(free._workspace.sandbox.cgroup.folders)  # a cpu folder
        try:
            for r in range(args.rounds):
                order = (True, False) if r % 2 == 0 else (False, True)
                for freeze in order:
                    cpu[freeze].append(spinning_cpu(spinner, freeze, args.seconds))
                for freeze in order:
                    host_cgroup.FREEZE = freeze
                    back, paused = step_costs(plain, args.steps, args.pause)
                    key = "frozen" if freeze else "not frozen"
                    steps.setdefault(key, ([], []))
                    steps[key][0].extend(back)
                    steps[key][1].extend(paused)
                host_cgroup.FREEZE = True
                for name, env in (("CPUS=1.0", quota), ("CPUS=None", free))[:: 1 if r % 2 == 0 else -1]:
                    back, paused = step_costs(env, args.steps, args.pause)
                    steps.setdefault(name, ([], []))
                    steps[name][0].extend(back)
                    steps[name][1].extend(paused)
                print(f"round {r + 1}/{args.rounds} done", flush=True)
        finally:
            host_cgroup.FREEZE = default_freeze
            for env in (spinner, plain, quota, free):
                env.close()
    say()
    say(f"1. CPU used by the sandbox in the {args.seconds:g} s after a call left a thread spinning (s; each round)")
    for freeze in (True, False):
        values = " ".join(f"{v:.3f}" for v in cpu[freeze])
        say(f"   {'FREEZE=True ' if freeze else 'FREEZE=False'}  median {statistics.median(cpu[freeze]):6.3f}   [{values}]")
    ratio = statistics.median(cpu[False]) / max(statistics.median(cpu[True]), 1e-9)
    say(f"   not frozen / frozen: {ratio:.1f}x")
    say()
    say(f"2-3. step wall time, crm_1 list_deals (ms, median of {args.rounds * args.steps}; paused: after {args.pause:g} s idle)")
    say(f"   {'variant':<12} {'back to back':>13} {'paused':>8} {'p90 paused':>11}")

    def med(values: list[float]) -> float:
        return 1e3 * statistics.median(values)

    for name, (back, paused) in steps.items():
        p90 = 1e3 * statistics.quantiles(paused, n=10)[-1]
        say(f"   {name:<12} {med(back):13.2f} {med(paused):8.2f} {p90:11.2f}")
    for new, base in (("frozen", "not frozen"), ("CPUS=1.0", "CPUS=None")):
        b = med(steps[new][0]) / med(steps[base][0])
        p = med(steps[new][1]) / med(steps[base][1])
        say(f"   {new} / {base}: back to back {b:.2f}x, paused {p:.2f}x")
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
