"""``ttg train-meter`` and ``ttg eval-meter`` as library functions: record trajectories, train a meter, measure it.

``train-meter`` records trajectories of several scripted policies (or reads given files), holds
out a fraction of whole trajectories, trains a meter (an encoder with a regression head, or a
causal LM with SFT then GRPO) and saves it with a report of sizes, timings and held-out figures.
``eval-meter`` records (or reads) trajectories on evaluation splits, adds step-quality labels
(ALFWorld planner, or annotations in the files) and reports the meter's figures per split.
The command-line flags are in :mod:`ttg_envs.cli.meter`; their defaults are here.
"""

from __future__ import annotations

import argparse
import json
import random
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ...cli_args import DEFAULT_ENV
from .record import DEFAULT_POLICIES, EVAL_POLICIES, collect_trajectories

__all__ = ["EVAL_DEFAULTS", "TRAIN_DEFAULTS", "evaluate", "train", "train_meter"]

#: Settings both commands share, by argument name.
COMMON_DEFAULTS: dict[str, Any] = {
    "env": DEFAULT_ENV,
    "env_kwargs": "{}",
    "policies": list(DEFAULT_POLICIES),
    "trajectories": None,
    "limit": None,
    "tasks": None,
    "workers": 2,
    "seed": 0,
    "threads": 1,
    "device": "auto",
}
#: ``ttg train-meter``'s settings and their defaults.
TRAIN_DEFAULTS: dict[str, Any] = {
    **COMMON_DEFAULTS,
    "splits": ["train"],
    "backbone": "encoder:tiny",
    "val_fraction": 0.1,
    "epochs": 6,
    "lr": 1e-3,
    "backbone_lr": None,
    "hidden": 64,
    "window": 0,
    "segment_tokens": 48,
    "keep_reasoning": False,
    "targets": "recorded",
    "turn_limit": 0,
    "delta_weight": 0.0,
    "mark_task_words": False,
    "batch_size": 16,
    "max_examples": None,
    "max_prompt_tokens": None,
    "sft_epochs": 1.0,
    "sft_lr": None,
    "grpo_steps": 0,
    "grpo_lr": None,
    "group_size": 8,
    "report_to": "none",
    "lora_r": 0,
    "lora_alpha": None,
    "lora_targets": None,
    "out": "runs/meter",
}
#: ``ttg eval-meter``'s settings and their defaults (``meter`` has none: it is required).
EVAL_DEFAULTS: dict[str, Any] = {
    **COMMON_DEFAULTS,
    "policies": list(EVAL_POLICIES),
    "splits": ["valid_seen", "valid_unseen"],
    "labels": "auto",
    "noop_every": 3,
    "failure_cost": None,
    "out": "runs/meter-eval",
}


def _setup(args: argparse.Namespace) -> str:
    import numpy as np
    import torch

    if args.threads:
        torch.set_num_threads(args.threads)
    random.seed(args.seed)
    np.random.seed(args.seed)
    torch.manual_seed(args.seed)
    return args.device if args.device != "auto" else ("cuda" if torch.cuda.is_available() else "cpu")


def train_meter(
    out: str | Path,
    *,
    env: str = "ttg/ALFWorld-v0",
    env_kwargs: dict[str, Any] | None = None,
    split: str = "train",
    tasks: Sequence[int] | None = None,
    policies: Sequence[str] = DEFAULT_POLICIES,
    **options: Any,
) -> Path:
    """``ttg train-meter`` as a function: record ``policies`` on ``split`` (``tasks``, else ``limit`` spread
    over it), train a meter and save it with its report under ``out``; returns the meter folder ``out/meter``.

    ``options`` are the other ``ttg train-meter`` settings by their dest names (``backbone="encoder:tiny"``,
    ``epochs=10``, ``seed=0``, ``workers=2``...); unset ones take the command's defaults.
    """
    unknown = set(options) - set(TRAIN_DEFAULTS)
    if unknown:
        raise TypeError(f"train_meter got unknown options: {', '.join(sorted(unknown))}")
    args = argparse.Namespace(
        **{
            **TRAIN_DEFAULTS,
            **options,
            "out": str(out),
            "env": env,
            "env_kwargs": json.dumps(env_kwargs or {}),
            "splits": [split],
            "tasks": None if tasks is None else [int(i) for i in tasks],
            "policies": list(policies),
        }
    )
    train(args)
    return Path(out) / "meter"


def train(args: argparse.Namespace) -> None:
    """``ttg train-meter`` with parsed arguments (see :data:`TRAIN_DEFAULTS` for their names)."""
    device = _setup(args)
    from ..tracking import RunReporter, open_trackers, parse_report_to

    # Opened first: a missing tracker fails before the recording starts.
    config = {k: v for k, v in vars(args).items() if k != "func"}
    reporter = RunReporter(open_trackers(parse_report_to(getattr(args, "report_to", None)), args.out, config), console=False)
    try:
        _train(args, device, reporter)
    finally:
        reporter.close()


