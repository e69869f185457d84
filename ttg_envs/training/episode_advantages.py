"""Step-level advantages of a rollout batch, from the episodes' info fields, through ``credit``.

DeltaTTG reads the ProgressMeterWrapper's fields of every state h_t (``ttg_can_complete``,
``ttg``, ``ttg_valid``) and TokenCounter's ``assistant_tokens``; GiGPO and HGPO read the env's
``state_key``; GRPO needs only rewards and group ids. DAPO's advantages are GRPO's: its dynamic
sampling (dropping groups whose rewards all agree, drawing more batches) happens in the trainer.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from .. import credit
from .actor_rollout import Episode, nan_where_none

if TYPE_CHECKING:
    import torch

from ..registry import DEFAULT_SETTINGS

__all__ = ["ESTIMATORS", "episode_advantages"]

#: Advantage estimators the trainer offers.
ESTIMATORS = ("delta_ttg", "grpo", "dapo", "gigpo", "hgpo")


def _padded(rows: Sequence[Sequence[float]], width: int, fill: float) -> np.ndarray:
    out = np.full((len(rows), width), fill, dtype=float)
    for i, row in enumerate(rows):
        out[i, : len(row)] = row
    return out


def episode_advantages(
    episodes: Sequence[Episode],
    estimator: str = "delta_ttg",
    *,
    failure_cost: float = DEFAULT_SETTINGS.failure_cost,
    rho: float = 0.2,
    cap: float = 5.0,
) -> torch.Tensor:
    """Advantages ``[B, T_max]`` (step t of episode b at ``[b, t]``, 0 on padding).

    ``delta_ttg`` needs the envs wrapped in TokenCounter and ProgressMeterWrapper; it applies
    Algorithm 1's rules (group advantages, fallbacks, the invalid-group rule) via
    :func:`credit.batched_token_advantages`. ``dapo`` gives GRPO advantages (the trainer has
    already filtered the groups).
    """
    if estimator not in ESTIMATORS:
        raise ValueError(f"unknown estimator {estimator!r}; expected one of {ESTIMATORS}")
    rewards = np.array([e.reward for e in episodes], dtype=float)
    groups = np.array([e.group for e in episodes])
    steps = np.array([e.num_steps for e in episodes])
    width = int(steps.max())
    if estimator in ("grpo", "dapo"):
        return credit.batched_grpo(rewards, groups, steps)
    if estimator in ("gigpo", "hgpo"):
        keys = credit.encode_keys([e.state_field("state_key") for e in episodes], width)
        fn = credit.batched_gigpo if estimator == "gigpo" else credit.batched_hgpo
        return fn(rewards, groups, steps, keys)
    if "ttg_cost" not in episodes[0].infos[0]:
        raise ValueError("delta_ttg needs the envs wrapped in ProgressMeterWrapper (no ttg_* fields)")
    can = _padded([e.state_field("ttg_can_complete", False) for e in episodes], width, 0.0).astype(bool)
    remaining = _padded([nan_where_none(e.state_field("ttg")) for e in episodes], width, np.nan)
    valid = _padded([e.state_field("ttg_valid", False) for e in episodes], width, 1.0).astype(bool)
    n_tokens = _padded([[i["assistant_tokens"] for i in e.infos[1:]] for e in episodes], width, 0.0)
    success = np.array([e.success for e in episodes])
    return credit.batched_token_advantages(
        rewards, groups, steps, can, remaining, success, n_tokens, failure_cost, rho, cap, valid=valid
    )
