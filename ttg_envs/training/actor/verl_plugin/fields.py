"""The per-episode ``ttg_*`` fields an agent loop puts in verl's batch, and their advantages.

Pure NumPy/torch (no verl import) so that it is testable anywhere. One batch row is one whole
episode: ``response_mask`` marks the assistant tokens of every turn, and ``ttg_token_step`` gives,
for each response token, the index of the action it belongs to (-1 for observation tokens).
Per-step lists hold the states h_0..h_{T-1} the actions were taken in.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np

from ....credit import CAP, RHO
from ....registry import env_settings, failure_cost, turn_limit
from ..advantages import ALIASES, pad_rows, step_advantages

if TYPE_CHECKING:
    import torch

__all__ = ["ESTIMATOR_NAMES", "FIELDS", "TaskLimits", "batch_advantages", "episode_fields", "task_limits"]

#: The non-tensor batch keys the agent loop writes (one object per row).
FIELDS = (
    "ttg_token_step",
    "ttg_can_complete",
    "ttg_remaining",
    "ttg_valid",
    "ttg_n_tokens",
    "ttg_state_keys",
    "ttg_success",
    "ttg_failure_cost",
)

#: verl estimator names this plugin registers: ``delta_ttg`` and the ``ttg_`` aliases of the
#: trainer's baselines (:data:`~ttg_envs.training.actor.advantages.ALIASES`; DAPO is verl's own sampling).
ESTIMATOR_NAMES = ("delta_ttg", *(name for name, canonical in ALIASES.items() if canonical != "dapo"))


class TaskLimits(NamedTuple):
    """What the agent loop plays a dataset row's task with."""

    max_turns: int
    max_tokens_per_turn: int
    failure_cost: float


def task_limits(task: Mapping[str, Any]) -> TaskLimits:
    """The turn limit, tokens per turn and C of ``extra_info["ttg"]``'s task: its own values, else the
    registry's for its env id (the ones ``ttg train`` and ``ttg eval`` use)."""
    env_id = task["env_id"]
    return TaskLimits(
        int(task.get("max_turns") or turn_limit(env_id)),
        int(task.get("max_tokens_per_turn") or env_settings(env_id).max_tokens_per_turn),
        float(task.get("failure_cost") or failure_cost(env_id)),
    )


def episode_fields(infos: Sequence[Mapping[str, Any]], token_step: Sequence[int], failure_cost: float) -> dict[str, Any]:
    """The ``ttg_*`` fields of one episode from its info dicts (reset info, then one per step).

    Reads the ProgressMeterWrapper fields of every state (absent without a meter: then
    ``delta_ttg`` falls back to the group advantage), TokenCounter's ``assistant_tokens`` and the
    env's ``state_key`` and ``success``.
    """
    steps = len(infos) - 1
    states = infos[:steps]
    return {
        "ttg_token_step": [int(s) for s in token_step],
        "ttg_can_complete": [bool(i.get("ttg_can_complete", False)) for i in states],
        "ttg_remaining": [None if i.get("ttg") is None else float(i["ttg"]) for i in states],
        "ttg_valid": [bool(i.get("ttg_valid", True)) for i in states],
        "ttg_n_tokens": [int(i.get("assistant_tokens", 0)) for i in infos[1:]],
        "ttg_state_keys": [str(i.get("state_key", "")) for i in states],
        "ttg_success": bool(infos[-1].get("success", False)) if steps else False,
        "ttg_failure_cost": float(failure_cost),
    }


def batch_advantages(
    estimator: str,
    token_level_rewards: torch.Tensor,
    response_mask: torch.Tensor,
    index: Sequence[Any],
    non_tensor_batch: Mapping[str, Sequence[Any]],
    *,
    rho: float = RHO,
    cap: float = CAP,
) -> torch.Tensor:
    """Token-level advantages ``[B, L]`` (0 outside ``response_mask``) for one of :data:`ESTIMATOR_NAMES`.

    ``index`` is verl's ``uid`` (the prompt group of each row); R_i is the row's summed
    ``token_level_rewards``. The advantages are :func:`~ttg_envs.training.actor.advantages.step_advantages`'s.
    """
    import torch

    if estimator not in ESTIMATOR_NAMES:
        raise ValueError(f"unknown estimator {estimator!r}; expected one of {ESTIMATOR_NAMES}")
    missing = [k for k in FIELDS if k not in non_tensor_batch]
    if missing:
        raise KeyError(
            f"the batch lacks {missing}: run the ttg agent loop and install_hook() (see verl_plugin), "
            "with trainer.use_v1=false (verl's V1 trainer does not pass them on)"
        )
    rewards = token_level_rewards.sum(-1).float().cpu()
    groups = np.unique(np.asarray(index, dtype=object).astype(str), return_inverse=True)[1]
    n_tokens = list(non_tensor_batch["ttg_n_tokens"])
    token_step = torch.as_tensor(pad_rows(non_tensor_batch["ttg_token_step"], response_mask.shape[1], -1)).long()
    # verl's response_mask is the authority on which tokens train (it may cut long responses).
    token_step = torch.where(response_mask.cpu().bool(), token_step, -1)
    out = step_advantages(
        estimator,
        rewards,
        groups,
        [len(n) for n in n_tokens],
        can_complete=non_tensor_batch["ttg_can_complete"],
        remaining=non_tensor_batch["ttg_remaining"],
        valid=non_tensor_batch["ttg_valid"],
        success=non_tensor_batch["ttg_success"],
        n_tokens=n_tokens,
        state_keys=list(non_tensor_batch["ttg_state_keys"]),
        failure_cost=float(np.asarray(non_tensor_batch["ttg_failure_cost"], dtype=float)[0]),
        rho=rho,
        cap=cap,
        token_step=token_step,
    )
    return out.to(device=response_mask.device, dtype=torch.float32) * response_mask
