"""verl plugin: DeltaTTG and baseline advantage estimators, the ``ttg_agent`` loop, the trainer hook.

verl loads :func:`register` by itself through the ``verl.plugins`` entry point (or
``VERL_USE_EXTERNAL_MODULES=ttg_envs.training.actor.verl_plugin``) in every process that imports verl.
It registers the estimators ``delta_ttg``, ``ttg_grpo``, ``ttg_gigpo`` and ``ttg_hgpo``, installs
the hook that hands them the batch's ``ttg_*`` fields, and registers the ``ttg_agent`` loop.

Modules: :mod:`.fields` (batch fields and their advantages, no verl import), :mod:`.estimators`,
:mod:`.hook`, :mod:`.agent_loop`, :mod:`.dataset` (task parquet files for verl's data loader).
"""

from __future__ import annotations

from .fields import ESTIMATOR_NAMES, FIELDS, batch_advantages, episode_fields

__all__ = ["ESTIMATOR_NAMES", "FIELDS", "batch_advantages", "episode_fields", "install_hook", "register"]


def install_hook() -> list[str]:
    """See :func:`.hook.install_hook`."""
    from .hook import install_hook as install

    return install()


def register() -> None:
    """Register the estimators and the agent loop with verl and install the trainer hook."""
    from . import agent_loop  # noqa: F401  (its decorator registers ttg_agent)
    from .estimators import register_estimators

    register_estimators()
    install_hook()


# verl's entry-point discovery only imports the module: registering happens on import.
try:
    import verl  # noqa: F401
except ImportError:
    pass
else:
    register()
