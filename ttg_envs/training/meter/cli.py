"""``ttg train-meter`` and ``ttg eval-meter``: collect trajectories, train a meter, measure it.

``train-meter`` records trajectories of several scripted policies (or reads given files), holds
out a fraction of whole trajectories, trains a meter (an encoder with a regression head, or a
causal LM with SFT then GRPO) and saves it with a report of sizes, timings and held-out figures.
``eval-meter`` records (or reads) trajectories on evaluation splits, adds step-quality labels
(ALFWorld planner, or annotations in the files) and reports the meter's figures per split.
"""

from __future__ import annotations

import argparse
import json
import random
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ...cli_args import positive_int

DEFAULT_POLICIES = ("expert", "noisy_expert:0.25", "noisy_expert:0.5", "noisy_expert:1")
#: Evaluation policies: the planner's labels after long random walks cost minutes per state.
EVAL_POLICIES = ("expert", "noisy_expert:0.25", "noisy_expert:0.5")


def collect_trajectories(env_id: str, env_kwargs: dict[str, Any], split: str, policies: Sequence[str], out: Path, *,
                         limit: int | None = None, tasks: Sequence[int] | None = None, seed: int = 0, workers: int = 1,
                         plan_lengths: bool = False) -> list[Path]:
    """Record one episode per task and policy on ``split``; returns the trajectory files (one per policy).

    The tasks are ``tasks`` (indices) when given, else ``limit`` tasks spread over the split.
    Episodes go through the episode runner (:func:`ttg_envs.runner.run_tasks`): every policy plays
    a task in the same env, so each game loads once, and tasks spread over ``workers`` processes.
    ``plan_lengths`` records the planner's plan length at every state (ALFWorld; step-quality
    labels for evaluation; it costs a planner call per step, slow after random actions).
    """
    from ...registry import parse_policy
    from ...runner import EpisodeTask, has_planner, num_tasks, run_tasks, spread_indices

    env_kwargs = {"split": split, **env_kwargs}
    n = num_tasks(env_id, env_kwargs)
    indices = list(spread_indices(n, limit)) if tasks is None else [int(i) for i in tasks]
    if any(not 0 <= i < n for i in indices):
        raise ValueError(f"task indices must lie in 0..{n - 1} for split {split!r}; got {indices}")
    out.mkdir(parents=True, exist_ok=True)
    labels = [parse_policy(spec).file_label for spec in policies]
    paths = [out / f"{split}-{label}.jsonl" for label in labels]
    for path in paths:
        path.unlink(missing_ok=True)  # the recorder appends
    episodes = [EpisodeTask(env_id, env_kwargs, index, seed, spec, label=label, record=str(path), plan_lengths=plan_lengths)
                for index in indices for spec, label, path in zip(policies, labels, paths)]
    results = run_tasks(episodes, workers=workers, desc=f"record {split}")
    if has_planner(env_id, env_kwargs):
        print(f"record {split}: planner time limit hit {sum(r.planner_timeouts for r in results)} times")
    return paths


