"""Where DeltaTTG's credit goes on the trainer's own ALFWorld rollouts, against the planner's step labels.

The paper-size comparison (README, "The paper-size comparison") has grpo learning held out and
delta_ttg not; the only difference between the two is the per-step credit the meter gives. This
script measures that credit without training: the committed tiny start
(``benchmarks/results/train_compare/start``) plays ``--batches`` trainer rollout batches
(``Trainer.rollout``: the same envs, window, sampler and meter wrapper as ``train_compare.py``), every
state is labelled by the planner (good: the plan got shorter; bad: longer; neutral: equal), and for
each estimator the advantage every step receives is read from the trainer's own
``episode_advantages``. Printed per estimator:

- **mean advantage on good / neutral / bad steps**, and the **separation** good minus bad: grpo's
  is what outcome credit alone gives (a winning episode's steps are more often good); a credit
  that helps has a larger one;
- **last-step share**: the mean fraction of a failed episode's negative credit on its last step;
- for the meter, its **step accuracy on the policy's own steps** (the sign of the cost change
  against the label; the last step's cost anchored by the outcome, as credit reads it) and how
  many episodes have a **completion flip** (the meter's can-complete estimate changing between
  two non-terminal states, where C = 16,384 enters the change);
- ``oracle``: the same DeltaTTG allocation with the planner's plan length as the cost (each step
  priced at the episode's mean tokens per action; the terminal cost anchored as eq. 7), i.e. what a
  perfect meter blind to the turn limit would give; ``oracle_budget`` also costs C wherever the plan
  no longer fits in the turns left (a perfect budget-aware meter).

    PYTHONPATH=. python benchmarks/diagnose_credit.py [--batches 2] [--meter ttg/ALFWorld-v0] [--out FILE.json]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import train_compare  # noqa: E402  (the comparison's own envs, window, pool and start)

START = Path(__file__).resolve().parent / "results" / "train_compare" / "start"


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--meter", default="ttg/ALFWorld-v0", help="load_meter spec (default: the shipped ALFWorld meter)")
    p.add_argument("--start", default=str(START))
    p.add_argument("--batches", type=int, default=2, help="rollout batches (each --tasks-per-step x --group-size episodes)")
    p.add_argument("--tasks-per-step", type=int, default=16)
    p.add_argument("--group-size", type=int, default=8)
    p.add_argument("--max-turns", type=int, default=15)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--out", default=None, help="write the figures as JSON here")
    return p.parse_args(argv)


def rollouts(args) -> tuple[list[Any], Any]:
    """``--batches`` rollout batches of the start through a delta_ttg trainer (no update)."""
    import torch

    from ttg_envs.meters import load_meter
    from ttg_envs.training.actor.admissible import AdmissibleGenerator
    from ttg_envs.training.actor.trainer import TrainConfig, Trainer

    torch.set_num_threads(args.threads)
    cmp = train_compare.parse_args(["--max-turns", str(args.max_turns)])
    model, tokenizer = train_compare.load_start(Path(args.start))
    config = TrainConfig(
        env_id=train_compare.ENV_ID,
        env_kwargs=train_compare.env_kwargs(cmp, "train"),
        estimator="delta_ttg",
        tasks_per_step=args.tasks_per_step,
        group_size=args.group_size,
        max_turns=args.max_turns,
        max_tokens_per_turn=train_compare.max_tokens(cmp),
        task_indices=train_compare.train_pool(cmp),
        window_turns=train_compare.window(cmp).turns,
        max_prompt_tokens=train_compare.window(cmp).max_prompt_tokens,
        seed=args.seed,
        out_dir=str(Path("/tmp") / "diagnose_credit"),
    )
    trainer = Trainer(config, model, tokenizer, meter=load_meter(args.meter), generator=AdmissibleGenerator(model, tokenizer))
    batches = []
    for b in range(args.batches):
        # The policy samples from torch's generator: seeded, every meter sees the same episodes.
        torch.manual_seed(1_000_003 * args.seed + b)
        batches.append(trainer.rollout(np.random.default_rng([args.seed, b])))
    return batches, tokenizer


def plan_lengths(episodes, tokenizer, env) -> tuple[list[list[int | None]], list[list[bool]]]:
    """The planner's plan length at h_0..h_T of each episode, by replaying its decoded actions, and
    per action whether it left the task state (``task_state_key()``) as it was: a no-op."""
    from ttg_envs.wrappers.plan_length import plan_length

    base = env.unwrapped
    out, noops = [], []
    for ep in episodes:
        base.reset(seed=0, options={"task_index": ep.task_index})
        lengths, keys = [plan_length(base)], [base.task_state_key()]
        for action in ep.actions:
            _, _, terminated, _, info = base.step(tokenizer.decode(action, skip_special_tokens=True).strip())
            lengths.append(0 if info.get("success") else plan_length(base))
            keys.append(base.task_state_key())
            if terminated:
                break
        if len(lengths) != ep.num_steps + 1 or bool(lengths[-1] == 0) != bool(ep.success):
            raise RuntimeError(f"task {ep.task_index}: the replay did not follow the episode")
        out.append(lengths)
        noops.append([a == b for a, b in zip(keys, keys[1:])])
    return out, noops


def labels_from(lengths: list[int | None]) -> list[int]:
    """+1 / 0 / -1 per action: the plan got shorter / stayed / got longer (0 where unknown)."""
    from ttg_envs.training.meter.datasets import step_labels_from_plan_lengths

    return step_labels_from_plan_lengths(lengths)


def oracle_costs(ep, lengths: list[int | None], failure_cost: float, max_turns: int | None = None) -> list[float]:
    """Eq. 7 costs from the plan length: plan steps x the episode's mean tokens per action; C where
    unknown, and with ``max_turns`` also where the plan no longer fits in the turns left."""
    per_step = float(np.mean([len(a) for a in ep.actions]))
    fits = [n is not None and (max_turns is None or n <= max_turns - t) for t, n in enumerate(lengths[:-1])]
    costs = [n * per_step if ok else failure_cost for n, ok in zip(lengths[:-1], fits)]
    return [*costs, 0.0 if ep.success else failure_cost]


def oracle_advantages(episodes, lengths, failure_cost: float, max_turns: int | None = None) -> np.ndarray:
    """DeltaTTG advantages ``[B, T_max]`` with :func:`oracle_costs` in place of the meter's."""
    from ttg_envs.training.actor.advantages import step_advantages

    costs = [oracle_costs(e, n, failure_cost, max_turns) for e, n in zip(episodes, lengths)]
    out = step_advantages(
        "delta_ttg",
        np.array([e.reward for e in episodes], dtype=float),
        np.array([e.group for e in episodes]),
        [e.num_steps for e in episodes],
        can_complete=[[c < failure_cost for c in row[:-1]] for row in costs],
        remaining=[[float(c) for c in row[:-1]] for row in costs],
        valid=[[True] * e.num_steps for e in episodes],
        success=[e.success for e in episodes],
        n_tokens=[[len(a) for a in e.actions] for e in episodes],
        costs=costs,
    )
    return out.double().numpy()


