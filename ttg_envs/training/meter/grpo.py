"""Meter GRPO refinement (paper eq. 4-5 and 13, appendix D.2).

For each training prefix the meter samples G answers. Each answer is parsed and rewarded:
0.2 + 0.8 u when it predicts completion and the trajectory succeeded (u the token accuracy),
1 when it predicts failure and the trajectory failed, -1 otherwise (wrong label or unparsable).
Rewards are normalised within the group by its mean and sample standard deviation (eq. 13) and
the answer tokens are pushed along the advantage with a token-mean policy-gradient loss. Each
batch is used for one update, so the importance ratio is 1 and clipping never binds; an
optional KL term (low-variance estimator) keeps the meter near a frozen reference.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..._optional import require
from ...meters.answer import parse_answer
from ...meters.base import Estimate
from ...meters.hf import chat_prompt, token_counter
from ...meters.prompt import PromptConfig
from .datasets import MeterExample
from .sft import cosine_schedule


def token_accuracy(predicted: float | None, target: float | None) -> float:
    """u = max(0, 1 - |v_hat - v| / max(v, 1)); 0 when either is missing."""
    if predicted is None or target is None:
        return 0.0
    return max(0.0, 1.0 - abs(float(predicted) - float(target)) / max(float(target), 1.0))


def meter_reward(estimate: Estimate, can_complete: bool, ttg: int | None) -> float:
    """The meter's RL reward (eq. 4-5): 0.2 + 0.8 u, 1, or -1."""
    if not estimate.valid:
        return -1.0
    if estimate.can_complete and can_complete:
        return 0.2 + 0.8 * token_accuracy(estimate.remaining_tokens, ttg)
    if not estimate.can_complete and not can_complete:
        return 1.0
    return -1.0


def group_normalize(rewards: Sequence[float], eps: float = 1e-6) -> np.ndarray:
    """A_j = (r_j - mean) / (sample std + eps) within one group (eq. 13); zeros for a single answer."""
    r = np.asarray(rewards, dtype=float)
    if r.size < 2:
        return np.zeros_like(r)
    return (r - r.mean()) / (r.std(ddof=1) + eps)


@dataclass(frozen=True)
class GRPOConfig:
    """Meter GRPO hyperparameters (defaults: paper C.3, learning rate 3e-6, group size 8)."""

    lr: float = 3e-6
    steps: int = 100
    group_size: int = 8
    prompts_per_step: int = 4
    micro_batch: int = 16
    temperature: float = 1.0
    top_p: float = 1.0
    max_new_tokens: int = 24
    beta: float = 0.0
    warmup_ratio: float = 0.0
    max_grad_norm: float = 1.0
    seed: int = 0


