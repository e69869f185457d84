"""``load_actor(spec)``: an actor from a spec string."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .base import Actor, SamplingParams

#: The schemes an actor spec may start with.
SCHEMES = ("scripted", "hf", "transformers", "vllm", "openai")


def load_actor(
    spec: str | Actor, sampling: SamplingParams | Mapping[str, Any] | None = None, *, seed: int | None = None, **kwargs: Any
) -> Actor:
    """Build an actor; ``kwargs`` go to the backend's constructor.

    - an actor object: returned as is;
    - ``scripted:<policy>[:<eps>]``: :class:`~ttg_envs.agents.scripted.ScriptedActor`, e.g.
      ``scripted:noisy_expert:0.5``; ``seed`` seeds the policy;
    - ``hf:<name-or-path>`` (or ``transformers:``): :class:`~ttg_envs.agents.hf.TransformersActor`;
    - ``vllm:<name-or-path>``: :class:`~ttg_envs.agents.vllm.VLLMActor`;
    - ``openai:<base-url>#<model>``: :class:`~ttg_envs.agents.http.OpenAIActor`.

    ``seed`` also becomes the sampling seed of model actors when ``sampling`` has none; ``sampling``
    may be a dict of :class:`SamplingParams` fields (as JSON ``--actor-kwargs`` give it).
    """
    if not isinstance(spec, str):
        if hasattr(spec, "sample"):
            return spec
        raise TypeError(f"cannot make an actor from {type(spec).__name__}")
    scheme, sep, rest = spec.partition(":")
    if not sep or scheme not in SCHEMES or not rest:
        raise ValueError(f"actor spec must be one of {', '.join(s + ':...' for s in SCHEMES)}; got {spec!r}")
    if scheme == "scripted":
        from ..registry import parse_policy
        from .scripted import ScriptedActor

        policy = parse_policy(rest)
        return ScriptedActor(policy.name, seed=seed, **{**kwargs, **policy.kwargs})
    if isinstance(sampling, Mapping):  # e.g. from a JSON --actor-kwargs '{"sampling": {"max_tokens": 64}}'
        sampling = SamplingParams(**sampling)
    sampling = sampling or SamplingParams()
    if seed is not None and sampling.seed is None:
        from dataclasses import replace

        sampling = replace(sampling, seed=seed)
    if scheme in ("hf", "transformers"):
        from .hf import TransformersActor

        return TransformersActor.from_pretrained(rest, sampling, **kwargs)
    if scheme == "vllm":
        from .vllm import VLLMActor

        return VLLMActor(rest, sampling, **kwargs)
    from .http import OpenAIActor

    base_url, sep, model = rest.rpartition("#")
    if not sep or not base_url or not model:
        raise ValueError(f"openai actor spec must be openai:<base-url>#<model>, got {spec!r}")
    return OpenAIActor(base_url, model, sampling, **kwargs)