def credit_figures(episodes, labels, noops, advantages, returns) -> dict[str, Any]:
    """Mean advantage per label (no-ops apart from the other neutral steps), separation, and the
    last-step share of failed episodes' negative credit."""
    by: dict[Any, list[float]] = {1: [], 0: [], -1: [], "noop": []}
    last_share = []
    for b, ep in enumerate(episodes):
        adv = advantages[b, : ep.num_steps]
        for t, lab in enumerate(labels[b]):
            by[lab].append(float(adv[t]))
            if noops[b][t]:
                by["noop"].append(float(adv[t]))
        if returns[b] < 0 and ep.num_steps > 1:
            neg = np.clip(-adv, 0, None)
            if neg.sum() > 0:
                last_share.append(float(neg[-1] / neg.sum()))
    mean = {k: float(np.mean(v)) if v else None for k, v in by.items()}
    return {
        "good": mean[1],
        "neutral": mean[0],
        "bad": mean[-1],
        "noop": mean["noop"],
        "separation": None if None in (mean[1], mean[-1]) else mean[1] - mean[-1],
        "last_step_share_failed": float(np.mean(last_share)) if last_share else None,
        "steps": {str(k): len(v) for k, v in by.items()},
    }


def meter_figures(episodes, labels) -> dict[str, Any]:
    """The meter's step accuracy on these steps (costs as credit reads them) and completion flips."""
    hits = {1: [], -1: []}
    flips = 0
    for ep, labs in zip(episodes, labels):
        costs = np.array([i["ttg_cost"] for i in ep.infos[: ep.num_steps + 1]], dtype=float)
        deltas = costs[:-1] - costs[1:]
        for lab, d in zip(labs, deltas):
            if lab:
                hits[lab].append(bool(np.sign(d) == lab))
        can = ep.state_field("ttg_can_complete", False)[: ep.num_steps]
        flips += any(a != b for a, b in zip(can, can[1:]))
    good, bad = (float(np.mean(hits[k])) if hits[k] else None for k in (1, -1))
    return {
        "good_step_accuracy": good,
        "bad_step_accuracy": bad,
        "balanced_step_accuracy": None if None in (good, bad) else (good + bad) / 2,
        "episodes_with_completion_flip": flips / len(episodes),
    }


