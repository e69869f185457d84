"""``EnvSpec``: everything the library knows about one registered env, in one frozen record.

The records themselves live in :mod:`ttg_envs.envs` (one per benchmark, next to the registration);
every part of the library that needs a per-env fact (table 4's settings, the failure cost C, the
scripted policies, the meter's task pattern, the shipped meter) reads it from there.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

__all__ = ["EnvSettings", "EnvSpec"]


@dataclass(frozen=True)
class EnvSettings:
    """Paper table 4's common and DeltaTTG settings for one environment (Qwen3-4B column).

    ``batch_size`` counts tasks per update; each task gets ``group_size`` rollouts.
    """

    lr: float
    batch_size: int
    group_size: int
    max_turns: int
    max_tokens_per_turn: int
    kl_coef: float
    entropy_coef: float
    failure_cost: float
    temperature: float = 1.0
    top_p: float = 1.0
    ppo_epochs: int = 1
    rho: float = 0.2
    cap: float = 5.0


@dataclass(frozen=True)
class EnvSpec:
    """One registered env.

    Attributes:
        id: the gymnasium id (``ttg/ALFWorld-v0``).
        entry_point: ``module:Class`` that ``gym.make`` imports.
        policies: ``module:function`` building the env's scripted policies by name
            (``factory(name, seed=..., **kwargs) -> policy``).
        splits: the named splits its ``split`` argument takes.
        settings: paper table 4's training settings (C, max turns, ...).
        task_pattern: a regex whose group 1 is the task statement in the first observation
            (the encoder meter pairs it with every turn); None when the env has none.
        meter: the folder under ``meters/shipped`` of the meter ``load_meter(id)`` loads; None: none ships.
    """

    id: str
    entry_point: str
    policies: str
    splits: tuple[str, ...]
    settings: EnvSettings
    task_pattern: str | None = None
    meter: str | None = None

    @property
    def failure_cost(self) -> float:
        """C of eq. 7 (table 4)."""
        return float(self.settings.failure_cost)

    @property
    def max_steps(self) -> int:
        """Table 4's turn limit per episode."""
        return self.settings.max_turns

    def policy_factory(self) -> Callable[..., Any]:
        """The scripted-policy factory (imports the env's policy module)."""
        module, func = self.policies.split(":")
        return getattr(importlib.import_module(module), func)
