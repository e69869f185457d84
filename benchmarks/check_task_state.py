"""Check ALFWorld's task-state claim: a step that leaves ``task_state_key`` unchanged leaves the
planner's plan length unchanged.

Walks noisy-expert episodes on train tasks and, at every ``--every``-th state, tries every
admissible command plus ``help`` and an invalid command in branches; for each branch whose task key
equals the state's, compares the exact plan length (``expert_plan()``) before and after. With
``--no-repair`` every plan is the planner's own search (no reuse of an earlier state's plan).

    PYTHONPATH=. python benchmarks/check_task_state.py --tasks 20 --every 3
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import Counter

import gymnasium as gym

import ttg_envs  # noqa: F401
from ttg_envs.envs.alfworld.policies import make_policy, react
from ttg_envs.wrappers.branching import branch
from ttg_envs.wrappers.plan_length import plan_length


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--split", default="train")
    parser.add_argument("--tasks", type=int, default=20)
    parser.add_argument("--stride", type=int, default=7, help="tasks with index % stride == 1")
    parser.add_argument("--every", type=int, default=3)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--eps", type=float, default=0.5)
    parser.add_argument("--no-repair", action="store_true")
    args = parser.parse_args()
    env = gym.make("ttg/ALFWorld-v0", split=args.split, max_steps=1000, plan_repair=not args.no_repair)
    base = env.unwrapped
    counts: Counter = Counter()
    mismatches = []
    start = time.process_time()
    indices = [i for i in range(base.num_tasks) if i % args.stride == 1][: args.tasks]
    for index in indices:
        env.reset(seed=0, options={"task_index": index})
        policy = make_policy("noisy_expert", seed=index, eps=args.eps)
        for t in range(args.steps):
            if t % args.every == 0:
                key, before = base.task_state_key(), plan_length(base)
                commands = [*base.admissible_commands, "help", "fly to the moon"]
                for command in dict.fromkeys(commands):
                    child = branch(env)
                    _, _, terminated, _, info = child.step(react(command))
                    cb = child.unwrapped
                    same = cb.task_state_key() == key
                    counts["same_key" if same else "changed_key"] += 1
                    if same:
                        counts["same_key_" + command.split()[0]] += 1
                        after = plan_length(cb)
                        if after != before:
                            mismatches.append({"task": index, "t": t, "command": command, "before": before, "after": after})
                    elif command.split()[0] in ("help", "look", "inventory", "examine") or not info["action_valid"]:
                        counts["noop_verb_changed_key"] += 1
                    child.close()
            _, _, terminated, truncated, _ = env.step(policy(env))
            if terminated or truncated:
                break
        print(f"task {index}: {counts['same_key']} steps kept the task state, {len(mismatches)} plan changes", file=sys.stderr, flush=True)
    print(
        json.dumps(
            {
                "tasks": len(indices),
                "repair": not args.no_repair,
                "counts": dict(counts),
                "mismatches": mismatches,
                "cpu_s": round(time.process_time() - start, 1),
            },
            indent=1,
        )
    )
    env.close()


if __name__ == "__main__":
    main()
