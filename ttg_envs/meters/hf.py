"""Generative meter on transformers: batched greedy decoding of the answer format."""

from __future__ import annotations

import json
import math
import os
from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path
from typing import Any

from .._io import atomic_folder, load_folder
from .._optional import require
from .answer import ANSWER_PREFIX, parse_answer
from .base import CachedMeter, Estimate, History
from .prompt import CountTokens, PromptConfig, meter_messages

#: File that marks a folder as a saved meter and says which backend loads it.
METER_CONFIG = "meter.json"


def token_counter(tokenizer: Any) -> CountTokens:
    """A memoised token count with ``tokenizer`` (no special tokens added)."""

    @lru_cache(maxsize=65536)
    def count(text: str) -> int:
        return len(tokenizer.encode(text, add_special_tokens=False))

    return count


def chat_prompt(tokenizer: Any, history: History, config: PromptConfig, count: CountTokens) -> str:
    """The meter prompt for ``history`` in the model's chat template, ready for the answer."""
    messages = meter_messages(history, count, config)
    kwargs = {"tokenize": False, "add_generation_prompt": True}
    try:
        return tokenizer.apply_chat_template(messages, enable_thinking=False, **kwargs)
    except TypeError:  # templates without the thinking switch
        return tokenizer.apply_chat_template(messages, **kwargs)


def completion_token_ids(tokenizer: Any) -> tuple[int, int]:
    """Ids of the first token of `` true`` and `` false`` after :data:`ANSWER_PREFIX`."""
    base = tokenizer.encode(ANSWER_PREFIX, add_special_tokens=False)
    ids = []
    for word in (" true", " false"):
        full = tokenizer.encode(ANSWER_PREFIX + word, add_special_tokens=False)
        if full[: len(base)] != base or len(full) == len(base):
            raise ValueError(f"the tokenizer merges {ANSWER_PREFIX!r} with {word!r}; cannot read the completion logit")
        ids.append(full[len(base)])
    if ids[0] == ids[1]:
        raise ValueError("' true' and ' false' share their first token; cannot read the completion logit")
    return ids[0], ids[1]


