"""Lazy imports of optional dependencies with a one-line error naming the extra to install."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from types import ModuleType
from typing import Any


class MissingExtraError(ImportError):
    """An optional dependency is missing; the message names the pip extra that installs it."""


def require(module: str, extra: str) -> ModuleType:
    """Import ``module`` or raise :class:`MissingExtraError` naming ``ttg-envs[extra]``."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise MissingExtraError(f"{module!r} is not installed; it comes with the {extra!r} extra: pip install 'ttg-envs[{extra}]'") from exc


def lazy_attributes(package: str, modules: Mapping[str, str]) -> Callable[[str], Any]:
    """A module ``__getattr__`` that imports ``name`` from ``modules[name]`` (relative to ``package``) on first use.

    Packages use it for classes whose modules import heavy backends (torch, vLLM, HTTP clients).
    """

    def __getattr__(name: str) -> Any:
        if name in modules:
            return getattr(importlib.import_module(modules[name], package), name)
        raise AttributeError(f"module {package!r} has no attribute {name!r}")

    return __getattr__
