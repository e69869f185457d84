"""``scripted:<policy>`` actors: an env's scripted policies (expert, noisy expert, gold...) as actors."""

from __future__ import annotations

from typing import Any, Sequence

import gymnasium as gym

from ..core import Generation
from ..registry import policy_factory
from ..tokenization import load_tokenizer


class ScriptedActor:
    """Samples from the env's scripted policy ``policy`` (built per env id with ``policy_factory``).

    Each sample is one policy call, so a stochastic policy (the noisy expert) gives different
    candidates and a deterministic one (the expert) gives identical ones. A policy that keeps a
    place of its own (tau2's perturbed gold) offers ``sample(env, n)`` instead, drawing all ``n``
    from the same place: called ``n`` times, it would move its place on at each call. Token ids come from
    ``tokenizer`` (default: the offline Qwen3 vocabulary, TokenCounter's default too).

    Args:
        policy: a policy name of the env, e.g. ``expert`` or ``noisy_expert``.
        seed: seed of the policy's RNG.
        tokenizer: what :func:`~ttg_envs.tokenization.load_tokenizer` accepts.
        policy_kwargs: passed to the policy factory, e.g. ``eps=0.5``.
    """

    def __init__(self, policy: str, *, seed: int | None = None, tokenizer: Any = None, **policy_kwargs: Any):
        self.policy = policy
        self.seed = seed
        self.policy_kwargs = policy_kwargs
        self.tokenizer = load_tokenizer(tokenizer)
        self._policies: dict[str, Any] = {}

    def sample(self, envs: Sequence[gym.Env], n: int = 1) -> list[list[Generation]]:
        """``n`` policy calls per env."""
        out = []
        for env in envs:
            policy = self._policy_for(env)
            texts = policy.sample(env, n) if hasattr(policy, "sample") else [policy(env) for _ in range(n)]
            out.append([Generation(text, self.tokenizer.encode(text)) for text in texts])
        return out

    def _policy_for(self, env: gym.Env) -> Any:
        remote = getattr(env.unwrapped, "remote_policy", None)
        if remote is not None:  # a RemoteEnv: the policy runs on the server, next to the engine it reads
            key = ("remote", env.unwrapped.served_env_id)
            if key not in self._policies:
                self._policies[key] = remote(self.policy, seed=self.seed, **self.policy_kwargs)
            return self._policies[key]
        spec = env.unwrapped.spec or getattr(env, "spec", None)
        if spec is None:
            raise ValueError("scripted actors need an env made with gym.make (its spec names the policies)")
        if spec.id not in self._policies:
            self._policies[spec.id] = policy_factory(spec.id)(self.policy, seed=self.seed, **self.policy_kwargs)
        return self._policies[spec.id]