def _train(args: argparse.Namespace, device: str, reporter: Any) -> None:
    """:func:`train` once its device and trackers are set up."""
    from .backbones import train_causal, train_encoder
    from .datasets import load_trajectories, split_trajectories

    out = Path(args.out)
    timings: dict[str, float] = {}
    start = time.perf_counter()
    if args.trajectories:
        paths = [Path(p) for p in args.trajectories]
    else:
        paths = [
            p
            for split in args.splits
            for p in collect_trajectories(
                args.env,
                json.loads(args.env_kwargs),
                split,
                args.policies,
                out / "trajectories",
                limit=args.limit,
                tasks=args.tasks,
                seed=args.seed,
                workers=args.workers,
                plan_lengths=args.targets == "expert",
            )
        ]
    timings["record_s"] = time.perf_counter() - start
    trajectories = load_trajectories(paths)
    train, val = split_trajectories(trajectories, args.val_fraction, seed=args.seed)
    print(f"{len(trajectories)} trajectories from {len(paths)} files: {len(train)} train, {len(val)} held out")
    kind, _, name = args.backbone.partition(":")
    start = time.perf_counter()
    if kind == "encoder":
        meter, train_stats = train_encoder(name, train, args, device, reporter)
    elif kind == "causal":
        meter, train_stats = train_causal(name, train, args, device, reporter)
    else:
        raise SystemExit(f"--backbone must start with encoder: or causal:, got {args.backbone!r}")
    timings["train_s"] = time.perf_counter() - start
    from ...wrappers.progress_meter import failure_cost_for
    from .evaluation import evaluate_meter

    failure_cost = failure_cost_for(args.env)
    held_out = evaluate_meter(meter, val, failure_cost=failure_cost).to_dict() if val else None
    reporter.log(held_out or {}, reporter.steps, prefix="held_out/")
    reporter.log(timings, reporter.steps, prefix="time/")
    report = {
        "backbone": args.backbone,
        "device": device,
        "trajectories": {
            "files": [str(p) for p in paths],
            "train": len(train),
            "held_out": len(val),
            "train_prefixes": sum(t.num_steps for t in train),
        },
        "timings": timings,
        "train": train_stats,
        "held_out": held_out,
        "config": {k: v for k, v in vars(args).items() if k != "func"},
    }
    meter.save_pretrained(out / "meter", extra={"train_report": {k: report[k] for k in ("backbone", "trajectories", "timings")}})
    (out / "train_report.json").write_text(json.dumps(report, indent=1, default=str))
    print(f"recorded in {timings['record_s']:.1f} s, trained in {timings['train_s']:.1f} s on {device}; meter saved to {out / 'meter'}")
    if held_out:
        print(
            f"held-out prefixes: completion accuracy {held_out['completion_accuracy']:.3f}, "
            f"token accuracy {held_out['token_accuracy'] or 0:.3f}"
            + (
                " (against each trajectory's own outcome and TTG; an expert-target meter predicts the expert roll-out's)"
                if args.targets == "expert"
                else ""
            )
        )


def evaluate(args: argparse.Namespace) -> int:
    """``ttg eval-meter`` with parsed arguments (see :data:`EVAL_DEFAULTS`)."""
    device = _setup(args)
    from ...meters.loading import load_meter
    from ...registry import make_policy
    from ...runner import has_planner
    from ...wrappers.progress_meter import failure_cost_for
    from .datasets import load_trajectories
    from .evaluation import evaluate_meter, label_alfworld, markdown_report, noop_preference

    out = Path(args.out)
    env_kwargs = json.loads(args.env_kwargs)
    kwargs = {"device": device} if not args.meter.startswith(("openai:", "vllm:")) else {}
    meter = load_meter(args.meter, **kwargs)
    failure_cost = args.failure_cost or failure_cost_for(args.env)
    sets: dict[str, list] = {}
    if args.trajectories:  # one report per split the recorded tasks belong to
        for traj in load_trajectories(args.trajectories):
            sets.setdefault(str(traj.task.get("split", "given")), []).append(traj)
    else:
        for split in args.splits:
            sets[split] = load_trajectories(
                collect_trajectories(
                    args.env,
                    env_kwargs,
                    split,
                    args.policies,
                    out / "trajectories",
                    limit=args.limit,
                    tasks=args.tasks,
                    seed=args.seed,
                    workers=args.workers,
                    plan_lengths=args.labels != "none",
                )
            )
    reports = {}
    timings = {}
    for name, trajectories in sets.items():
        if args.labels == "alfworld":  # replay what was recorded without plan lengths (slow)
            label_alfworld([t for t in trajectories if t.step_labels is None], env_kwargs)
        elif args.labels == "none":
            for t in trajectories:
                t.step_labels = None
        start = time.perf_counter()
        reports[name] = evaluate_meter(meter, trajectories, failure_cost=failure_cost)
        timings[name] = time.perf_counter() - start
        if args.noop_every and trajectories and has_planner(args.env, {**env_kwargs, "split": name}):
            expert = make_policy(args.env, "expert")
            noop = noop_preference(
                meter,
                args.env,
                trajectories,
                respond=expert.respond,
                failure_cost=failure_cost,
                env_kwargs=env_kwargs,
                every=args.noop_every,
            )
            reports[name].noop = noop.to_dict()
    table = markdown_report(reports)
    out.mkdir(parents=True, exist_ok=True)
    (out / "eval_report.json").write_text(
        json.dumps(
            {
                "meter": args.meter,
                "failure_cost": failure_cost,
                "eval_seconds": timings,
                "reports": {k: r.to_dict() for k, r in reports.items()},
                "config": {k: v for k, v in vars(args).items() if k != "func"},
            },
            indent=1,
            default=str,
        )
    )
    (out / "eval_report.md").write_text(table + "\n")
    print(table)
    print(f"\nreport in {out}/eval_report.json and eval_report.md")
    return 0
