"""The trainer hooks: the batch's ``ttg_*`` fields to the credit function, and ``ttg/*`` metrics to verl's logger.

verl's ``compute_advantage(data, adv_estimator, ...)`` passes registered estimators only rewards,
mask and uid. The hook wraps it: for this plugin's estimator names it calls them with the whole
``non_tensor_batch``; every other estimator goes to verl's function unchanged. It also wraps the
classic trainer's ``compute_data_metrics`` so that its per-step metrics include
:func:`~.metrics.ttg_metrics` (verl logs them with its own ``trainer.logger`` backends).
"""

from __future__ import annotations

import importlib
from typing import Any

from .fields import ESTIMATOR_NAMES
from .metrics import ttg_metrics

__all__ = ["compute_advantage_with_ttg_fields", "compute_data_metrics_with_ttg", "install_hook"]

#: Modules whose ``compute_advantage`` the trainers call (the v1 trainer imports it by name). The
#: v1 trainer fetches only fixed columns before it, without the ``ttg_*`` fields: launch configs
#: set ``trainer.use_v1: false``.
_TARGETS = ("verl.trainer.ppo.ray_trainer", "verl.trainer.ppo.v1.utils")


def compute_advantage_with_ttg_fields(data: Any, adv_estimator: Any, *args: Any, _original: Any = None, **kwargs: Any) -> Any:
    """``compute_advantage`` for a verl ``DataProto``: ours read ``non_tensor_batch``, others go to verl.

    Writes ``advantages`` and ``returns`` into ``data.batch`` and returns ``data``, as verl's does.
    """
    name = getattr(adv_estimator, "value", adv_estimator)
    if name not in ESTIMATOR_NAMES:
        return _original(data, adv_estimator, *args, **kwargs)
    from verl.trainer.ppo.core_algos import get_adv_estimator_fn

    if "response_mask" not in data.batch.keys():  # noqa: SIM118 (a TensorDict)
        from verl.trainer.ppo.ray_trainer import compute_response_mask

        data.batch["response_mask"] = compute_response_mask(data)
    advantages, returns = get_adv_estimator_fn(name)(
        token_level_rewards=data.batch["token_level_rewards"],
        response_mask=data.batch["response_mask"],
        index=data.non_tensor_batch["uid"],
        non_tensor_batch=data.non_tensor_batch,
    )
    data.batch["advantages"] = advantages
    data.batch["returns"] = returns
    return data


def compute_data_metrics_with_ttg(batch: Any, *args: Any, _original: Any = None, **kwargs: Any) -> dict[str, Any]:
    """verl's ``compute_data_metrics`` plus :func:`~.metrics.ttg_metrics` of the batch's ``ttg_*`` fields."""
    out = _original(batch, *args, **kwargs)
    keys = batch.batch.keys()
    out.update(
        ttg_metrics(
            batch.non_tensor_batch,
            batch.batch["advantages"] if "advantages" in keys else None,
            batch.batch["response_mask"] if "response_mask" in keys else None,
        )
    )
    return out


def _install_metrics_hook() -> list[str]:
    """Wrap the classic trainer's ``compute_data_metrics`` (the V1 trainer does not carry the ``ttg_*`` fields)."""
    try:
        module = importlib.import_module("verl.trainer.ppo.ray_trainer")
    except ImportError:
        return []
    current = getattr(module, "compute_data_metrics", None)
    if current is None or getattr(current, "_ttg_hook", False):
        return []

    def wrapped(batch, *args, _original=current, **kwargs):
        return compute_data_metrics_with_ttg(batch, *args, _original=_original, **kwargs)

    wrapped._ttg_hook = True
    wrapped.__doc__ = compute_data_metrics_with_ttg.__doc__
    module.compute_data_metrics = wrapped
    return ["verl.trainer.ppo.ray_trainer.compute_data_metrics"]


def install_hook() -> list[str]:
    """Wrap ``compute_advantage`` in each trainer module that imports, and the classic trainer's
    ``compute_data_metrics``; returns what was patched.

    Idempotent; a module that fails to import (missing optional dependency) is skipped.
    """
    patched = _install_metrics_hook()
    for module_name in _TARGETS:
        try:
            module = importlib.import_module(module_name)
        except ImportError:
            continue
        current = getattr(module, "compute_advantage", None)
        if current is None or getattr(current, "_ttg_hook", False):
            continue

        def wrapped(data, adv_estimator, *args, _original=current, **kwargs):
            return compute_advantage_with_ttg_fields(data, adv_estimator, *args, _original=_original, **kwargs)

        wrapped._ttg_hook = True
        wrapped.__doc__ = compute_advantage_with_ttg_fields.__doc__
        module.compute_advantage = wrapped
        patched.append(module_name)
    return patched
