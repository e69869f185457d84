"""verl advantage estimators ``delta_ttg``, ``ttg_grpo``, ``ttg_gigpo`` and ``ttg_hgpo``.

verl calls a registered estimator with ``token_level_rewards``, ``response_mask``, ``index`` (the
``uid``) and ``config`` only. The per-step ``ttg_*`` fields arrive as ``non_tensor_batch`` once
:func:`~.hook.install_hook` routes them in; without the hook the estimators raise, naming it.
"""

from __future__ import annotations

import os
from typing import Any

from ....credit import CAP, RHO
from .fields import ESTIMATOR_NAMES, batch_advantages

__all__ = ["credit_options", "make_estimator", "register_estimators"]


def credit_options() -> dict[str, float]:
    """DeltaTTG's rho and M: ``TTG_RHO`` / ``TTG_CAP`` environment variables, else table 4's (``credit.RHO``, ``credit.CAP``).

    Environment variables reach every Ray worker through verl's ``runtime_env``.
    """
    return {"rho": float(os.environ.get("TTG_RHO", RHO)), "cap": float(os.environ.get("TTG_CAP", CAP))}


def make_estimator(name: str):
    """The verl estimator function for ``name``: ``fn(...) -> (advantages, returns)``."""

    def estimator(token_level_rewards, response_mask, index=None, config=None, non_tensor_batch=None, **_: Any):
        if non_tensor_batch is None:
            raise KeyError(f"{name} needs the ttg_* batch fields: call ttg_envs.training.actor.verl_plugin.install_hook()")
        advantages = batch_advantages(name, token_level_rewards, response_mask, index, non_tensor_batch, **credit_options())
        return advantages, advantages

    estimator.__name__ = f"compute_{name}_advantage"
    estimator.__doc__ = f"verl advantage estimator {name!r} (ttg-envs plugin)."
    return estimator


_ESTIMATORS = {name: make_estimator(name) for name in ESTIMATOR_NAMES}


def register_estimators() -> None:
    """Register every name of :data:`ESTIMATOR_NAMES` in verl's estimator registry (idempotent)."""
    from verl.trainer.ppo import core_algos

    for name, fn in _ESTIMATORS.items():
        if core_algos.ADV_ESTIMATOR_REGISTRY.get(name) is not fn:
            core_algos.register_adv_est(name)(fn)
