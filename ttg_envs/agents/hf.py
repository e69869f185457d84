"""``hf:<name-or-path>`` actors: a transformers causal LM, batched sampling over many histories."""

from __future__ import annotations

from typing import Any, Sequence

from .._optional import require
from ..core import Generation
from .base import ChatActor, Messages, SamplingParams


class TransformersActor(ChatActor):
    """Samples responses with ``model.generate`` from the model's chat template.

    Prompts are left-padded into batches of ``batch_size`` histories, each asked for ``n``
    sequences. The torch RNG is seeded when ``sampling.seed`` changes. A response's token ids stop before the first end-of-sequence or pad token, so they
    are exactly the tokens the model wrote for the turn.

    Args:
        model: a causal LM; tokenizer: its tokenizer (with a chat template).
        sampling: decoding settings; batch_size: histories per ``generate`` call.
        window: the part of the transcript prompted with (see :class:`~ttg_envs.agents.base.ChatActor`).
    """

    def __init__(self, model: Any, tokenizer: Any, sampling: SamplingParams | None = None, *, batch_size: int = 8, window: Any = None):
        super().__init__(sampling, window=window)
        self._torch = require("torch", "hf")
        self.model = model.eval()
        self.tokenizer = tokenizer
        self.batch_size = int(batch_size)
        self._stop = {i for i in (tokenizer.eos_token_id, tokenizer.pad_token_id) if i is not None}
        self._seeded: int | None = None

    @classmethod
    def from_pretrained(
        cls,
        name: str,
        sampling: SamplingParams | None = None,
        *,
        device: str | None = None,
        dtype: Any = None,
        revision: str | None = None,
        gguf_file: str | None = None,
        threads: int | None = None,
        **kwargs: Any,
    ) -> TransformersActor:
        """Load model and tokenizer from a model spec: a hub id, a local folder or a GGUF file.

        See :mod:`ttg_envs.model_spec` (options may also sit in the spec: ``name?revision=...``).
        ``device``: where the model runs; ``threads``: torch's CPU threads
        (:func:`~ttg_envs.model_spec.set_threads`; None: torch's default).
        """
        from ..model_spec import load_causal_lm, set_threads

        set_threads(threads)

        model, tokenizer = load_causal_lm(name, dtype=dtype, revision=revision, gguf_file=gguf_file)
        if device:
            model.to(device)
        return cls(model, tokenizer, sampling, **kwargs)

    def count_prompt_tokens(self, messages: Messages) -> int:
        """Exact prompt length through the model's chat template."""
        text = self.tokenizer.apply_chat_template(
            list(messages), add_generation_prompt=True, tokenize=False, **self.sampling.template_kwargs()
        )
        return len(self.tokenizer(text, add_special_tokens=False)["input_ids"])

    def generate(self, histories: Sequence[Messages], n: int = 1) -> list[list[Generation]]:
        """``n`` sampled responses per history."""
        out: list[list[Generation]] = []
        for start in range(0, len(histories), self.batch_size):
            out.extend(self._generate_batch(histories[start : start + self.batch_size], n))
        return out

    def _generate_batch(self, histories: Sequence[Messages], n: int) -> list[list[Generation]]:
        torch, s = self._torch, self.sampling
        prompts = [
            self.tokenizer.apply_chat_template(list(h), add_generation_prompt=True, tokenize=False, **s.template_kwargs())
            for h in histories
        ]
        side, self.tokenizer.padding_side = self.tokenizer.padding_side, "left"
        try:
            batch = self.tokenizer(prompts, return_tensors="pt", padding=True, add_special_tokens=False)
        finally:
            self.tokenizer.padding_side = side
        batch = {k: v.to(self.model.device) for k, v in batch.items()}
        greedy = s.temperature <= 0
        options: dict[str, Any] = {
            "do_sample": not greedy,
            "max_new_tokens": s.max_tokens,
            "num_return_sequences": n,
            "pad_token_id": self.tokenizer.pad_token_id,
        }
        if not greedy:
            options.update(temperature=s.temperature, top_p=s.top_p, top_k=s.top_k or 0)
        if s.seed is not None and s.seed != self._seeded:
            # Seed once per seed value: an episode reproduces, while its steps still draw fresh noise.
            torch.manual_seed(s.seed)
            self._seeded = s.seed
        with torch.no_grad():
            sequences = self.model.generate(**batch, **options)
        new = sequences[:, batch["input_ids"].shape[1] :].tolist()
        gens = [self._to_generation(ids) for ids in new]
        return [gens[i * n : (i + 1) * n] for i in range(len(histories))]

    def _to_generation(self, ids: list[int]) -> Generation:
        end = next((i for i, t in enumerate(ids) if t in self._stop), len(ids))
        ids = ids[:end]
        return Generation(self.tokenizer.decode(ids, skip_special_tokens=True), ids)
