"""Generative meter on vLLM's offline engine, with automatic prefix caching.

The k candidate branches of one decision share their whole history up to the last turn, so
with prefix caching the engine computes that shared prompt prefix once per batch.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from .._optional import require
from .._vllm_engine import start_llm
from .answer import ANSWER_PREFIX, parse_answer
from .base import CachedMeter, Estimate, History
from .hf import METER_CONFIG, chat_prompt, completion_token_ids, token_counter
from .prompt import PromptConfig


class VLLMMeter(CachedMeter):
    """A meter served by ``vllm.LLM`` (greedy decoding, prefix caching on).

    Args:
        model: a model name or a saved meter folder.
        prompt: how histories are rendered (read from ``meter.json`` when the folder has one).
        max_new_tokens: answer length limit.
        read_logit: also read z = log p(true) - log p(false) after the answer prefix (E.4), from
            the top-20 log-probabilities of one extra token (missing entries count as -inf, so
            z is then clipped by the consumer).
        engine_kwargs: extra ``vllm.LLM`` arguments (``gpu_memory_utilization``, ``dtype``,
            ``enforce_eager``, ``max_model_len``...).
        cache_size: see :class:`~ttg_envs.meters.base.CachedMeter`.

    Works from a script without ``if __name__ == "__main__":`` (see :mod:`ttg_envs._vllm_engine`).
    """

    def __init__(
        self,
        model: str,
        *,
        prompt: PromptConfig | None = None,
        max_new_tokens: int = 24,
        read_logit: bool = False,
        engine_kwargs: dict[str, Any] | None = None,
        cache_size: int = 65536,
    ):
        super().__init__(cache_size)
        vllm = require("vllm", "vllm")
        config_path = Path(model) / METER_CONFIG
        if prompt is None and config_path.is_file():
            prompt = PromptConfig(**json.loads(config_path.read_text()).get("prompt", {}))
        self.prompt = prompt or PromptConfig()
        self.llm = start_llm(vllm, type(self).__name__, model=str(model), enable_prefix_caching=True, **(engine_kwargs or {}))
        self.tokenizer = self.llm.get_tokenizer()
        self.count = token_counter(self.tokenizer)
        self.params = vllm.SamplingParams(temperature=0.0, max_tokens=int(max_new_tokens))
        self.logit_params = vllm.SamplingParams(temperature=0.0, max_tokens=1, logprobs=20) if read_logit else None
        self.logit_ids = completion_token_ids(self.tokenizer) if read_logit else None

    def _estimate_uncached(self, histories: list[History]) -> list[Estimate]:
        prompts = [chat_prompt(self.tokenizer, h, self.prompt, self.count) for h in histories]
        outputs = self.llm.generate(prompts, self.params, use_tqdm=False)
        results = [parse_answer(o.outputs[0].text) for o in outputs]
        if self.logit_params is None:
            return results
        scored = self.llm.generate([p + ANSWER_PREFIX for p in prompts], self.logit_params, use_tqdm=False)
        out = []
        for est, o in zip(results, scored):
            top = o.outputs[0].logprobs[0] if o.outputs[0].logprobs else {}
            lp = [getattr(top.get(i), "logprob", -math.inf) for i in self.logit_ids]
            z = lp[0] - lp[1] if math.isfinite(lp[0]) or math.isfinite(lp[1]) else 0.0
            out.append(Estimate(est.can_complete, est.remaining_tokens, est.valid, est.raw, z))
        return out
