"""``ScriptedMeter``: a meter from a Python function (tests, oracles, rule-based baselines)."""

from __future__ import annotations

from .answer import format_answer, parse_answer
from .base import CachedMeter, Estimate, History

__all__ = ["ScriptedMeter"]


class ScriptedMeter(CachedMeter):
    """A meter from a Python function ``fn(history) -> Estimate | (can_complete, remaining) | str``.

    A ``str`` result is parsed as a generative answer (so tests can feed malformed answers); a
    tuple is taken as a valid estimate. Useful for tests, oracles and rule-based baselines.
    """

    def __init__(self, fn, cache_size: int = 0):
        super().__init__(cache_size)
        self.fn = fn
        self.calls: list[int] = []

    def _estimate_uncached(self, histories: list[History]) -> list[Estimate]:
        self.calls.append(len(histories))
        out = []
        for history in histories:
            result = self.fn(history)
            if isinstance(result, Estimate):
                out.append(result)
            elif isinstance(result, str):
                out.append(parse_answer(result))
            else:
                can, remaining = result
                out.append(Estimate(bool(can), int(remaining) if can else None, True, format_answer(bool(can), remaining if can else None)))
        return out
