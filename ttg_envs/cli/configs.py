"""Parsed flags onto the library's config dataclasses: the one place a ``Namespace`` meets them."""

from __future__ import annotations

import argparse
import dataclasses
from typing import Any, TypeVar

T = TypeVar("T")

__all__ = ["from_args"]


def from_args(cls: type[T], args: argparse.Namespace, **overrides: Any) -> T:
    """``cls`` built from the flags whose dest names are its fields, with ``overrides`` on top."""
    names = {f.name for f in dataclasses.fields(cls)}
    return cls(**{**{k: v for k, v in vars(args).items() if k in names}, **overrides})
