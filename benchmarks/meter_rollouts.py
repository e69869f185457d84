"""Scoring recorded episodes turn by turn, as a rollout asks a meter: shared by the meter benchmarks."""

from __future__ import annotations

import time
from typing import Any


def score_turn_by_turn(meter: Any, prefixes: list[list]) -> tuple[float, int, list]:
    """At each turn t, every live episode's history h_t in one ``meter.estimate`` call (estimate cache
    cleared first, so every history is new; the segment cache stays on): (CPU seconds, estimates made,
    the estimates). ``prefixes[i]`` is episode i's histories h_0..h_T."""
    meter.clear_cache()
    start, n, out = time.process_time(), 0, []
    for t in range(max(len(p) for p in prefixes)):
        batch = [p[t] for p in prefixes if t < len(p)]
        out += meter.estimate(batch)
        n += len(batch)
    return time.process_time() - start, n, out
