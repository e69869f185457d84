"""``vllm:<name-or-path>`` actors: vLLM's offline engine, all histories and samples in one call."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

from .._optional import require
from .._vllm_engine import adapter_rank, lora_engine_kwargs, start_llm
from ..core import Generation
from .base import ChatActor, Messages, SamplingParams


class VLLMActor(ChatActor):
    """Samples ``n`` responses per history with ``LLM.chat`` (one request per history, ``n`` outputs each).

    Prefix caching is on by default, so the k candidates of a step and the steps of an episode
    share their prompt's KV cache. A peft adapter folder (``ttg train --lora-r`` checkpoints) runs
    on its base model through vLLM's LoRA support (``enable_lora``), the adapter applied to every
    request, not merged.

    Args:
        model: a hub name or local folder (a model, or a peft adapter); sampling: decoding settings;
        engine_kwargs: passed to ``vllm.LLM`` (e.g. ``tensor_parallel_size``, ``max_model_len``).

    Works from a script without ``if __name__ == "__main__":`` (see :mod:`ttg_envs._vllm_engine`).
    """

    def __init__(self, model: str, sampling: SamplingParams | None = None, *, window: Any = None, **engine_kwargs: Any):
        super().__init__(sampling, window=window)
        self._vllm = require("vllm", "vllm")
        engine_kwargs.setdefault("enable_prefix_caching", True)
        self.lora_request: Any = None
        if (Path(model) / "adapter_config.json").is_file() and not (Path(model) / "config.json").is_file():
            model, engine_kwargs = self._adapter(model, engine_kwargs)
        self.llm = start_llm(self._vllm, type(self).__name__, model=model, **engine_kwargs)

    def _adapter(self, folder: str, engine_kwargs: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        """The base model to start the engine on and its LoRA settings; sets the request every call uses."""
        from vllm.lora.request import LoRARequest

        from ..model_spec import resolve_model

        source = resolve_model(folder)
        if source.gguf_file:
            raise ValueError(f"vllm:{folder}: an adapter on a GGUF base is not supported; merge it (--lora-merge) or use hf:{folder}")
        self.lora_request = LoRARequest(Path(folder).name or "adapter", 1, str(Path(folder).resolve()))
        return source.path, {**lora_engine_kwargs(adapter_rank(folder)), **engine_kwargs}

    def count_prompt_tokens(self, messages: Messages) -> int:
        """Exact prompt length through the served model's chat template."""
        tokenizer = self.llm.get_tokenizer()
        text = tokenizer.apply_chat_template(list(messages), add_generation_prompt=True, tokenize=False, **self.sampling.template_kwargs())
        return len(tokenizer.encode(text, add_special_tokens=False))

    def generate(self, histories: Sequence[Messages], n: int = 1) -> list[list[Generation]]:
        """``n`` sampled responses per history."""
        s = self.sampling
        # vLLM refuses n > 1 with greedy decoding: ask n times for one (prefix caching shares the prompt).
        copies = n if s.temperature == 0 and n > 1 else 1
        params = self._vllm.SamplingParams(
            n=n // copies, temperature=s.temperature, top_p=s.top_p, top_k=s.top_k or -1, max_tokens=s.max_tokens, seed=s.seed
        )
        outputs = self.llm.chat(
            [list(h) for h in histories for _ in range(copies)],
            params,
            use_tqdm=False,
            chat_template_kwargs=s.template_kwargs() or None,
            lora_request=self.lora_request,
        )
        samples = [[Generation(c.text, list(c.token_ids)) for c in request.outputs] for request in outputs]
        return [sum(samples[i : i + copies], []) for i in range(0, len(samples), copies)]
