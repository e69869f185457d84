"""The ``>>>`` examples on the public entry points run (``doctest``), so they stay true."""

from __future__ import annotations

import doctest
import importlib

import pytest

#: Modules whose docstrings hold runnable examples (each must hold at least one).
MODULES = (
    "ttg_envs.registry",
    "ttg_envs.credit",
    "ttg_envs.tools",
    "ttg_envs.tools.react",
    "ttg_envs.chat_client",
    "ttg_envs.wrappers.stack",
    "ttg_envs.meters.encoder",
    "ttg_envs.eval.demo",
    "ttg_envs.training.actor.launch",
    "ttg_envs.training.meter.config",
    "ttg_envs.training.meter.evaluation",
    "ttg_envs.envs.perturb",
)


@pytest.mark.parametrize("name", MODULES)
def test_examples_run(name):
    if name == "ttg_envs.meters.encoder":
        pytest.importorskip("torch")
    result = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0 and result.failed == 0
