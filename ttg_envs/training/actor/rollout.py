"""Multi-turn rollouts of a causal LM policy through ttg envs, kept as token ids for training.

Each turn the env's transcript (``env.unwrapped.messages``, the history h_t) goes through the
tokenizer's chat template; the policy samples the action, which is stepped as a
:class:`~ttg_envs.core.Generation` so that ``TokenCounter`` counts exactly the generated tokens.
All live episodes of a batch advance in lockstep, one batched ``generate`` call per turn.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import gymnasium as gym
import numpy as np

from ...agents.window import PromptWindow
from ...core import Generation
from ...wrappers.progress_meter import step_all
from .segment_ids import text_ids

__all__ = [
    "Episode",
    "HFGenerator",
    "TokenGenerator",
    "VLLMGenerator",
    "additive_mask",
    "cache_kwarg",
    "chat_head_ids",
    "chat_prompt_ids",
    "nan_where_none",
    "run_episodes",
]


@dataclass
class Episode:
    """One finished trajectory.

    Attributes:
        group: prompt-group id (the G rollouts of one task share it).
        task_index: the env task it played.
        prompts: per turn t, the token ids of h_t with the assistant generation prompt.
        actions: per turn t, the token ids the policy generated (the trainable tokens).
        infos: the reset info, then one info per step; ``infos[t]`` describes the state h_t.
        reward: the sum of the env's rewards (R_i).
        success: the last step's ``info["success"]``.
        logprobs: per turn t, the sampler's log pi(token | prefix) of each of ``actions[t]``
            (the model's own distribution, before temperature, top-p or masking), or None when
            the generator keeps none.
    """

    group: int
    task_index: int
    prompts: list[list[int]] = field(default_factory=list)
    actions: list[list[int]] = field(default_factory=list)
    infos: list[dict[str, Any]] = field(default_factory=list)
    reward: float = 0.0
    success: bool = False
    logprobs: list[list[float]] | None = None

    @property
    def num_steps(self) -> int:
        """T, the number of actions."""
        return len(self.actions)

    def state_field(self, name: str, default: Any = None) -> list[Any]:
        """``info[name]`` for the states h_0..h_{T-1} (the ones the actions were taken in)."""
        return [info.get(name, default) for info in self.infos[: self.num_steps]]


class TokenGenerator(Protocol):
    """Samples one continuation per prompt (token ids in, generated token ids out)."""

    def generate(self, prompts: Sequence[Sequence[int]], max_new_tokens: int, temperature: float, top_p: float) -> list[list[int]]:
        """The generated ids of every prompt, up to and including the end-of-turn token."""
        ...


class HFGenerator:
    """:class:`TokenGenerator` over a transformers causal LM (left padding, one batched call).

    Sampling draws from torch's global RNG, so ``torch.manual_seed`` makes it reproducible.
    :meth:`generate_with_logprobs` also keeps the model's log-probability of every generated
    token, which the trainer uses as the rollout policy's instead of recomputing them.
    """

    def __init__(self, model: Any, tokenizer: Any):
        self.model = model
        self.tokenizer = tokenizer
        eos = model.generation_config.eos_token_id
        self.stop_ids = set(eos if isinstance(eos, list) else [eos]) - {None}
        self.pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else next(iter(self.stop_ids))

    def generate(self, prompts: Sequence[Sequence[int]], max_new_tokens: int, temperature: float, top_p: float) -> list[list[int]]:
        """See :class:`TokenGenerator`."""
        return self.generate_with_logprobs(prompts, max_new_tokens, temperature, top_p)[0]

    def generate_with_logprobs(
        self, prompts: Sequence[Sequence[int]], max_new_tokens: int, temperature: float, top_p: float
    ) -> tuple[list[list[int]], list[list[float]]]:
        """The generated ids of every prompt and log pi(token | prefix) of each under the model's
        raw logits (before temperature, top-p or any masking: the distribution the trainer scores)."""
        import torch

        width = max(len(p) for p in prompts)
        ids = torch.full((len(prompts), width), self.pad_id, dtype=torch.long)
        attention = torch.zeros_like(ids)
        for row, prompt in enumerate(prompts):
            ids[row, width - len(prompt) :] = torch.tensor(prompt)
            attention[row, width - len(prompt) :] = 1
        device = next(self.model.parameters()).device
        sampling = {"do_sample": True, "temperature": temperature, "top_p": top_p} if temperature > 0 else {"do_sample": False}
        was_training = self.model.training
        self.model.eval()
        with torch.no_grad():
            out = self.model.generate(
                input_ids=ids.to(device),
                attention_mask=attention.to(device),
                max_new_tokens=max_new_tokens,
                pad_token_id=self.pad_id,
                return_dict_in_generate=True,
                output_logits=True,
                **sampling,
                **self._generate_kwargs(prompts, width),
            )
            new = out.sequences[:, width:]
            raw = torch.stack(out.logits, dim=1)[:, : new.shape[1]].float()
            logp = torch.log_softmax(raw, dim=-1).gather(-1, new[..., None]).squeeze(-1).cpu()
        self.model.train(was_training)
        actions = [self._cut(row.tolist()) for row in new.cpu()]
        return actions, [logp[i, : len(a)].tolist() for i, a in enumerate(actions)]

    def follows(self, model: Any) -> bool:
        """True when this generator samples from ``model`` itself (its kept log-probs are the model's)."""
        return self.model is model

    def _generate_kwargs(self, prompts: Sequence[Sequence[int]], width: int) -> dict[str, Any]:
        """Extra ``model.generate`` arguments for one batch (subclasses constrain decoding here)."""
        return {}

    def _cut(self, tokens: list[int]) -> list[int]:
        for i, token in enumerate(tokens):
            if token in self.stop_ids:
                return tokens[: i + 1]
        return tokens


class VLLMGenerator:
    """:class:`TokenGenerator` over an in-process vLLM engine that takes the policy's weights after each update.

    The engine runs in this process (``VLLM_ENABLE_V1_MULTIPROCESSING=0``) so that
    :meth:`load_weights` hands the trainer's tensors to the worker without copying them through
    a pipe. Each request's sampling seed is drawn from torch's global RNG, so the trainer's
    per-step seeding makes rollouts reproducible here too. :meth:`generate_with_logprobs` keeps
    vLLM's log-probability of every sampled token (its default ``raw_logprobs``: before
    temperature and top-p, the distribution the trainer scores).

    A LoRA policy (``lora_rank``) samples through vLLM's own LoRA support: the engine holds the
    base weights, and :meth:`load_weights` of a peft model saves its adapter and makes it the one
    every request uses (a new adapter id per sync, so no stale cache entry survives).

    Args:
        model: path or name of the policy's weights at the start of training (the base of a LoRA policy).
        lora_rank: the LoRA policy's rank (vLLM's ``enable_lora`` with ``max_lora_rank`` rounded up
            to a rank vLLM accepts); None: a full-weight policy.
        llm_kwargs: passed to ``vllm.LLM`` (e.g. ``gpu_memory_utilization=0.4``, ``dtype``).
    """

    def __init__(self, model: str, *, lora_rank: int | None = None, **llm_kwargs: Any):
        import os

        from ..._optional import require
        from ..._vllm_engine import lora_engine_kwargs, start_llm

        os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
        self.vllm = require("vllm", "vllm")
        if lora_rank:
            llm_kwargs = {**lora_engine_kwargs(lora_rank), **llm_kwargs}
        self.llm = start_llm(self.vllm, type(self).__name__, model=model, **llm_kwargs)
        self.lora_request: Any = None  # the adapter every request uses (set by load_weights of a peft model)
        self._synced: Any = None  # a weak reference to the model last loaded by load_weights
        self._adapters: Any = None  # the folder the synced adapters are written to

    def generate(self, prompts: Sequence[Sequence[int]], max_new_tokens: int, temperature: float, top_p: float) -> list[list[int]]:
        """See :class:`TokenGenerator`."""
        return self.generate_with_logprobs(prompts, max_new_tokens, temperature, top_p)[0]

    def generate_with_logprobs(
        self, prompts: Sequence[Sequence[int]], max_new_tokens: int, temperature: float, top_p: float
    ) -> tuple[list[list[int]], list[list[float]]]:
        """The generated ids of every prompt and vLLM's log pi(token | prefix) of each (raw logits)."""
        import torch

        seeds = torch.randint(2**31 - 1, (len(prompts),)).tolist()
        params = [
            self.vllm.SamplingParams(max_tokens=max_new_tokens, temperature=temperature, top_p=top_p, seed=seed, logprobs=0)
            for seed in seeds
        ]
        requests = [{"prompt_token_ids": list(p)} for p in prompts]
        outputs = self.llm.generate(requests, params, use_tqdm=False, lora_request=self.lora_request)
        samples = [o.outputs[0] for o in outputs]
        actions = [list(s.token_ids) for s in samples]
        # logprobs=0: each position holds the sampled token's entry (plus none of the top ones).
        logprobs = [[position[token].logprob for position, token in zip(s.logprobs, s.token_ids)] for s in samples]
        return actions, logprobs

    def follows(self, model: Any) -> bool:
        """True when the engine holds ``model``'s weights (the last :meth:`load_weights` was of it) in
        float32, as ``model`` does: its kept log-probs are then the model's own, up to kernel rounding
        (within 1e-4 per token on a CPU, tests/test_vllm_training.py). In lower precision they are not,
        and the trainer recomputes them."""
        import torch

        synced = self._synced() if self._synced is not None else None
        engine_dtype = self.llm.llm_engine.model_config.dtype
        return synced is model and engine_dtype == torch.float32 and next(model.parameters()).dtype == torch.float32

    def load_weights(self, model: Any) -> None:
        """Copy ``model``'s current weights (a peft model's adapter) into the engine and drop its prefix cache."""
        import weakref

        from ..lora import is_lora

        if is_lora(model):
            self._load_adapter(model)
        else:
            # The worker's in-place reload re-applies vLLM's post-load weight processing (fused
            # and repacked layouts), which a bare ``model.load_weights`` would skip.
            weights = list(model.state_dict().items())
            self.llm.collective_rpc("reload_weights", kwargs={"weights_iterator": weights})
            self.llm.reset_prefix_cache()
        self._synced = weakref.ref(model)

    def _load_adapter(self, model: Any) -> None:
        import shutil
        import tempfile
        import weakref
        from pathlib import Path

        from vllm.lora.request import LoRARequest

        if self.lora_request is None and not self.llm.llm_engine.vllm_config.lora_config:
            raise ValueError("a LoRA policy's rollouts need the engine built with its rank: VLLMGenerator(..., lora_rank=R)")
        if self._adapters is None:
            self._adapters = Path(tempfile.mkdtemp(prefix="ttg-vllm-lora-"))
            weakref.finalize(self, shutil.rmtree, self._adapters, True)
        old = self.lora_request
        number = old.lora_int_id + 1 if old is not None else 1
        folder = self._adapters / f"v{number}"
        model.save_pretrained(folder)
        self.lora_request = LoRARequest(f"policy-v{number}", number, str(folder))
        self.llm.llm_engine.add_lora(self.lora_request)  # loads it now, so a bad adapter fails here
        if old is not None:
            self.llm.llm_engine.remove_lora(old.lora_int_id)
            shutil.rmtree(old.lora_path, ignore_errors=True)


def cache_kwarg(model: Any) -> str:
    """The name under which ``model``'s forward takes a KV cache (transformers 5.24 renamed
    ``past_key_values`` to ``cache``; the old name still works there, with a warning). A wrapper
    with no ``forward`` (the LoRA reference, :class:`~ttg_envs.training.lora.AdapterOff`) is
    read through its ``__call__``."""
    import inspect

    forward = getattr(model, "forward", model)
    return "cache" if "cache" in inspect.signature(forward).parameters else "past_key_values"


def additive_mask(keys: Any, queries: int, dtype: Any = None) -> Any:
    """A 4D ``dtype`` (default float32) attention mask ``[B, 1, queries, K]`` (0 where attended, the dtype's minimum
    where not) for the last ``queries`` positions of ``K``, causal over the keys before them and
    limited to ``keys`` (``[B, K]``, 1 for a real token; ``[1, K]`` for a mask every row shares).

    Models take a 4D mask as it is. torch's CPU attention kernel runs its forward about a third
    faster with an additive float mask than with the boolean one transformers builds (same
    values); the minimum rather than -inf keeps a query that sees no key finite (a padding
    position, whose output no real position reads).
    """
    import torch

    dtype = dtype or torch.float32
    width, low = keys.shape[1], torch.finfo(dtype).min
    after = torch.ones((queries, width), dtype=torch.bool, device=keys.device).tril(width - queries).logical_not_()
    causal = torch.zeros((queries, width), dtype=dtype, device=keys.device).masked_fill_(after, low)
    padding = torch.zeros(keys.shape, dtype=dtype, device=keys.device).masked_fill_(keys == 0, low)
    return torch.minimum(causal[None, None], padding[:, None, None, :])  # one pass over the 4D mask


def chat_prompt_ids(tokenizer: Any, messages: Sequence[dict[str, Any]]) -> list[int]:
    """Token ids of ``messages`` through the chat template, ending with the assistant prompt."""
    text = tokenizer.apply_chat_template(list(messages), tokenize=False, add_generation_prompt=True)
    return text_ids(tokenizer, text)


def chat_head_ids(tokenizer: Any, messages: Sequence[dict[str, Any]]) -> list[int]:
    """Token ids of the transcript's head (:func:`~ttg_envs.agents.window.split_turns`: the
    messages before the first assistant message) through the chat template, without the
    assistant prompt: a prefix of every windowed prompt of the episode when the template renders
    messages one after another (the caller checks)."""
    from ...agents.window import split_turns

    head = split_turns(messages)[0]
    text = tokenizer.apply_chat_template(list(head), tokenize=False, add_generation_prompt=False)
    return text_ids(tokenizer, text)


def run_episodes(
    envs: Sequence[gym.Env],
    generator: TokenGenerator,
    tokenizer: Any,
    tasks: Sequence[tuple[int, int, int]],
    max_tokens_per_turn: int,
    temperature: float = 1.0,
    top_p: float = 1.0,
    window: PromptWindow | None = None,
) -> list[Episode]:
    """Play ``tasks[i] = (group, task_index, seed)`` in ``envs[i]`` until every episode ends.

    The envs' own ``max_steps`` bounds the number of turns (table 4's max turns). ``window``
    chooses the part of each transcript the policy is prompted with (default: all of it); the
    prompt ids a row trains on are exactly the windowed prompt the action was sampled from.
    A generator with ``generate_with_logprobs`` (:class:`HFGenerator`, :class:`VLLMGenerator`) fills ``Episode.logprobs``.
    Each turn the live envs step together (:func:`~ttg_envs.wrappers.progress_meter.step_all`),
    so a progress meter scores all their new states in one call.
    """
    window = window or PromptWindow()

    def prompt_ids(messages: Sequence[dict[str, Any]]) -> list[int]:
        if window.is_full:
            return chat_prompt_ids(tokenizer, messages)
        counted: dict[int, list[int]] = {}  # message count -> ids of the last candidate select() counted

        def count(candidate: Sequence[dict[str, Any]]) -> int:
            counted.clear()
            counted[len(candidate)] = chat_prompt_ids(tokenizer, candidate)
            return len(counted[len(candidate)])

        kept = window.select(messages, count)
        return counted.get(len(kept)) or chat_prompt_ids(tokenizer, kept)

    episodes: list[Episode] = []
    for env, (group, task_index, seed) in zip(envs, tasks, strict=True):
        _, info = env.reset(seed=seed, options={"task_index": task_index})
        episodes.append(Episode(group=group, task_index=task_index, infos=[info]))
    keeps = hasattr(generator, "generate_with_logprobs")
    if keeps:
        for episode in episodes:
            episode.logprobs = []
    # A generator that shares heads runs each task's head (system prompt and statement, kept by
    # every window) once per call of this function, not once per rollout and turn.
    shares = keeps and getattr(generator, "shares_heads", False)
    head_ids = [chat_head_ids(tokenizer, env.unwrapped.messages) for env in envs] if shares else []
    head_cache: dict = {}
    live = list(range(len(episodes)))
    while live:
        prompts = [prompt_ids(envs[i].unwrapped.messages) for i in live]
        if shares:
            heads = [len(head_ids[i]) if prompt[: len(head_ids[i])] == head_ids[i] else 0 for i, prompt in zip(live, prompts)]
            actions, logprobs = generator.generate_with_logprobs(
                prompts, max_tokens_per_turn, temperature, top_p, heads=heads, head_cache=head_cache
            )
        elif keeps:
            actions, logprobs = generator.generate_with_logprobs(prompts, max_tokens_per_turn, temperature, top_p)
        else:
            actions, logprobs = generator.generate(prompts, max_tokens_per_turn, temperature, top_p), [None] * len(live)
        steps = [Generation(tokenizer.decode(action, skip_special_tokens=True), action) for action in actions]
        results = step_all([envs[i] for i in live], steps)
        still = []
        for i, prompt, action, logp, result in zip(live, prompts, actions, logprobs, results, strict=True):
            _, reward, terminated, truncated, info = result
            episode = episodes[i]
            episode.prompts.append(prompt)
            episode.actions.append(action)
            if keeps:
                episode.logprobs.append(logp)
            episode.infos.append(info)
            episode.reward += float(reward)
            episode.success = bool(info.get("success", False))
            if not (terminated or truncated):
                still.append(i)
        live = still
    return episodes


def nan_where_none(values: Sequence[Any]) -> np.ndarray:
    """Floats with NaN where a value is None (the meter's ``ttg`` when it predicts failure)."""
    return np.array([np.nan if v is None else float(v) for v in values], dtype=float)
