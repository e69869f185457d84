"""Terminal progress bars (tqdm) that also report when nobody watches a terminal (nohup, SLURM, CI logs); not the progress meter.

On a terminal :func:`progress_bar` is an ordinary tqdm bar. When stderr is not a terminal, tqdm
would either stay silent (``disable=None``) or fill the log with carriage returns; instead the bar
writes one plain line (``record train: 40/360 ep, 11% | 1:02 elapsed, 8:05 left``) at most every
``TTG_PROGRESS_SECONDS`` seconds (default 30) and a last line when it closes.
"""

from __future__ import annotations

import os
import sys
from typing import Any

from tqdm.auto import tqdm


class _LogLines(tqdm):
    """tqdm writing newline-terminated status lines, for logs."""

    def display(self, msg: str | None = None, pos: int | None = None) -> bool:
        d = self.format_dict
        total = f"/{d['total']}" if d.get("total") else ""
        share = f", {100 * d['n'] / d['total']:.0f}%" if d.get("total") else ""
        elapsed = self.format_interval(d["elapsed"])
        rate = d["n"] / d["elapsed"] if d["elapsed"] > 0 else 0.0
        left = ""
        if d.get("total") and rate > 0:
            left = f", {self.format_interval((d['total'] - d['n']) / rate)} left"
        line = f"{d.get('prefix') or 'progress'}: {d['n']}{total} {d.get('unit') or 'it'}{share} | {elapsed} elapsed{left}"
        if line != getattr(self, "_last_line", None):
            self._last_line = line
            self.fp.write(line + "\n")
            self.fp.flush()
        return True

    def set_postfix(self, ordered_dict: Any = None, refresh: bool = True, **kwargs: Any) -> None:
        """Record the postfix without writing a line (tqdm refreshes on every call, which
        would put one line per update in the log)."""
        super().set_postfix(ordered_dict, refresh=False, **kwargs)

    def set_description(self, desc: str | None = None, refresh: bool = True) -> None:
        """Change the description without writing a line."""
        super().set_description(desc, refresh=False)


class _Lines:
    """A stream that passes on whole status lines only (tqdm also writes bare "\\r" and "\\n")."""

    def __init__(self, stream: Any):
        self.stream = stream

    def write(self, text: str) -> None:
        if text.strip():
            self.stream.write(text)

    def flush(self) -> None:
        self.stream.flush()


def _is_terminal(stream: Any) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):
        return False


def progress_bar(
    iterable: Any = None, *, total: int | None = None, desc: str = "", unit: str = "it", disable: bool = False, **kwargs: Any
) -> tqdm:
    """A tqdm bar on a terminal, plain periodic log lines elsewhere (see the module docstring)."""
    stream = kwargs.pop("file", None) or sys.stderr
    if disable or _is_terminal(stream):
        return tqdm(iterable, total=total, desc=desc, unit=unit, disable=disable, file=stream, **kwargs)
    kwargs.pop("leave", None)
    every = float(os.environ.get("TTG_PROGRESS_SECONDS", "30"))
    return _LogLines(
        iterable,
        total=total,
        desc=desc,
        unit=unit,
        file=_Lines(stream),
        mininterval=every,
        maxinterval=max(every, 1.0),
        miniters=1,
        **kwargs,
    )


class StepLog:
    """One plain line per finished step of a long run, with its figures, the time so far and an ETA.

    ``ttg train: step 3/10, 30% | reward 0.250, success 0.25 | 0:31 elapsed, 1:12 left``. Unlike
    :func:`progress_bar` it writes every step, on a terminal too: a training step takes seconds to
    minutes, and its figures are what a person watching the run reads. The ETA extrapolates the mean
    time of the steps this process ran (a resumed run's earlier steps do not count).
    """

    def __init__(self, total: int, *, initial: int = 0, desc: str = "progress", file: Any = None, clock: Any = None):
        import time

        self.total, self.done, self.desc = total, initial, desc
        self.file = file
        self._clock = clock or time.perf_counter
        self._start = self._clock()
        self._initial = initial

    def update(self, figures: str = "", steps: int = 1) -> str:
        """Count ``steps`` more steps done and write (and return) their line with ``figures``."""
        self.done += steps
        elapsed = self._clock() - self._start
        ran = self.done - self._initial
        left = ""
        if self.total and ran > 0:
            left = f", {tqdm.format_interval(max(0, self.total - self.done) * elapsed / ran)} left"
        share = f", {100 * self.done / self.total:.0f}%" if self.total else ""
        line = f"{self.desc}: step {self.done}/{self.total}{share}{' | ' + figures if figures else ''} | {tqdm.format_interval(elapsed)} elapsed{left}"
        stream = self.file or sys.stderr
        stream.write(line + "\n")
        stream.flush()
        return line
