"""``ttg train`` as a library function: DeltaTTG (or a baseline) actor training on one node; see ``ttg train --help``.

Unset hyperparameters take paper table 4's values for the env. ``--model tiny`` builds a small
random Qwen3 with a tokenizer trained on the env's prompts, and ``--meter turns`` a rule-based
meter (remaining tokens shrink with the turn count): together they run end to end on a CPU.
A run resumes from the newest checkpoint in ``--out`` unless ``--no-resume`` is given.
"""

from __future__ import annotations

import argparse
import copy
import json
from pathlib import Path
from typing import Any

from ..._optional import require

__all__ = ["train", "turns_meter"]


def turns_meter(tokens_per_turn: int, max_turns: int) -> Any:
    """A rule-based meter for smoke runs: ``(max_turns - turns so far) * tokens_per_turn / 2`` tokens left."""
    from ...meters import ScriptedMeter

    def estimate(history):
        turns = sum(1 for m in history if m.get("role") == "assistant")
        return True, max(1, (max_turns - turns) * tokens_per_turn // 2)

    return ScriptedMeter(estimate)


def _tiny_policy(env_id: str, env_kwargs: dict[str, Any]) -> tuple[Any, Any]:
    import gymnasium as gym

    from ..tiny_models import tiny_causal_lm, train_bpe_tokenizer

    env = gym.make(env_id, **env_kwargs)
    texts = []
    for index in range(min(env.unwrapped.num_tasks, 3)):
        obs, _ = env.reset(seed=0, options={"task_index": index})
        texts += [env.unwrapped.system_prompt, obs]
    env.close()
    tokenizer = train_bpe_tokenizer(texts, vocab_size=1024)
    # 2 heads of 32: vLLM's CPU attention rejects head_dim 16 (32 and 64 work).
    return tiny_causal_lm(tokenizer, hidden=64, layers=2, heads=2, seed=0), tokenizer


def _load_policy(args: argparse.Namespace, env_kwargs: dict[str, Any], device: str) -> tuple[Any, Any, Any]:
    """Policy, tokenizer and the frozen reference (the same base weights; None for a LoRA policy,
    whose reference is its base with the adapter off)."""
    torch = require("torch", "hf")
    from ..lora import LoraSettings, add_lora

    lora = LoraSettings.from_flags(getattr(args, "lora_r", None), getattr(args, "lora_alpha", None), getattr(args, "lora_targets", None))
    if args.model == "tiny":
        model, tokenizer = _tiny_policy(args.env, env_kwargs)
        reference = None if lora else copy.deepcopy(model)  # the same seeded initial weights on every (re)start
        base = args.model
        if lora:  # a random model has no spec to reload an adapter on: keep it beside the run
            base = str((Path(args.out) / "base-policy").resolve())
            model.save_pretrained(base)
            tokenizer.save_pretrained(base)
    else:
        from ...model_spec import load_causal_lm, resolve_model

        dtype = getattr(torch, args.dtype) if device.startswith("cuda") else torch.float32
        source = resolve_model(args.model, dtype=dtype)
        model, tokenizer = load_causal_lm(source)
        reference = None if lora else load_causal_lm(source)[0]
        model.gradient_checkpointing_enable()
        base = args.model
    if lora:
        model = add_lora(model, lora, base=base)
    return model.to(device), tokenizer, reference.to(device) if reference is not None else None


def _generator(args: argparse.Namespace, model: Any, tokenizer: Any, device: str) -> Any:
    """A vLLM engine on the policy's starting weights when asked (or ``auto`` on a GPU with vLLM), else None."""
    import importlib.util

    use_vllm = args.rollout == "vllm" or (
        args.rollout == "auto" and device.startswith("cuda") and importlib.util.find_spec("vllm") is not None
    )
    if not use_vllm:
        return None
    if getattr(args, "lora_r", None):  # vLLM rollouts of a LoRA policy are not wired (ttg train refuses --rollout vllm)
        return None
    from .rollout import VLLMGenerator

    path = args.model
    if args.model == "tiny":
        path = str(Path(args.out) / "initial-policy")
        model.save_pretrained(path)
        tokenizer.save_pretrained(path)
    kwargs = {"gpu_memory_utilization": args.vllm_memory} if device.startswith("cuda") else {"enforce_eager": True}
    return VLLMGenerator(path, dtype="bfloat16" if device.startswith("cuda") else "float32", **kwargs)


def train(args: argparse.Namespace) -> int:
    """``ttg train`` with parsed arguments (the flags are in :mod:`ttg_envs.cli.train`)."""
    torch = require("torch", "hf")
    from .trainer import TrainConfig, Trainer, latest_checkpoint

    env_kwargs = json.loads(args.env_kwargs)
    from ...agents.window import as_window

    window = as_window(args.history)
    config = TrainConfig(
        env_id=args.env,
        env_kwargs=env_kwargs,
        estimator=args.estimator,
        steps=args.steps,
        tasks_per_step=args.tasks_per_step,
        group_size=args.group_size,
        max_turns=args.max_turns,
        max_tokens_per_turn=args.max_tokens_per_turn,
        lr=args.lr,
        kl_coef=args.kl_coef,
        entropy_coef=args.entropy_coef,
        temperature=args.temperature,
        mini_batch_rows=args.mini_batch_rows,
        micro_batch_rows=args.micro_batch_rows,
        task_indices=None if args.tasks is None else _listed(args.tasks),
        seed=args.seed,
        save_every=args.save_every,
        out_dir=args.out,
        history=window.history,
        max_prompt_tokens=args.max_prompt_tokens or window.max_prompt_tokens,
    ).resolved()
    meter = None
    if args.meter == "turns":
        meter = turns_meter(config.max_tokens_per_turn, config.max_turns)
    elif args.meter is not None:
        from ...meters import load_meter

        meter = load_meter(args.meter)
    device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    model, tokenizer, reference = _load_policy(args, env_kwargs, device)
    generator = _generator(args, model, tokenizer, device)
    trainer = Trainer(config, model, tokenizer, meter=meter, ref_model=reference if config.kl_coef > 0 else None, generator=generator)
    checkpoint = None if args.no_resume else latest_checkpoint(args.out)
    if checkpoint is not None:
        trainer.resume(checkpoint)
        print(f"resumed from {checkpoint} (step {trainer.step_index})")
    reporter = _reporter(args, config, tokenizer, trainer.step_index)
    trainer.reporter = reporter
    try:
        history = trainer.train()
    finally:
        reporter.close()
    if getattr(args, "lora_merge", False):
        from ..lora import export_merged

        print(f"merged policy (adapter folded into the base) in {export_merged(model, tokenizer, Path(args.out) / 'merged')}")
    if history:
        last = history[-1]
        print(
            f"step {last['step']}: reward {last['reward_mean']:.3f}, success {last['success_rate']:.3f}, "
            f"loss {last['loss']:.4f}; metrics in {Path(args.out) / 'metrics.jsonl'}"
        )
    return 0


def _reporter(args: argparse.Namespace, config: Any, tokenizer: Any, start_step: int) -> Any:
    """The step line plus the ``--report-to`` trackers, which get the resolved config."""
    from dataclasses import asdict

    from ..tracking import RunReporter, open_trackers, parse_report_to

    names = parse_report_to(getattr(args, "report_to", None))
    trackers = open_trackers(names, args.out, {**asdict(config), "model": args.model, "meter": args.meter}, start_step)
    return RunReporter(trackers, tokenizer=tokenizer, table_every=getattr(args, "log_episodes_every", 10))


def _listed(tasks: Any) -> tuple[int, ...]:
    """``--tasks`` as a tuple, refused in one line when a range of it is too long to list."""
    return tasks.listed() if hasattr(tasks, "listed") else tuple(tasks)
