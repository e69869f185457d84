"""``NoisyPolicy``: an env's expert with probability ``1 - eps``, the env's own noise otherwise;
``make_expert_policy``: the ``expert`` / ``noisy_expert`` pair by name."""

from __future__ import annotations

import numpy as np


class NoisyPolicy:
    """Base of the envs' noisy experts: subclasses set ``expert`` and define ``noise(env)``.

    One draw from ``rng`` decides each step, before any draw the noise makes, so a seed fixes
    the whole episode.
    """

    expert: object

    def __init__(self, eps: float = 0.3, seed: int | None = None):
        if not 0.0 <= eps <= 1.0:
            raise ValueError(f"eps must be in [0, 1], got {eps}")
        self.eps = eps
        self.rng = np.random.default_rng(seed)
        self.name = f"noisy_expert_{eps:g}"

    @property
    def draws(self) -> bool:
        """Whether episodes depend on the seed (eps above 0); at eps 0 this is the expert."""
        return self.eps > 0

    def __call__(self, env) -> str:
        """The next response for ``env``."""
        if self.rng.random() < self.eps:
            return self.noise(env)
        return self.expert(env)

    def noise(self, env) -> str:
        """The response taken instead of the expert's."""
        raise NotImplementedError


#: The scripted policies of envs with an expert, by name.
EXPERT_POLICY_NAMES = ("expert", "noisy_expert")


def make_expert_policy(name: str, expert: type, noisy: type[NoisyPolicy], env_name: str, *, seed: int | None = None, eps: float = 0.3):
    """``expert()`` for ``"expert"``, ``noisy(eps=eps, seed=seed)`` for ``"noisy_expert"``."""
    if name == "expert":
        return expert()
    if name == "noisy_expert":
        return noisy(eps=eps, seed=seed)
    raise ValueError(f"unknown {env_name} policy {name!r}; choose from {EXPERT_POLICY_NAMES}")
