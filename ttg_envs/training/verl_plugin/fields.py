"""The per-episode ``ttg_*`` fields an agent loop puts in verl's batch, and their advantages.

Pure NumPy/torch (no verl import) so that it is testable anywhere. One batch row is one whole
episode: ``response_mask`` marks the assistant tokens of every turn, and ``ttg_token_step`` gives,
for each response token, the index of the action it belongs to (-1 for observation tokens).
Per-step lists hold the states h_0..h_{T-1} the actions were taken in.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from ... import credit

if TYPE_CHECKING:
    import torch

__all__ = ["ESTIMATOR_NAMES", "FIELDS", "batch_advantages", "episode_fields"]

#: The non-tensor batch keys the agent loop writes (one object per row).
FIELDS = (
    "ttg_token_step", "ttg_can_complete", "ttg_remaining", "ttg_valid", "ttg_n_tokens",
    "ttg_state_keys", "ttg_success", "ttg_failure_cost",
)

#: verl estimator names this plugin registers, and the credit function each maps to.
ESTIMATOR_NAMES = ("delta_ttg", "ttg_grpo", "ttg_gigpo", "ttg_hgpo")


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


def _pad(rows: Sequence[Sequence[Any]], width: int, fill: float) -> np.ndarray:
    out = np.full((len(rows), width), fill, dtype=float)
    for i, row in enumerate(rows):
        values = [fill if v is None else v for v in row][:width]
        out[i, : len(values)] = values
    return out


def batch_advantages(
    estimator: str,
    token_level_rewards: torch.Tensor,
    response_mask: torch.Tensor,
    index: Sequence[Any],
    non_tensor_batch: Mapping[str, Sequence[Any]],
    *,
    rho: float = 0.2,
    cap: float = 5.0,
) -> torch.Tensor:
    """Token-level advantages ``[B, L]`` (0 outside ``response_mask``) for one of :data:`ESTIMATOR_NAMES`.

    ``index`` is verl's ``uid`` (the prompt group of each row); R_i is the row's summed
    ``token_level_rewards``. ``delta_ttg`` applies Algorithm 1 through
    :func:`credit.batched_token_advantages`, the baselines through ``credit.batched_*``.
    """
    import torch

    if estimator not in ESTIMATOR_NAMES:
        raise ValueError(f"unknown estimator {estimator!r}; expected one of {ESTIMATOR_NAMES}")
    missing = [k for k in FIELDS if k not in non_tensor_batch]
    if missing:
        raise KeyError(f"the batch lacks {missing}: run the ttg agent loop and install_hook() (see verl_plugin), "
                       "with trainer.use_v1=false (verl's V1 trainer does not pass them on)")
    rewards = token_level_rewards.sum(-1).float().cpu()
    groups = np.unique(np.asarray(index, dtype=object).astype(str), return_inverse=True)[1]
    n_tokens = list(non_tensor_batch["ttg_n_tokens"])
    steps = np.array([len(n) for n in n_tokens])
    width = max(int(steps.max()), 1)
    length = response_mask.shape[1]
    token_step = torch.as_tensor(_pad(non_tensor_batch["ttg_token_step"], length, -1)).long()
    # verl's response_mask is the authority on which tokens train (it may cut long responses).
    token_step = torch.where(response_mask.cpu().bool(), token_step, -1)
    if estimator == "ttg_grpo":
        out = credit.batched_grpo(rewards, groups, steps, token_step=token_step)
    elif estimator in ("ttg_gigpo", "ttg_hgpo"):
        keys = credit.encode_keys(list(non_tensor_batch["ttg_state_keys"]), width)
        fn = credit.batched_gigpo if estimator == "ttg_gigpo" else credit.batched_hgpo
        out = fn(rewards, groups, steps, keys, token_step=token_step)
    else:
        out = credit.batched_token_advantages(
            rewards, groups, steps,
            _pad(non_tensor_batch["ttg_can_complete"], width, 0).astype(bool),
            _pad(non_tensor_batch["ttg_remaining"], width, np.nan),
            np.asarray(non_tensor_batch["ttg_success"], dtype=bool),
            _pad(n_tokens, width, 0),
            float(np.asarray(non_tensor_batch["ttg_failure_cost"], dtype=float)[0]),
            rho, cap,
            valid=_pad(non_tensor_batch["ttg_valid"], width, 1).astype(bool),
            token_step=token_step,
        )
    return out.to(device=response_mask.device, dtype=torch.float32) * response_mask
