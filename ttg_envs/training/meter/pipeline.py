"""``ttg train-meter`` and ``ttg eval-meter`` as library functions: record trajectories, train a meter, measure it.

``train-meter`` records trajectories of several scripted policies (or reads given files), holds
out a fraction of whole trajectories, trains a meter (an encoder with a regression head, or a
causal LM with SFT then GRPO) and saves it with a report of sizes, timings and held-out figures.
``eval-meter`` records (or reads) trajectories on evaluation splits, adds step-quality labels
(ALFWorld planner, the gold path of BFCL and tau2, or annotations in the files) and reports the meter's figures per split.
The settings and their defaults are :mod:`.config`'s dataclasses; the flags are in :mod:`ttg_envs.cli.meter`.
"""

from __future__ import annotations

import json
import random
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .config import EVAL_DEFAULTS, TRAIN_DEFAULTS, MeterEvalConfig, MeterRunConfig, MeterTrainConfig, report_config
from .record import DEFAULT_POLICIES, collect_trajectories

__all__ = ["EVAL_DEFAULTS", "TRAIN_DEFAULTS", "MeterEvalConfig", "MeterTrainConfig", "evaluate", "train", "train_meter"]


def _seed(seed: int) -> None:
    """Seed Python's, numpy's and torch's global RNGs."""
    import numpy as np
    import torch

    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def _setup(config: MeterRunConfig) -> str:
    import torch

    if config.threads:
        torch.set_num_threads(config.threads)
    _seed(config.seed)
    return config.device if config.device != "auto" else ("cuda" if torch.cuda.is_available() else "cpu")