def grpo(
    model: Any,
    tokenizer: Any,
    examples: Sequence[MeterExample],
    *,
    prompt: PromptConfig | None = None,
    config: GRPOConfig = GRPOConfig(),
    reference: Any = None,
    progress: bool = True,
    on_step: Callable[[dict[str, float]], None] | None = None,
) -> list[dict[str, float]]:
    """Refine ``model`` in place; returns per step the mean reward, valid rate and loss
    (each also handed to ``on_step`` with the step's ``lr``, an experiment tracker's hook).

    ``reference`` (a frozen copy of the starting model) is needed only when ``config.beta > 0``.
    """
    torch = require("torch", "hf")
    from ...bars import progress_bar

    if config.beta > 0 and reference is None:
        raise ValueError("GRPO with beta > 0 needs a frozen reference model")
    prompt = prompt or PromptConfig()
    count = token_counter(tokenizer)
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    eos = tokenizer.eos_token_id
    device = next(model.parameters()).device
    rng = random.Random(config.seed)
    torch.manual_seed(config.seed)
    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=config.lr, weight_decay=0.0)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: cosine_schedule(s, config.steps, int(config.warmup_ratio * config.steps)))
    prompt_cache: dict[int, list[int]] = {}
    logged = []
    with progress_bar(total=config.steps, desc="grpo", disable=not progress) as bar:
        for _ in range(config.steps):
            picked = rng.sample(range(len(examples)), min(config.prompts_per_step, len(examples)))
            for i in picked:
                if i not in prompt_cache:
                    text = chat_prompt(tokenizer, examples[i].history, prompt, count)
                    prompt_cache[i] = tokenizer.encode(text, add_special_tokens=False)
            seqs, comp_mask, prompt_len = _sample(model, [prompt_cache[i] for i in picked], config, pad, eos, torch, device)
            texts = tokenizer.batch_decode(seqs[:, prompt_len:], skip_special_tokens=True)
            estimates = [parse_answer(t) for t in texts]
            rewards = np.array(
                [
                    meter_reward(
                        estimates[j], examples[picked[j // config.group_size]].can_complete, examples[picked[j // config.group_size]].ttg
                    )
                    for j in range(len(texts))
                ]
            )
            adv = np.concatenate([group_normalize(g) for g in rewards.reshape(len(picked), config.group_size)])
            loss = _update(
                model, reference, seqs, comp_mask, prompt_len, torch.tensor(adv, dtype=torch.float32), config, params, opt, torch
            )
            lr = float(opt.param_groups[0]["lr"])
            sched.step()
            stats = {"reward": float(rewards.mean()), "valid": float(np.mean([e.valid for e in estimates])), "loss": loss}
            logged.append(stats)
            if on_step is not None:
                on_step({**stats, "lr": lr})
            bar.update(1)
            bar.set_postfix(reward=f"{stats['reward']:.3f}", valid=f"{stats['valid']:.2f}")
    model.eval()
    return logged


def _sample(model: Any, prompts: list[list[int]], config: GRPOConfig, pad: int, eos: int, torch: Any, device: Any):
    """G sampled answers per prompt: sequences ``[P*G, L]``, answer-token mask, prompt width."""
    width = max(len(p) for p in prompts)
    ids = torch.full((len(prompts), width), pad, dtype=torch.long)
    mask = torch.zeros_like(ids)
    for i, p in enumerate(prompts):
        ids[i, width - len(p) :] = torch.tensor(p)
        mask[i, width - len(p) :] = 1
    model.eval()
    with torch.no_grad():
        out = model.generate(
            input_ids=ids.to(device),
            attention_mask=mask.to(device),
            do_sample=True,
            temperature=config.temperature,
            top_p=config.top_p,
            top_k=None,
            max_new_tokens=config.max_new_tokens,
            num_return_sequences=config.group_size,
            pad_token_id=pad,
            eos_token_id=eos,
        )
    new = out[:, width:]
    is_eos = (new == eos).int()
    # Answer tokens: everything up to and including the first end-of-turn token.
    after_eos = (is_eos.cumsum(1) - is_eos) > 0
    comp_mask = (~after_eos).long()
    prompt_mask = mask.to(device).repeat_interleave(config.group_size, 0)
    return out, torch.cat([prompt_mask, comp_mask], 1), width


def _update(model, reference, seqs, attn, prompt_len, adv, config, params, opt, torch) -> float:
    """One token-mean policy-gradient step over all sampled answers (micro-batched)."""
    model.train()
    opt.zero_grad(set_to_none=True)
    answer_mask = attn[:, prompt_len:].float()
    total_tokens = answer_mask.sum().clamp(min=1.0)
    total = 0.0
    device = seqs.device
    for start in range(0, seqs.shape[0], config.micro_batch):
        sl = slice(start, start + config.micro_batch)
        logp = _answer_logprobs(model, seqs[sl], attn[sl], prompt_len, config.temperature)
        m = answer_mask[sl]
        loss = -(adv[sl].to(device).unsqueeze(1) * logp * m).sum() / total_tokens
        if config.beta > 0:
            with torch.no_grad():
                ref = _answer_logprobs(reference, seqs[sl], attn[sl], prompt_len, config.temperature)
            diff = ref - logp
            loss = loss + config.beta * ((torch.exp(diff) - diff - 1.0) * m).sum() / total_tokens
        loss.backward()
        total += loss.item()
    torch.nn.utils.clip_grad_norm_(params, config.max_grad_norm)
    opt.step()
    return total


def _answer_logprobs(model, seqs, attn, prompt_len, temperature: float = 1.0):
    """log pi(token) of every answer position under the sampling temperature, ``[B, L - prompt_len]``."""
    # Prompts are left-padded: positions count real tokens only, as in generate().
    positions = (attn.cumsum(-1) - 1).clamp(min=0)
    logits = model(input_ids=seqs, attention_mask=attn, position_ids=positions).logits[:, prompt_len - 1 : -1].float()
    logits = logits / temperature
    return logits.log_softmax(-1).gather(-1, seqs[:, prompt_len:].unsqueeze(-1)).squeeze(-1)