def main(argv=None) -> int:
    """Roll out, label, and print the credit figures of grpo, delta_ttg and the oracle."""
    import gymnasium as gym

    import ttg_envs  # noqa: F401
    from ttg_envs.training.actor.advantages import episode_advantages

    args = parse_args(argv)
    begin = time.perf_counter()
    batches, tokenizer = rollouts(args)
    cmp = train_compare.parse_args(["--max-turns", str(args.max_turns)])
    env = gym.make(train_compare.ENV_ID, max_steps=args.max_turns, **train_compare.env_kwargs(cmp, "train"))
    result: dict[str, Any] = {"args": vars(args), "batches": []}
    pooled: dict[str, list] = {k: [] for k in ("episodes", "labels", "noops", "grpo", "delta_ttg", "oracle", "oracle_budget")}
    for episodes in batches:
        lengths, noops = plan_lengths(episodes, tokenizer, env)
        labels = [labels_from(x) for x in lengths]
        failure_cost = float(episodes[0].infos[-1].get("ttg_failure_cost", 16384.0))
        grpo = episode_advantages(episodes, "grpo").double().numpy()
        delta = episode_advantages(episodes, "delta_ttg").double().numpy()
        for key, value in (
            ("episodes", episodes),
            ("labels", labels),
            ("noops", noops),
            ("grpo", list(grpo)),
            ("delta_ttg", list(delta)),
            ("oracle", list(oracle_advantages(episodes, lengths, failure_cost))),
            ("oracle_budget", list(oracle_advantages(episodes, lengths, failure_cost, args.max_turns))),
        ):
            pooled[key].extend(value)
    env.close()
    episodes, labels = pooled["episodes"], pooled["labels"]
    width = max(e.num_steps for e in episodes)

    def stack(rows):
        return np.stack([np.pad(r[:width], (0, max(0, width - len(r)))) for r in rows])

    returns = stack(pooled["grpo"])[:, 0]
    result["success_rate"] = float(np.mean([e.success for e in episodes]))
    result["episodes"] = len(episodes)
    result["credit"] = {
        name: credit_figures(episodes, labels, pooled["noops"], stack(pooled[name]), returns)
        for name in ("grpo", "delta_ttg", "oracle", "oracle_budget")
    }
    result["meter"] = meter_figures(episodes, labels)
    result["wall_s"] = round(time.perf_counter() - begin, 1)
    print(f"{len(episodes)} episodes of the start at {args.max_turns} turns, success {result['success_rate']:.1%}; meter {args.meter}")
    print(
        "| credit | mean adv. good | neutral | of which no-ops | bad | separation (good - bad) | failed: last step's share of negative credit |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|")
    for name, c in result["credit"].items():
        noop = "-" if c["noop"] is None else f"{c['noop']:+.3f}"
        print(
            f"| {name} | {c['good']:+.3f} | {c['neutral']:+.3f} | {noop} | {c['bad']:+.3f} | {c['separation']:+.3f} "
            f"| {c['last_step_share_failed'] or 0:.2f} |"
        )
    m = result["meter"]
    print(
        f"meter on the policy's own steps: good {m['good_step_accuracy']:.1%}, bad {m['bad_step_accuracy']:.1%}, "
        f"balanced {m['balanced_step_accuracy']:.1%}; episodes with a completion flip {m['episodes_with_completion_flip']:.1%}"
    )
    print(f"steps by label: {result['credit']['grpo']['steps']}  ({result['wall_s']} s)")
    if args.out:
        Path(args.out).write_text(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
