"""``TimedMeter``: a meter that adds up the seconds its ``estimate`` calls take (a trainer's meter time)."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from .base import Estimate, History

__all__ = ["TimedMeter"]


class TimedMeter:
    """Wraps a meter; ``seconds`` is the wall time spent in its ``estimate`` since the last :meth:`take`.

    Every other attribute (``budget_aware``, ``turn_limit``...) reads and writes the wrapped meter.
    """

    def __init__(self, meter: Any):
        object.__setattr__(self, "meter", meter)
        object.__setattr__(self, "seconds", 0.0)

    def estimate(self, histories: Sequence[History]) -> list[Estimate]:
        """The wrapped meter's estimates, timed."""
        start = time.perf_counter()
        try:
            return self.meter.estimate(histories)
        finally:
            object.__setattr__(self, "seconds", self.seconds + time.perf_counter() - start)

    def take(self) -> float:
        """The seconds counted so far, and start counting from 0 again."""
        seconds = self.seconds
        object.__setattr__(self, "seconds", 0.0)
        return seconds

    def __getattr__(self, name: str) -> Any:
        return getattr(object.__getattribute__(self, "meter"), name)

    def __setattr__(self, name: str, value: Any) -> None:
        setattr(self.meter, name, value)
