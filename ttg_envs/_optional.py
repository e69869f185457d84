"""Lazy imports of optional dependencies with a one-line error naming the extra to install."""

from __future__ import annotations

import importlib
from types import ModuleType


class MissingExtraError(ImportError):
    """An optional dependency is missing; the message names the pip extra that installs it."""


def require(module: str, extra: str) -> ModuleType:
    """Import ``module`` or raise :class:`MissingExtraError` naming ``ttg-envs[extra]``."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise MissingExtraError(
            f"{module!r} is not installed; it comes with the {extra!r} extra: pip install 'ttg-envs[{extra}]'"
        ) from exc
