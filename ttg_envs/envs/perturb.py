"""Departures from a gold path for the tool envs' ``perturbed:eps`` policies: a dropped call, an extra
call, or a call with a wrong argument (the kinds BFCL's official-scoring tests write).

One draw from the policy's RNG decides each step before any draw the departure makes, so a seed
fixes the whole episode (as :class:`~ttg_envs.envs.noisy.NoisyPolicy`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ..tools import ToolCall

#: The departures a perturbed policy draws from, in the order of its draw.
KINDS = ("drop", "extra", "wrong_argument")


def changed(value: Any) -> Any:
    """A different value of the same kind (a bool flipped, a number + 1, a string with ``_x``, a list shortened).

    >>> changed(True), changed(3), changed("Paris"), changed([1, 2])
    (False, 4, 'Paris_x', [1])
    """
    if isinstance(value, bool):
        return not value
    if isinstance(value, (int, float)):
        return value + 1
    if isinstance(value, str):
        return value + "_x"
    if isinstance(value, list):
        return value[:-1] if value else ["x"]
    return "x"


def wrong_argument(call: ToolCall, rng: np.random.Generator) -> ToolCall | None:
    """``call`` with one argument (drawn) changed; None when it has no arguments."""
    if not call.arguments:
        return None
    key = sorted(call.arguments)[int(rng.integers(len(call.arguments)))]
    return ToolCall(call.name, {**call.arguments, key: changed(call.arguments[key])})


class Perturber:
    """Decides, step by step, whether and how a policy departs from gold.

    Args:
        eps: probability that a step departs.
        seed: the RNG seed (the runner's per-episode policy seed).
    """

    def __init__(self, eps: float = 0.3, seed: int | None = None):
        if not 0.0 <= eps <= 1.0:
            raise ValueError(f"eps must be in [0, 1], got {eps}")
        self.eps = eps
        self.rng = np.random.default_rng(seed)

    @property
    def draws(self) -> bool:
        """Whether episodes depend on the seed (eps above 0); at eps 0 every step follows gold."""
        return self.eps > 0

    def draw(self) -> str | None:
        """The departure of this step (one of :data:`KINDS`), or None to follow gold."""
        if self.rng.random() >= self.eps:
            return None
        return KINDS[int(self.rng.integers(len(KINDS)))]

    def pick(self, items: Sequence[Any]) -> Any:
        """One of ``items``, drawn."""
        return items[int(self.rng.integers(len(items)))]

    def depart(self, kind: str, calls: list[ToolCall], others: Sequence[ToolCall]) -> list[ToolCall]:
        """``calls`` (one response's gold calls) changed by ``kind``: one dropped, one of ``others``
        (calls that are not gold here) added, or one call's argument changed; falls back to another
        kind when ``kind`` cannot apply (no call to drop, no other call, no argument)."""
        if kind == "wrong_argument" and calls:
            index = int(self.rng.integers(len(calls)))
            wrong = wrong_argument(calls[index], self.rng)
            if wrong is not None:
                return calls[:index] + [wrong] + calls[index + 1 :]
            kind = "extra"
        if kind == "extra":
            extra = [c for c in others if c not in calls]
            if extra:
                return calls + [self.pick(extra)]
        if calls:
            index = int(self.rng.integers(len(calls)))
            return calls[:index] + calls[index + 1 :]
        return calls
