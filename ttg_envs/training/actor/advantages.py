"""Step-level advantages from episodes' per-step signals, through ``credit``: one function for
``ttg train`` (:func:`episode_advantages`) and the verl plugin (``verl_plugin.fields.batch_advantages``).

DeltaTTG reads the ProgressMeterWrapper's fields of every state h_t (``ttg_can_complete``,
``ttg``, ``ttg_valid``; in the trainer its recorded costs ``ttg_cost``, so C reaches the
advantages only through the env stack) and TokenCounter's ``assistant_tokens``; GiGPO and HGPO read the env's
``state_key``; GRPO needs only rewards and group ids. DAPO's advantages are GRPO's: its dynamic
sampling (dropping groups whose rewards all agree, drawing more batches) happens in the trainer.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from ... import credit
from ...credit import CAP, RHO
from ...registry import DEFAULT_SETTINGS

if TYPE_CHECKING:
    import torch

    from .rollout import Episode

__all__ = [
    "ALIASES",
    "ESTIMATORS",
    "canonical_estimator",
    "episode_advantages",
    "no_signal_warning",
    "pad_rows",
    "step_advantages",
    "varied_groups",
]

#: Advantage estimators, by the names ``ttg train --estimator`` takes.
ESTIMATORS = ("delta_ttg", "grpo", "dapo", "gigpo", "hgpo")
#: Other accepted names: the verl plugin registers the baselines as ``ttg_<name>``, since verl
#: has estimators of its own called ``grpo``, ``gigpo``...
ALIASES = {f"ttg_{name}": name for name in ESTIMATORS if name != "delta_ttg"}


def varied_groups(rewards: Sequence[float], groups: Sequence[Any], min_std: float = 1e-6) -> int:
    """How many groups of rollouts (episodes with equal ``groups`` ids) have rewards that differ."""
    by_group: dict[Any, list[float]] = {}
    for reward, group in zip(rewards, groups, strict=True):
        by_group.setdefault(group, []).append(float(reward))
    return sum(len(r) > 1 and float(np.std(r)) > min_std for r in by_group.values())


def no_signal_warning(rewards: Sequence[float], groups: Sequence[Any], advantages: Any = None) -> str | None:
    """A warning when no group's rewards vary, so group-relative advantages carry nothing; None otherwise.

    With ``advantages`` (any array of the step's advantages) it also says whether anything is left
    to learn from (DeltaTTG's meter credit can be non-zero where the rewards all agree).
    """
    if not len(rewards) or varied_groups(rewards, groups):
        return None
    values = sorted({float(r) for r in rewards})
    shown = ", ".join(f"{v:g}" for v in values[:3]) + (", ..." if len(values) > 3 else "")
    text = f"no group of rollouts has varied rewards (rewards: {shown}): the outcome advantages are all 0"
    if advantages is not None and not np.any(np.abs(np.nan_to_num(np.asarray(advantages, dtype=float))) > 0):
        return text + "; every step advantage is 0, so this step cannot change the policy (nothing to learn from)"
    return text


def canonical_estimator(name: str) -> str:
    """The :data:`ESTIMATORS` name of ``name`` (an alias such as ``ttg_grpo`` included)."""
    name = ALIASES.get(name, name)
    if name not in ESTIMATORS:
        raise ValueError(f"unknown estimator {name!r}; expected one of {ESTIMATORS} (or {tuple(ALIASES)})")
    return name


def pad_rows(rows: Sequence[Sequence[Any]], width: int, fill: float) -> np.ndarray:
    """Ragged rows as a ``[len(rows), width]`` float array, ``fill`` after each row's end and for None."""
    out = np.full((len(rows), width), fill, dtype=float)
    for i, row in enumerate(rows):
        values = [fill if v is None else v for v in row][:width]
        out[i, : len(values)] = values
    return out


def step_advantages(
    estimator: str,
    rewards: Any,
    groups: Any,
    steps: Sequence[int],
    *,
    can_complete: Sequence[Sequence[bool]] | None = None,
    remaining: Sequence[Sequence[float | None]] | None = None,
    valid: Sequence[Sequence[bool]] | None = None,
    success: Sequence[bool] | None = None,
    n_tokens: Sequence[Sequence[int]] | None = None,
    state_keys: Sequence[Sequence[Any]] | None = None,
    costs: Sequence[Sequence[float]] | None = None,
    failure_cost: float = DEFAULT_SETTINGS.failure_cost,
    rho: float = RHO,
    cap: float = CAP,
    token_step: Any = None,
) -> torch.Tensor:
    """Advantages of a batch of episodes: ``[B, T_max]`` per step, or per token given ``token_step``.

    Per-episode rows hold one value per state h_0..h_{T-1} (``n_tokens``: one per action);
    ``rewards`` is R_i and ``groups`` the rollout group of each episode; ``costs`` (one value per
    state h_0..h_T, terminal included) are the recorded costs of eq. 7, read instead of rebuilding
    them from ``remaining`` and ``failure_cost``. ``delta_ttg`` applies
    Algorithm 1 (group advantages, fallbacks, the invalid-group rule) through
    :func:`credit.batched_token_advantages`, the baselines through ``credit.batched_*``.
    """
    estimator = canonical_estimator(estimator)
    steps = np.asarray(steps)
    width = max(int(steps.max()), 1)
    if estimator in ("grpo", "dapo"):
        return credit.batched_grpo(rewards, groups, steps, token_step=token_step)
    if estimator in ("gigpo", "hgpo"):
        keys = credit.encode_keys(list(state_keys), width)
        fn = credit.batched_gigpo if estimator == "gigpo" else credit.batched_hgpo
        return fn(rewards, groups, steps, keys, token_step=token_step)
    return credit.batched_token_advantages(
        rewards,
        groups,
        steps,
        pad_rows(can_complete, width, 0).astype(bool),
        pad_rows(remaining, width, np.nan),
        np.asarray(success, dtype=bool),
        pad_rows(n_tokens, width, 0),
        failure_cost,
        rho,
        cap,
        valid=pad_rows(valid, width, 1).astype(bool),
        token_step=token_step,
        costs=None if costs is None else pad_rows(costs, width + 1, 0),
    )


def episode_advantages(
    episodes: Sequence[Episode],
    estimator: str = "delta_ttg",
    *,
    rho: float = RHO,
    cap: float = CAP,
) -> torch.Tensor:
    """Advantages ``[B, T_max]`` of the trainer's episodes (step t of episode b at ``[b, t]``, 0 on padding).

    ``delta_ttg`` needs the envs wrapped in TokenCounter and ProgressMeterWrapper, and reads the
    costs c_0..c_T that the wrapper recorded (``ttg_cost``, with the C it was built with). ``dapo``
    gives GRPO advantages (the trainer has already filtered the groups).
    """
    estimator = canonical_estimator(estimator)
    if estimator == "delta_ttg" and "ttg_cost" not in episodes[0].infos[0]:
        raise ValueError("delta_ttg needs the envs wrapped in ProgressMeterWrapper (no ttg_* fields)")
    metered = estimator == "delta_ttg"
    return step_advantages(
        estimator,
        np.array([e.reward for e in episodes], dtype=float),
        np.array([e.group for e in episodes]),
        [e.num_steps for e in episodes],
        can_complete=[e.state_field("ttg_can_complete", False) for e in episodes] if metered else None,
        remaining=[e.state_field("ttg") for e in episodes] if metered else None,
        valid=[e.state_field("ttg_valid", False) for e in episodes] if metered else None,
        success=[e.success for e in episodes],
        n_tokens=[[i["assistant_tokens"] for i in e.infos[1:]] for e in episodes] if metered else None,
        state_keys=[e.state_field("state_key") for e in episodes] if estimator in ("gigpo", "hgpo") else None,
        costs=[[i["ttg_cost"] for i in e.infos[: e.num_steps + 1]] for e in episodes] if metered else None,
        rho=rho,
        cap=cap,
    )
