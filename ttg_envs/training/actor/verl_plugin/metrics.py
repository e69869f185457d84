"""The ``ttg/*`` metrics the plugin adds to verl's own per-step metrics (and so to verl's logger).

Pure NumPy (no verl import). :func:`~.hook.install_hook` wraps verl's ``compute_data_metrics``,
whose result the classic trainer hands to its ``Tracking`` logger (``trainer.logger``: console,
tensorboard, wandb...), so the figures reach whatever trackers verl was told to use, once.
verl itself already logs the reward (``critic/score``), response lengths, KL, entropy, learning
rate and timings; these are the episode-level figures only the agent loop's fields hold.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

__all__ = ["METER_SECONDS", "ttg_metrics"]

#: Extra per-row field the ``ttg_agent`` loop writes: seconds its episode spent in the meter.
METER_SECONDS = "ttg_meter_s"


def ttg_metrics(non_tensor_batch: Mapping[str, Sequence[Any]], advantages: Any = None, response_mask: Any = None) -> dict[str, float]:
    """``ttg/*`` figures of one batch of ``ttg_agent`` rows (empty when the batch has none of its fields).

    ``ttg/success_rate``, ``ttg/turns/mean``, ``ttg/assistant_tokens/mean`` (per episode),
    ``ttg/meter_valid_rate`` and ``ttg/can_complete_rate`` (over the states actions were taken in),
    ``ttg/remaining_h0/mean`` (the meter's TTG of the first state, where it predicts success),
    ``ttg/advantage_std`` (over response tokens, when ``advantages`` and ``response_mask`` are given)
    and ``ttg/meter_s/mean`` (per episode, when the loop timed its meter).
    """
    if "ttg_n_tokens" not in non_tensor_batch:
        return {}
    n_tokens = [list(n) for n in non_tensor_batch["ttg_n_tokens"]]
    out = {
        "ttg/success_rate": float(np.mean([bool(s) for s in non_tensor_batch["ttg_success"]])),
        "ttg/turns/mean": float(np.mean([len(n) for n in n_tokens])),
        "ttg/assistant_tokens/mean": float(np.mean([sum(n) for n in n_tokens])),
    }
    valid = [bool(v) for row in non_tensor_batch.get("ttg_valid", ()) for v in row]
    can = [bool(v) for row in non_tensor_batch.get("ttg_can_complete", ()) for v in row]
    if valid:
        out["ttg/meter_valid_rate"] = float(np.mean(valid))
    if can:
        out["ttg/can_complete_rate"] = float(np.mean(can))
    first = [row[0] for row in non_tensor_batch.get("ttg_remaining", ()) if len(row) and row[0] is not None]
    if first:
        out["ttg/remaining_h0/mean"] = float(np.mean(first))
    if advantages is not None and response_mask is not None:
        values = np.asarray(advantages.detach().float().cpu() if hasattr(advantages, "detach") else advantages, dtype=float)
        mask = np.asarray(response_mask.detach().cpu() if hasattr(response_mask, "detach") else response_mask).astype(bool)
        if mask.any():
            out["ttg/advantage_std"] = float(values[mask].std())
    if METER_SECONDS in non_tensor_batch:
        out["ttg/meter_s/mean"] = float(np.mean([float(s) for s in non_tensor_batch[METER_SECONDS]]))
    return out
