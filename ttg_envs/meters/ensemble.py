"""A meter that averages several encoder meters trained alike (``ttg train-meter --ensemble N``).

Each member reads the history its own way (its backbone, its segment cache) and gives its head's
two outputs at the last read segment: the completion logit and log(1 + remaining tokens). The
ensemble's estimate is made from the members' mean of each (:func:`~.encoder.estimate_from_outputs`),
so one member's noise in the comparison of two nearby histories is averaged down; a step's
predicted change is that of the mean. Members must agree on what they read about the budget.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .._io import atomic_folder, load_folder
from .base import CachedMeter, Estimate, History
from .encoder import EncoderMeter, estimate_from_outputs
from .hf import METER_CONFIG

__all__ = ["EnsembleMeter"]

#: ``meter.json``'s kind for an ensemble folder (its members in subfolders).
KIND = "ensemble"


class EnsembleMeter(CachedMeter):
    """The mean head output of ``members`` (encoder meters), as one meter.

    Args:
        members: two or more :class:`~.encoder.EncoderMeter` s, all budget-aware or none, all
            reading the task note or none.
        cache_size: estimates cached by history hash (see :class:`~.base.CachedMeter`).
    """

    def __init__(self, members: Sequence[EncoderMeter], cache_size: int = 65536):
        super().__init__(cache_size)
        if len(members) < 2:
            raise ValueError(f"an ensemble needs at least two members, got {len(members)}")
        if len({m.budget_aware for m in members}) > 1:
            raise ValueError("an ensemble's members must all read the turns left, or none")
        if len({m.reads_task_note for m in members}) > 1:
            raise ValueError("an ensemble's members must all read the task note, or none")
        self.members = list(members)

    @property
    def reads_task_note(self) -> bool:
        """Whether the members read the task note a history opens with."""
        return self.members[0].reads_task_note

    @property
    def budget_aware(self) -> bool:
        """Whether the members read how many turns are left."""
        return self.members[0].budget_aware

    @property
    def turn_limit(self) -> int | None:
        """The turn limit the members count turns left from (None when not budget-aware)."""
        return self.members[0].turn_limit

    @turn_limit.setter
    def turn_limit(self, value: int | None) -> None:
        if value != self.turn_limit:
            super().clear_cache()
        for member in self.members:
            member.turn_limit = value

    # ------------------------------------------------------------------ persistence
    @classmethod
    def from_pretrained(cls, path: str | os.PathLike, **kwargs: Any) -> EnsembleMeter:
        """Load a folder written by :meth:`save_pretrained`; ``kwargs`` go to every member's
        :meth:`~.encoder.EncoderMeter.from_pretrained` (``device``, ``threads``...)."""

        backend, threads = kwargs.pop("backend", "auto"), kwargs.pop("threads", None)

        def read(folder: Path) -> EnsembleMeter:
            saved = json.loads((folder / METER_CONFIG).read_text())
            if saved.get("kind") != KIND:
                raise ValueError(f"{folder} holds a {saved.get('kind')!r} meter, not an ensemble")
            return cls([EncoderMeter._from_folder(folder / name, backend, threads, **kwargs) for name in saved["members"]])

        return load_folder(path, read)

    def save_pretrained(self, path: str | os.PathLike, extra: dict[str, Any] | None = None) -> None:
        """Write ``meter.json`` (kind ``ensemble``, its members' folder names, ``extra``) and each member's
        folder (``member-<k>``); the whole folder appears at once (:func:`~ttg_envs._io.atomic_folder`)."""
        names = [f"member-{k}" for k in range(len(self.members))]
        with atomic_folder(path) as folder:
            for name, member in zip(names, self.members):
                member.save_pretrained(folder / name)
            first = json.loads((folder / names[0] / METER_CONFIG).read_text())
            config = {"kind": KIND, "members": names, "encoder": first["encoder"], **(extra or {})}
            (folder / METER_CONFIG).write_text(json.dumps(config, indent=1))

    # ------------------------------------------------------------------ inference
    def clear_cache(self) -> None:
        """Forget cached estimates, the ensemble's and every member's."""
        super().clear_cache()
        for member in self.members:
            member.clear_cache()

    def estimate_at_turns(self, histories: Sequence[History], idle: Sequence[int]) -> list[Estimate]:
        """:meth:`~.encoder.EncoderMeter.estimate_at_turns` of the mean output (the same state with
        ``idle[b]`` more turns spent)."""
        if not self.budget_aware:
            return self.estimate(histories)
        return self._mean_estimates(list(histories), [int(k) for k in idle])

    def _estimate_uncached(self, histories: list[History]) -> list[Estimate]:
        return self._mean_estimates(histories, [0] * len(histories))

    def _mean_estimates(self, histories: list[History], idle: list[int]) -> list[Estimate]:
        mean = sum(member.last_outputs(histories, idle) for member in self.members) / len(self.members)
        return [estimate_from_outputs(*row) for row in mean.tolist()]
