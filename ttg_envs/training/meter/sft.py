"""Meter SFT (paper eq. 3, appendix D.2): cross-entropy on the answer tokens, prompt masked.

Each example is the meter prompt of a history (chat template, generation prompt) followed by
the target answer and the end-of-turn token; only the answer and end-of-turn tokens carry loss.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ..._optional import require
from ...meters.hf import chat_prompt, token_counter
from ...meters.prompt import PromptConfig
from .datasets import MeterExample

IGNORE_INDEX = -100


@dataclass(frozen=True)
class SFTConfig:
    """Meter SFT hyperparameters (defaults: paper C.3, learning rate 1e-5 for one epoch)."""

    lr: float = 1e-5
    epochs: float = 1.0
    batch_size: int = 8
    grad_accum: int = 1
    warmup_ratio: float = 0.05
    weight_decay: float = 0.0
    max_grad_norm: float = 1.0
    seed: int = 0


def encode_example(tokenizer: Any, example: MeterExample, prompt: PromptConfig, count: Any) -> tuple[list[int], list[int]]:
    """``(input_ids, labels)`` of one example, labels ``IGNORE_INDEX`` on the prompt."""
    text = chat_prompt(tokenizer, example.history, prompt, count)
    prompt_ids = tokenizer.encode(text, add_special_tokens=False)
    answer_ids = tokenizer.encode(example.answer, add_special_tokens=False) + [tokenizer.eos_token_id]
    return prompt_ids + answer_ids, [IGNORE_INDEX] * len(prompt_ids) + answer_ids


def collate(rows: Sequence[tuple[list[int], list[int]]], pad_id: int, torch: Any) -> dict[str, Any]:
    """Right-padded ``input_ids``, ``attention_mask`` and ``labels`` tensors."""
    width = max(len(ids) for ids, _ in rows)
    ids = torch.full((len(rows), width), pad_id, dtype=torch.long)
    labels = torch.full((len(rows), width), IGNORE_INDEX, dtype=torch.long)
    mask = torch.zeros((len(rows), width), dtype=torch.long)
    for i, (row, lab) in enumerate(rows):
        ids[i, : len(row)] = torch.tensor(row)
        labels[i, : len(lab)] = torch.tensor(lab)
        mask[i, : len(row)] = 1
    return {"input_ids": ids, "attention_mask": mask, "labels": labels}


def answer_loss(model: Any, batch: dict[str, Any], torch: Any) -> Any:
    """Mean cross-entropy over the answer tokens of a batch."""
    logits = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).logits[:, :-1]
    target = batch["labels"][:, 1:]
    return torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]).float(), target.reshape(-1), ignore_index=IGNORE_INDEX)


def cosine_schedule(step: int, total: int, warmup: int) -> float:
    """Learning-rate factor: linear warmup, then cosine decay to 0."""
    if step < warmup:
        return (step + 1) / max(1, warmup)
    progress = (step - warmup) / max(1, total - warmup)
    return 0.5 * (1.0 + math.cos(math.pi * min(1.0, progress)))


def sft(
    model: Any,
    tokenizer: Any,
    examples: Sequence[MeterExample],
    *,
    prompt: PromptConfig | None = None,
    config: SFTConfig = SFTConfig(),
    progress: bool = True,
    on_step: Callable[[dict[str, float]], None] | None = None,
) -> list[float]:
    """Fine-tune ``model`` in place on ``examples``; returns the loss of every optimizer step.

    ``on_step`` gets each step's ``loss`` and ``lr`` (an experiment tracker's hook)."""
    torch = require("torch", "hf")
    from ...bars import progress_bar

    prompt = prompt or PromptConfig()
    count = token_counter(tokenizer)
    rows = [encode_example(tokenizer, e, prompt, count) for e in progress_bar(examples, desc="sft: tokenize", disable=not progress)]
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    device = next(model.parameters()).device
    rng = random.Random(config.seed)
    torch.manual_seed(config.seed)
    per_step = config.batch_size * config.grad_accum
    total = max(1, math.ceil(len(rows) * config.epochs / per_step))
    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=config.lr, weight_decay=config.weight_decay)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: cosine_schedule(s, total, int(config.warmup_ratio * total)))
    order: list[int] = []
    losses = []
    model.train()
    with progress_bar(total=total, desc="sft", disable=not progress) as bar:
        for _ in range(total):
            opt.zero_grad(set_to_none=True)
            step_loss = 0.0
            for _ in range(config.grad_accum):
                if len(order) < config.batch_size:
                    fresh = list(range(len(rows)))
                    rng.shuffle(fresh)
                    order += fresh
                idx, order = order[: config.batch_size], order[config.batch_size :]
                batch = {k: v.to(device) for k, v in collate([rows[i] for i in idx], pad, torch).items()}
                loss = answer_loss(model, batch, torch) / config.grad_accum
                loss.backward()
                step_loss += loss.item()
            torch.nn.utils.clip_grad_norm_(params, config.max_grad_norm)
            lr = float(opt.param_groups[0]["lr"])
            opt.step()
            sched.step()
            losses.append(step_loss)
            if on_step is not None:
                on_step({"loss": step_loss, "lr": lr})
            bar.update(1)
            bar.set_postfix(loss=f"{step_loss:.3f}")
    model.eval()
    return losses