def _setup(args: argparse.Namespace) -> str:
    import numpy as np
    import torch

    if args.threads:
        torch.set_num_threads(args.threads)
    random.seed(args.seed)
    np.random.seed(args.seed)
    torch.manual_seed(args.seed)
    return args.device if args.device != "auto" else ("cuda" if torch.cuda.is_available() else "cpu")


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--env", default="ttg/ALFWorld-v0", help="registered env id (default: %(default)s)")
    p.add_argument("--env-kwargs", default="{}", help="JSON dict of extra gym.make kwargs")
    p.add_argument("--policies", nargs="+", default=list(DEFAULT_POLICIES),
                   help="scripted policies as name[:eps] (default: %(default)s)")
    p.add_argument("--trajectories", nargs="+", help="read these trajectory files instead of recording")
    p.add_argument("--limit", type=positive_int, default=None, help="N tasks of each split, spread evenly over it (default: all)")
    p.add_argument("--tasks", type=int, nargs="+", default=None, help="these task indices instead of --limit")
    p.add_argument("--workers", type=positive_int, default=2, help="rollout processes (default: %(default)s)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=1, help="torch CPU threads (0: torch's default)")
    p.add_argument("--device", default="auto", help="cpu, cuda, or auto")


# ---------------------------------------------------------------------------------- train-meter
def train_parser() -> argparse.ArgumentParser:
    """Arguments of ``ttg train-meter``."""
    p = argparse.ArgumentParser(prog="ttg train-meter", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    _common(p)
    p.add_argument("--split", default="train", help="split to record on (default: %(default)s)")
    p.add_argument("--backbone", default="encoder:tiny",
                   help="encoder:tiny | encoder:minilm | encoder:<path> | causal:tiny | causal:<name-or-path> (default: %(default)s)")
    p.add_argument("--val-fraction", type=float, default=0.1, help="held-out share of trajectories (default: %(default)s)")
    p.add_argument("--epochs", type=positive_int, default=6, help="encoder: epochs (default: %(default)s)")
    p.add_argument("--lr", type=float, default=1e-3, help="encoder: head learning rate")
    p.add_argument("--backbone-lr", type=float, default=None, help="encoder: backbone learning rate (default 5e-4 tiny, 0 = frozen otherwise)")
    p.add_argument("--hidden", type=int, default=64, help="encoder head / tiny model width (default: %(default)s)")
    p.add_argument("--window", type=int, default=0, help="encoder: read only the last N action segments after the task (default: 0, all)")
    p.add_argument("--segment-tokens", type=int, default=48, help="encoder: tokens read per segment (default: %(default)s)")
    p.add_argument("--keep-reasoning", action="store_true", help="encoder: also read <think> blocks of agent messages")
    p.add_argument("--batch-size", type=int, default=16)
    p.add_argument("--max-examples", type=int, default=None, help="causal: subsample SFT prefixes")
    p.add_argument("--max-prompt-tokens", type=int, default=None, help="causal: meter prompt budget (default 384 tiny, 6144 otherwise)")
    p.add_argument("--sft-epochs", type=float, default=1.0)
    p.add_argument("--sft-lr", type=float, default=None, help="causal: SFT learning rate (default 1e-5; 2e-3 for tiny)")
    p.add_argument("--grpo-steps", type=int, default=0, help="causal: GRPO steps after SFT (default: %(default)s)")
    p.add_argument("--grpo-lr", type=float, default=None, help="causal: GRPO learning rate (default 3e-6; 2e-4 for tiny)")
    p.add_argument("--group-size", type=int, default=8)
    p.add_argument("--out", default="runs/meter", help="output folder; the meter goes to OUT/meter (default: %(default)s)")
    return p


def train_main(argv: Sequence[str]) -> int:
    """Entry point of ``ttg train-meter``."""
    _train(train_parser().parse_args(list(argv)))
    return 0


def train_meter(out: str | Path, *, env: str = "ttg/ALFWorld-v0", env_kwargs: dict[str, Any] | None = None,
                split: str = "train", tasks: Sequence[int] | None = None, policies: Sequence[str] = DEFAULT_POLICIES,
                **options: Any) -> Path:
    """``ttg train-meter`` as a function: record ``policies`` on ``split`` (``tasks``, else ``limit`` spread
    over it), train a meter and save it with its report under ``out``; returns the meter folder ``out/meter``.

    ``options`` are the other ``ttg train-meter`` settings by their dest names (``backbone="encoder:tiny"``,
    ``epochs=10``, ``seed=0``, ``workers=2``...); unset ones take the command's defaults.
    """
    args = train_parser().parse_args([])
    unknown = set(options) - set(vars(args))
    if unknown:
        raise TypeError(f"train_meter got unknown options: {', '.join(sorted(unknown))}")
    vars(args).update(options, out=str(out), env=env, env_kwargs=json.dumps(env_kwargs or {}), split=split,
                      tasks=None if tasks is None else [int(i) for i in tasks], policies=list(policies))
    _train(args)
    return Path(out) / "meter"


def _train(args: argparse.Namespace) -> None:
    device = _setup(args)
    from .datasets import load_trajectories, split_trajectories

    out = Path(args.out)
    timings: dict[str, float] = {}
    start = time.perf_counter()
    if args.trajectories:
        paths = [Path(p) for p in args.trajectories]
    else:
        paths = collect_trajectories(args.env, json.loads(args.env_kwargs), args.split, args.policies, out / "trajectories",
                                     limit=args.limit, tasks=args.tasks, seed=args.seed, workers=args.workers)
    timings["record_s"] = time.perf_counter() - start
    trajectories = load_trajectories(paths)
    train, val = split_trajectories(trajectories, args.val_fraction, seed=args.seed)
    print(f"{len(trajectories)} trajectories from {len(paths)} files: {len(train)} train, {len(val)} held out")
    kind, _, name = args.backbone.partition(":")
    start = time.perf_counter()
    if kind == "encoder":
        meter, train_stats = _train_encoder(name, train, args, device)
    elif kind == "causal":
        meter, train_stats = _train_causal(name, train, args, device)
    else:
        raise SystemExit(f"--backbone must start with encoder: or causal:, got {args.backbone!r}")
    timings["train_s"] = time.perf_counter() - start
    from ...wrappers.progress_meter import failure_cost_for
    from .evaluation import evaluate_meter

    failure_cost = failure_cost_for(args.env)
    held_out = evaluate_meter(meter, val, failure_cost=failure_cost).to_dict() if val else None
    report = {
        "backbone": args.backbone,
        "device": device,
        "trajectories": {"files": [str(p) for p in paths], "train": len(train), "held_out": len(val),
                         "train_prefixes": sum(t.num_steps for t in train)},
        "timings": timings,
        "train": train_stats,
        "held_out": held_out,
        "config": {k: v for k, v in vars(args).items()},
    }
    meter.save_pretrained(out / "meter", extra={"train_report": {k: report[k] for k in ("backbone", "trajectories", "timings")}})
    (out / "train_report.json").write_text(json.dumps(report, indent=1, default=str))
    print(f"recorded in {timings['record_s']:.1f} s, trained in {timings['train_s']:.1f} s on {device}; meter saved to {out / 'meter'}")
    if held_out:
        print(f"held-out prefixes: completion accuracy {held_out['completion_accuracy']:.3f}, "
              f"token accuracy {held_out['token_accuracy'] or 0:.3f}")


def _task_pattern(env_id: str) -> str | None:
    from ...registry import ENV_SPECS

    spec = ENV_SPECS.get(env_id)
    return spec.task_pattern if spec else None


def _train_encoder(name: str, train: list, args: argparse.Namespace, device: str):
    from ...meters.encoder import (
        EncoderConfig,
        EncoderMeter,
        build_model,
        history_segments,
        minilm_path,
    )
    from .regression import RegressionConfig, train_encoder_meter

    config = EncoderConfig(hidden=args.hidden, task_pattern=_task_pattern(args.env), window=args.window or None,
                           max_segment_tokens=args.segment_tokens, drop_reasoning=not args.keep_reasoning)
    if name == "tiny":
        from ..tiny_models import tiny_encoder, train_wordpiece_tokenizer

        texts = [s for t in train for s in history_segments(t.messages, drop_reasoning=config.drop_reasoning)]
        tokenizer = train_wordpiece_tokenizer(texts)
        max_tokens = config.max_task_tokens + config.max_segment_tokens + 3
        backbone = tiny_encoder(tokenizer, hidden=args.hidden, max_tokens=max_tokens, seed=args.seed)
        backbone_lr = 5e-4 if args.backbone_lr is None else args.backbone_lr
    else:
        import transformers

        path = minilm_path() if name == "minilm" else name
        tokenizer = transformers.AutoTokenizer.from_pretrained(path)
        backbone = transformers.AutoModel.from_pretrained(path)
        backbone_lr = 0.0 if args.backbone_lr is None else args.backbone_lr
    meter = EncoderMeter(build_model(backbone, config.hidden), tokenizer, config, device=device)
    rc = RegressionConfig(epochs=args.epochs, batch_size=args.batch_size, lr=args.lr, backbone_lr=backbone_lr, seed=args.seed)
    losses = train_encoder_meter(meter, train, rc)
    return meter, {"losses_first_last": [losses[0], losses[-1]], "steps": len(losses), "config": rc.__dict__}


def _train_causal(name: str, train: list, args: argparse.Namespace, device: str):
    import torch

    from ...meters.hf import TransformersMeter
    from ...meters.prompt import PromptConfig
    from .datasets import build_examples
    from .grpo import GRPOConfig, grpo
    from .sft import SFTConfig, sft

    tiny = name == "tiny"
    examples = build_examples(train, include_terminal=True)
    if args.max_examples and len(examples) > args.max_examples:
        examples = random.Random(args.seed).sample(examples, args.max_examples)
    prompt = PromptConfig(max_tokens=args.max_prompt_tokens or (384 if tiny else 6144), max_message_tokens=64 if tiny else None)
    if tiny:
        from ...meters.prompt import render_history
        from ..tiny_models import tiny_causal_lm, train_bpe_tokenizer

        def rough(text: str) -> int:
            return len(text) // 3

        texts = [render_history(e.history, rough, prompt) + "\n" + e.answer for e in examples[:2000]]
        tokenizer = train_bpe_tokenizer(texts + [prompt.system_prompt])
        model = tiny_causal_lm(tokenizer, hidden=args.hidden, seed=args.seed)
    else:
        import transformers

        dtype = torch.bfloat16 if device == "cuda" else torch.float32
        tokenizer = transformers.AutoTokenizer.from_pretrained(name)
        model = transformers.AutoModelForCausalLM.from_pretrained(name, dtype=dtype)
        model.gradient_checkpointing_enable()  # 6k-token meter prompts on a 4B model
    model.to(device)
    sft_cfg = SFTConfig(lr=args.sft_lr or (2e-3 if tiny else 1e-5), epochs=args.sft_epochs, batch_size=args.batch_size, seed=args.seed)
    sft_losses = sft(model, tokenizer, examples, prompt=prompt, config=sft_cfg)
    stats: dict[str, Any] = {"examples": len(examples), "sft_steps": len(sft_losses), "sft_loss_first_last": [sft_losses[0], sft_losses[-1]]}
    if args.grpo_steps:
        grpo_cfg = GRPOConfig(lr=args.grpo_lr or (2e-4 if tiny else 3e-6), steps=args.grpo_steps, group_size=args.group_size, seed=args.seed)
        history = grpo(model, tokenizer, examples, prompt=prompt, config=grpo_cfg)
        stats["grpo_reward_first_last"] = [history[0]["reward"], history[-1]["reward"]]
        stats["grpo_steps"] = len(history)
    return TransformersMeter(model, tokenizer, prompt=prompt, batch_size=args.batch_size), stats


# ---------------------------------------------------------------------------------- eval-meter
def eval_parser() -> argparse.ArgumentParser:
    """Arguments of ``ttg eval-meter``."""
    p = argparse.ArgumentParser(prog="ttg eval-meter", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    _common(p)
    p.set_defaults(policies=list(EVAL_POLICIES))
    p.add_argument("--meter", required=True, help="what load_meter accepts: a saved folder, hf:..., vllm:..., openai:URL#MODEL")
    p.add_argument("--splits", nargs="+", default=["valid_seen", "valid_unseen"], help="splits to record on")
    p.add_argument("--labels", choices=["auto", "alfworld", "none"], default="auto",
                   help="step-quality labels. auto: those in the files (annotations, or ALFWorld plan lengths, which "
                        "recording here adds); alfworld: also replay unlabelled ALFWorld files with the planner (slow); "
                        "none: no step quality")
    p.add_argument("--failure-cost", type=float, default=None, help="C of eq. 7 (default: paper table 4 for --env)")
    p.add_argument("--out", default="runs/meter-eval", help="report folder (default: %(default)s)")
    return p


def eval_main(argv: Sequence[str]) -> int:
    """Entry point of ``ttg eval-meter``."""
    args = eval_parser().parse_args(list(argv))
    device = _setup(args)
    from ...meters.loading import load_meter
    from ...wrappers.progress_meter import failure_cost_for
    from .datasets import load_trajectories
    from .evaluation import evaluate_meter, label_alfworld, markdown_report

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
            sets[split] = load_trajectories(collect_trajectories(
                args.env, env_kwargs, split, args.policies, out / "trajectories", limit=args.limit, tasks=args.tasks, seed=args.seed,
                workers=args.workers, plan_lengths=args.labels != "none"))
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
    table = markdown_report(reports)
    out.mkdir(parents=True, exist_ok=True)
    (out / "eval_report.json").write_text(json.dumps(
        {"meter": args.meter, "failure_cost": failure_cost, "eval_seconds": timings,
         "reports": {k: r.to_dict() for k, r in reports.items()}, "config": vars(args)}, indent=1, default=str))
    (out / "eval_report.md").write_text(table + "\n")
    print(table)
    print(f"\nreport in {out}/eval_report.json and eval_report.md")
    return 0