def _record(config: MeterRunConfig, split: str, out: Path, *, plan_lengths: bool) -> list[Path]:
    """The trajectory files of ``config.policies`` recorded on ``split`` under ``out/trajectories``."""
    return collect_trajectories(
        config.env,
        config.env_kwargs,
        split,
        config.policies,
        out / "trajectories",
        limit=config.limit,
        tasks=config.tasks,
        seed=config.seed,
        workers=config.workers,
        plan_lengths=plan_lengths,
        episodes_per_task=config.episodes_per_task,
    )


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

    ``options`` are the other :class:`MeterTrainConfig` settings (``backbone="encoder:tiny"``,
    ``epochs=10``, ``seed=0``, ``workers=2``...); unset ones take its defaults.
    """
    unknown = set(options) - set(TRAIN_DEFAULTS)
    if unknown:
        raise TypeError(f"train_meter got unknown options: {', '.join(sorted(unknown))}")
    config = MeterTrainConfig(
        **{
            **options,
            "out": str(out),
            "env": env,
            "env_kwargs": dict(env_kwargs or {}),
            "splits": (split,),
            "tasks": None if tasks is None else [int(i) for i in tasks],
            "policies": tuple(policies),
        }
    )
    train(config)
    return Path(out) / "meter"


def train(config: MeterTrainConfig) -> None:
    """``ttg train-meter``: record (or read) trajectories, train the meter, save it with its report."""
    device = _setup(config)
    from ..tracking import RunReporter, open_trackers, parse_report_to

    # Opened first: a missing tracker fails before the recording starts.
    reporter = RunReporter(open_trackers(parse_report_to(config.report_to), config.out, report_config(config)), console=False)
    try:
        _train(config, device, reporter)
    finally:
        reporter.close()


def _train(config: MeterTrainConfig, device: str, reporter: Any) -> None:
    """:func:`train` once its device and trackers are set up."""
    from .backbones import train_causal, train_encoder
    from .datasets import load_trajectories, split_trajectories

    out = Path(config.out)
    timings: dict[str, float] = {}
    start = time.perf_counter()
    if config.trajectories:
        paths = [Path(p) for p in config.trajectories]
    else:
        paths = [p for split in config.splits for p in _record(config, split, out, plan_lengths=config.targets == "expert")]
    timings["record_s"] = time.perf_counter() - start
    trajectories = load_trajectories(paths)
    train, val = split_trajectories(trajectories, config.val_fraction, seed=config.seed)
    print(f"{len(trajectories)} trajectories from {len(paths)} files: {len(train)} train, {len(val)} held out")
    if config.targets in ("gold", "gold-prefix"):  # the tool envs: gold's remaining moves from every state
        from .evaluation import label_gold_path

        start = time.perf_counter()
        label_gold_path(train, config.env, config.env_kwargs, targets=True, replay=config.targets == "gold")
        timings["gold_targets_s"] = time.perf_counter() - start
    if config.gold_siblings:
        if config.targets not in ("gold", "gold-prefix"):
            raise SystemExit("--gold-siblings needs --targets gold (the gold path's positions and targets)")
        from .siblings import add_gold_siblings

        start = time.perf_counter()
        made = add_gold_siblings(train, config.env, env_kwargs=config.env_kwargs, per_state=config.gold_siblings, seed=config.seed)
        timings["siblings_s"] = time.perf_counter() - start
        print(f"{made} gold siblings from {len(train)} trajectories")
    if config.noop_siblings:
        from ...registry import make_policy
        from .siblings import add_noop_siblings

        start = time.perf_counter()
        made = add_noop_siblings(
            train,
            config.env,
            respond=make_policy(config.env, "expert").respond,
            per_state=config.noop_siblings,
            seed=config.seed,
            env_kwargs=config.env_kwargs,
            best=config.best_siblings,
        )
        timings["siblings_s"] = time.perf_counter() - start
        print(f"{made} {'no-op and best' if config.best_siblings else 'no-op'} siblings from {len(train)} trajectories")
    kind, _, name = config.backbone.partition(":")
    start = time.perf_counter()
    if kind == "encoder" and config.ensemble > 1:
        meter, train_stats = _train_ensemble(name, train, config, device, reporter)
    elif kind == "encoder":
        meter, train_stats = train_encoder(name, train, config, device, reporter)
    elif config.ensemble > 1:
        raise SystemExit("--ensemble trains encoder meters (--backbone encoder:...)")
    elif kind == "causal":
        meter, train_stats = train_causal(name, train, config, device, reporter)
    else:
        raise SystemExit(f"--backbone must start with encoder: or causal:, got {config.backbone!r}")
    timings["train_s"] = time.perf_counter() - start
    from ...registry import failure_cost as failure_cost_for
    from .evaluation import evaluate_meter

    failure_cost = failure_cost_for(config.env)
    held_out = evaluate_meter(meter, val, failure_cost=failure_cost).to_dict() if val else None
    reporter.log(held_out or {}, reporter.steps, prefix="held_out/")
    reporter.log(timings, reporter.steps, prefix="time/")
    report = {
        "backbone": config.backbone,
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
        "config": report_config(config),
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
                if config.targets == "expert"
                else ""
            )
        )


def _train_ensemble(name: str, train: list, config: MeterTrainConfig, device: str, reporter: Any):
    """``config.ensemble`` encoder meters trained on ``train``, member k from seed ``config.seed + k``,
    as one :class:`~ttg_envs.meters.ensemble.EnsembleMeter`; (meter, stats with each member's)."""
    from dataclasses import replace

    from ...meters.ensemble import EnsembleMeter
    from .backbones import train_encoder

    members, stats = [], []
    for k in range(config.ensemble):
        seed = config.seed + k
        _seed(seed)
        print(f"ensemble member {k + 1} of {config.ensemble} (seed {seed})")
        meter, member_stats = train_encoder(name, train, replace(config, seed=seed), device, reporter)
        members.append(meter)
        stats.append(member_stats)
    return EnsembleMeter(members), {"members": stats}


def _carried_steps(env_id: str, env_kwargs: dict[str, Any], trajectories: list, unchanged: Any) -> list[list[bool]]:
    """For each trajectory, which of its actions left the task state unchanged (one env per split;
    a ``ValueError`` for an env that declares no task state)."""
    import gymnasium as gym

    envs: dict[str, Any] = {}
    try:
        out = []
        for traj in trajectories:
            split = str(traj.task.get("split", "train"))
            if split not in envs:
                envs[split] = gym.make(env_id, **{"split": split, **env_kwargs})
                if not getattr(envs[split].unwrapped, "declares_task_state", False):
                    raise ValueError(f"--carry-noops: {env_id} declares no task state (task_state_key)")
            out.append(unchanged(traj, envs[split]))
        return out
    finally:
        for env in envs.values():
            env.close()


def evaluate(config: MeterEvalConfig) -> int:
    """``ttg eval-meter``: record (or read) trajectories, label them, report the meter's figures per split."""
    device = _setup(config)
    from ...meters.loading import load_meter
    from ...registry import env_spec, has_planner, make_policy
    from ...registry import failure_cost as failure_cost_for
    from .datasets import load_trajectories
    from .evaluation import evaluate_meter, label_alfworld, label_gold_path, markdown_report, noop_preference, task_state_unchanged

    out = Path(config.out)
    env_kwargs = config.env_kwargs
    kwargs = {"device": device} if not config.meter.startswith(("openai:", "vllm:")) else {}
    meter = load_meter(config.meter, **kwargs)
    failure_cost = config.failure_cost or failure_cost_for(config.env)
    sets: dict[str, list] = {}
    if config.trajectories:  # one report per split the recorded tasks belong to
        for traj in load_trajectories(config.trajectories):
            sets.setdefault(str(traj.task.get("split", "given")), []).append(traj)
    else:
        for split in config.splits:
            sets[split] = load_trajectories(_record(config, split, out, plan_lengths=config.labels != "none"))
    reports = {}
    timings = {}
    for name, trajectories in sets.items():
        if config.labels == "alfworld":  # replay what was recorded without plan lengths (slow)
            label_alfworld([t for t in trajectories if t.step_labels is None], env_kwargs)
        elif config.labels == "gold" or (config.labels == "auto" and "gold" in env_spec(config.env).policy_names):
            label_gold_path([t for t in trajectories if t.step_labels is None], config.env, env_kwargs)
        elif config.labels == "none":
            for t in trajectories:
                t.step_labels = None
        start = time.perf_counter()
        reports[name] = evaluate_meter(meter, trajectories, failure_cost=failure_cost)
        timings[name] = time.perf_counter() - start
        if config.carry_noops and trajectories:  # the same figures as ProgressMeterWrapper(carry_noops=True) gives them
            carried = _carried_steps(config.env, env_kwargs, trajectories, task_state_unchanged)
            both = evaluate_meter(meter, trajectories, failure_cost=failure_cost, carried=carried, progress=False)
            reports[name].carried = {k: v for k, v in both.to_dict().items() if not isinstance(v, dict) or k == "steps"}
        if config.noop_every and trajectories and has_planner(config.env):
            expert = make_policy(config.env, "expert")
            noop = noop_preference(
                meter,
                config.env,
                trajectories,
                respond=expert.respond,
                failure_cost=failure_cost,
                env_kwargs=env_kwargs,
                every=config.noop_every,
                carry_noops=config.carry_noops,
            )
            reports[name].noop = noop.to_dict()
    table = markdown_report(reports)
    out.mkdir(parents=True, exist_ok=True)
    (out / "eval_report.json").write_text(
        json.dumps(
            {
                "meter": config.meter,
                "failure_cost": failure_cost,
                "eval_seconds": timings,
                "reports": {k: r.to_dict() for k, r in reports.items()},
                "config": report_config(config),
            },
            indent=1,
            default=str,
        )
    )
    (out / "eval_report.md").write_text(table + "\n")
    print(table)
    print(f"\nreport in {out}/eval_report.json and eval_report.md")
    return 0
