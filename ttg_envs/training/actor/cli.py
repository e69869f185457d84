"""``ttg train``: DeltaTTG (or a baseline) actor training on one node; see ``ttg train --help``.

Unset hyperparameters take paper table 4's values for the env. ``--model tiny`` builds a small
random Qwen3 with a tokenizer trained on the env's prompts, and ``--meter turns`` a rule-based
meter (remaining tokens shrink with the turn count): together they run end to end on a CPU.
A run resumes from the newest checkpoint in ``--out`` unless ``--no-resume`` is given.
"""

from __future__ import annotations

import argparse
import copy
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..._optional import require
from .advantages import ESTIMATORS

__all__ = ["build_parser", "main", "turns_meter"]


def turns_meter(tokens_per_turn: int, max_turns: int) -> Any:
    """A rule-based meter for smoke runs: ``(max_turns - turns so far) * tokens_per_turn / 2`` tokens left."""
    from ...meters import ScriptedMeter

    def estimate(history):
        turns = sum(1 for m in history if m.get("role") == "assistant")
        return True, max(1, (max_turns - turns) * tokens_per_turn // 2)

    return ScriptedMeter(estimate)


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of ``ttg train``."""
    p = argparse.ArgumentParser(prog="ttg train", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--env", default="ttg/ALFWorld-v0", help="registered env id (default: %(default)s)")
    p.add_argument("--env-kwargs", default="{}", help='JSON dict of extra gym.make kwargs, e.g. \'{"split": "train"}\'')
    p.add_argument("--model", default="Qwen/Qwen3-4B", help="policy: HF name or folder, or 'tiny' (default: %(default)s)")
    p.add_argument("--meter", default=None, help="load_meter spec, or 'turns' (rule-based, smoke runs); needed by delta_ttg")
    p.add_argument("--estimator", default="delta_ttg", choices=ESTIMATORS,
                   help="advantages: delta_ttg (needs --meter), grpo, dapo (GRPO with dynamic sampling: up to "
                        "10 rollout batches per step until enough groups have varied rewards), gigpo or hgpo")
    p.add_argument("--steps", type=int, default=150)
    p.add_argument("--tasks-per-step", type=int, default=None, help="table 4's training batch size by default")
    p.add_argument("--group-size", type=int, default=None, help="rollouts per task G (table 4)")
    p.add_argument("--max-turns", type=int, default=None, help="table 4")
    p.add_argument("--max-tokens-per-turn", type=int, default=None, help="table 4")
    p.add_argument("--lr", type=float, default=None, help="table 4")
    p.add_argument("--kl-coef", type=float, default=None, help="table 4")
    p.add_argument("--entropy-coef", type=float, default=None, help="table 4")
    p.add_argument("--temperature", type=float, default=None, help="table 4")
    p.add_argument("--mini-batch-rows", type=int, default=256, help="turns per optimizer step")
    p.add_argument("--micro-batch-rows", type=int, default=8, help="turns per forward pass")
    p.add_argument("--task-indices", default=None, help="task pool, e.g. '0-99' or '0,5,7' (default: all)")
    p.add_argument("--history", default="full",
                   help="policy prompt window: 'full', 'paper' (last 2 turns within 2048 tokens, appendix E.5), or a turn count")
    p.add_argument("--max-prompt-tokens", type=int, default=None, help="policy prompt budget (overrides the window's)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--save-every", type=int, default=10)
    p.add_argument("--out", default="runs/train", help="checkpoints and metrics.jsonl (default: %(default)s)")
    p.add_argument("--no-resume", action="store_true", help="start over even if --out holds checkpoints")
    p.add_argument("--device", default=None, help="torch device (default: cuda when available)")
    p.add_argument("--dtype", default="bfloat16", help="policy dtype on GPU (default: %(default)s; CPU uses float32)")
    p.add_argument("--rollout", default="auto", choices=("auto", "hf", "vllm"),
                   help="rollout engine: vLLM when installed and on a GPU (auto), transformers (hf), or vllm")
    p.add_argument("--vllm-memory", type=float, default=0.35, help="vLLM gpu_memory_utilization (default: %(default)s)")
    return p


def _indices(spec: str | None) -> tuple[int, ...] | None:
    if spec is None:
        return None
    out: list[int] = []
    for part in spec.split(","):
        lo, _, hi = part.partition("-")
        out.extend(range(int(lo), int(hi) + 1) if hi else [int(lo)])
    return tuple(out)


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
    """Policy, tokenizer and the frozen reference (the same base weights)."""
    torch = require("torch", "hf")
    if args.model == "tiny":
        model, tokenizer = _tiny_policy(args.env, env_kwargs)
        reference = copy.deepcopy(model)  # the same seeded initial weights on every (re)start
    else:
        from ...model_spec import load_causal_lm, resolve_model

        dtype = getattr(torch, args.dtype) if device.startswith("cuda") else torch.float32
        source = resolve_model(args.model, dtype=dtype)
        model, tokenizer = load_causal_lm(source)
        reference, _ = load_causal_lm(source)
        model.gradient_checkpointing_enable()
    return model.to(device), tokenizer, reference.to(device)


def _generator(args: argparse.Namespace, model: Any, tokenizer: Any, device: str) -> Any:
    """A vLLM engine on the policy's starting weights when asked (or ``auto`` on a GPU with vLLM), else None."""
    import importlib.util

    use_vllm = args.rollout == "vllm" or (
        args.rollout == "auto" and device.startswith("cuda") and importlib.util.find_spec("vllm") is not None
    )
    if not use_vllm:
        return None
    from .rollout import VLLMGenerator

    path = args.model
    if args.model == "tiny":
        path = str(Path(args.out) / "initial-policy")
        model.save_pretrained(path)
        tokenizer.save_pretrained(path)
    kwargs = {"gpu_memory_utilization": args.vllm_memory} if device.startswith("cuda") else {"enforce_eager": True}
    return VLLMGenerator(path, dtype="bfloat16" if device.startswith("cuda") else "float32", **kwargs)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``ttg train``."""
    args = build_parser().parse_args(argv)
    torch = require("torch", "hf")
    from .trainer import TrainConfig, Trainer, latest_checkpoint

    env_kwargs = json.loads(args.env_kwargs)
    from ...agents.window import as_window

    window = as_window(args.history)
    config = TrainConfig(
        env_id=args.env, env_kwargs=env_kwargs, estimator=args.estimator, steps=args.steps,
        tasks_per_step=args.tasks_per_step, group_size=args.group_size, max_turns=args.max_turns,
        max_tokens_per_turn=args.max_tokens_per_turn, lr=args.lr, kl_coef=args.kl_coef,
        entropy_coef=args.entropy_coef, temperature=args.temperature, mini_batch_rows=args.mini_batch_rows,
        micro_batch_rows=args.micro_batch_rows, task_indices=_indices(args.task_indices), seed=args.seed,
        save_every=args.save_every, out_dir=args.out, history=window.history,
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
    trainer = Trainer(config, model, tokenizer, meter=meter, ref_model=reference if config.kl_coef > 0 else None,
                      generator=generator)
    checkpoint = None if args.no_resume else latest_checkpoint(args.out)
    if checkpoint is not None:
        trainer.resume(checkpoint)
        print(f"resumed from {checkpoint} (step {trainer.step_index})")
    history = trainer.train()
    if history:
        last = history[-1]
        print(f"step {last['step']}: reward {last['reward_mean']:.3f}, success {last['success_rate']:.3f}, "
              f"loss {last['loss']:.4f}; metrics in {Path(args.out) / 'metrics.jsonl'}")
    return 0
