"""``Lookahead``: adds ``branch()`` and ``try_actions()`` to any env stack (e.g. from ``gym.make``)."""

from __future__ import annotations

from typing import Iterable

from ..core import Generation
from .branching import BranchableWrapper, Trial, try_actions


class Lookahead(BranchableWrapper):
    """A pass-through wrapper whose ``branch()`` and ``try_actions()`` cover the whole stack below it."""

    def try_actions(self, actions: Iterable[str | Generation], method: str = "auto") -> list[Trial]:
        """Each action stepped in its own branch; this env is left untouched."""
        return try_actions(self, actions, method)