class TransformersMeter(CachedMeter):
    """A causal LM that writes the answer format, decoded greedily in batches.

    Args:
        model: a transformers causal LM, or a model spec (hub id, folder, GGUF file; see
            :mod:`ttg_envs.model_spec`) whose options ``revision``/``gguf_file``/``dtype`` may also
            come as keyword arguments.
        tokenizer: its tokenizer (loaded from ``model`` when it is a path and this is None).
        prompt: how histories are rendered.
        batch_size: histories per generate call (sorted by length to limit padding).
        max_new_tokens: answer length limit (the longest valid answer is about 15 tokens).
        read_logit: also read z = log p(true) - log p(false) after the answer prefix (E.4).
        device: where the model runs (default: where it already is).
        threads: torch's CPU threads (:func:`~ttg_envs.model_spec.set_threads`; None: torch's default).
        cache_size: see :class:`~ttg_envs.meters.base.CachedMeter`.
    """

    def __init__(
        self,
        model: Any,
        tokenizer: Any = None,
        *,
        prompt: PromptConfig | None = None,
        batch_size: int = 8,
        max_new_tokens: int = 24,
        read_logit: bool = False,
        device: str | None = None,
        threads: int | None = None,
        cache_size: int = 65536,
        **load_kwargs: Any,
    ):
        super().__init__(cache_size)
        torch = require("torch", "hf")
        from ..model_spec import set_threads

        set_threads(threads)
        if isinstance(model, (str, os.PathLike)):
            from ..model_spec import load_causal_lm

            model, loaded_tokenizer = load_causal_lm(model, **load_kwargs)
            tokenizer = tokenizer or loaded_tokenizer
        if device is not None:
            model = model.to(device)
        self.model = model.eval()
        self.tokenizer = tokenizer
        self.prompt = prompt or PromptConfig()
        self.batch_size = int(batch_size)
        self.max_new_tokens = int(max_new_tokens)
        self.count = token_counter(tokenizer)
        self.logit_ids = completion_token_ids(tokenizer) if read_logit else None
        self._torch = torch

    @classmethod
    def from_pretrained(cls, path: str | os.PathLike, **kwargs: Any) -> TransformersMeter:
        """Load a saved meter folder (model, tokenizer and ``meter.json``; pinned while it loads:
        :func:`~ttg_envs._io.load_folder`) or any causal LM."""
        return load_folder(path, lambda folder: cls._from_folder(folder if folder.is_dir() else path, dict(kwargs)))

    @classmethod
    def _from_folder(cls, path: str | os.PathLike, kwargs: dict[str, Any]) -> TransformersMeter:
        config_path = Path(path) / METER_CONFIG
        if config_path.is_file() and "prompt" not in kwargs:
            saved = json.loads(config_path.read_text())
            kwargs["prompt"] = PromptConfig(**saved.get("prompt", {}))
        return cls(str(path), **kwargs)

    def save_pretrained(self, path: str | os.PathLike, extra: dict[str, Any] | None = None) -> None:
        """Write the model, tokenizer and ``meter.json`` so :func:`load_meter` can reload them."""
        save_meter(self.model, self.tokenizer, path, self.prompt, extra)

    def prompts(self, histories: Sequence[History]) -> list[str]:
        """The chat-template prompt of each history."""
        return [chat_prompt(self.tokenizer, h, self.prompt, self.count) for h in histories]

    def _estimate_uncached(self, histories: list[History]) -> list[Estimate]:
        torch = self._torch
        texts = self.prompts(histories)
        encoded = [self.tokenizer.encode(t, add_special_tokens=False) for t in texts]
        order = sorted(range(len(texts)), key=lambda i: len(encoded[i]))
        answers: list[str] = [""] * len(texts)
        logits: list[float | None] = [None] * len(texts)
        device = next(self.model.parameters()).device
        pad = self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else self.tokenizer.eos_token_id
        with torch.inference_mode():
            for start in range(0, len(order), self.batch_size):
                idx = order[start : start + self.batch_size]
                ids, mask = _left_pad([encoded[i] for i in idx], pad, torch, device)
                out = self.model.generate(
                    input_ids=ids,
                    attention_mask=mask,
                    do_sample=False,
                    max_new_tokens=self.max_new_tokens,
                    pad_token_id=pad,
                    temperature=None,
                    top_p=None,
                    top_k=None,
                )
                new = out[:, ids.shape[1] :]
                for j, i in enumerate(idx):
                    answers[i] = self.tokenizer.decode(new[j], skip_special_tokens=True)
                if self.logit_ids is not None:
                    prefix = self.tokenizer.encode(ANSWER_PREFIX, add_special_tokens=False)
                    pids, pmask = _left_pad([encoded[i] + prefix for i in idx], pad, torch, device)
                    positions = (pmask.cumsum(-1) - 1).clamp(min=0)
                    last = self.model(input_ids=pids, attention_mask=pmask, position_ids=positions).logits[:, -1]
                    last = last.float().log_softmax(-1)
                    z = (last[:, self.logit_ids[0]] - last[:, self.logit_ids[1]]).tolist()
                    for j, i in enumerate(idx):
                        logits[i] = z[j] if math.isfinite(z[j]) else None
        results = []
        for answer, z in zip(answers, logits):
            est = parse_answer(answer)
            results.append(Estimate(est.can_complete, est.remaining_tokens, est.valid, est.raw, z) if z is not None else est)
        return results


def _left_pad(rows: list[list[int]], pad: int, torch: Any, device: Any) -> tuple[Any, Any]:
    width = max(len(r) for r in rows)
    ids = torch.full((len(rows), width), pad, dtype=torch.long)
    mask = torch.zeros((len(rows), width), dtype=torch.long)
    for j, row in enumerate(rows):
        ids[j, width - len(row) :] = torch.tensor(row, dtype=torch.long)
        mask[j, width - len(row) :] = 1
    return ids.to(device), mask.to(device)


def save_meter(
    model: Any,
    tokenizer: Any,
    path: str | os.PathLike,
    prompt: PromptConfig,
    extra: dict[str, Any] | None = None,
    kind: str = "transformers",
) -> None:
    """Save a generative meter folder: model and tokenizer files plus ``meter.json``. The whole
    folder appears at once, replacing any earlier one (:func:`~ttg_envs._io.atomic_folder`)."""
    with atomic_folder(path) as out:
        model.save_pretrained(out)
        tokenizer.save_pretrained(out)
        (out / METER_CONFIG).write_text(json.dumps({"kind": kind, "prompt": prompt.to_dict(), **(extra or {})}, indent=1))
