"""Experiment trackers for ``ttg train`` and ``ttg train-meter``: ``--report-to tensorboard,wandb``.

The names and their grammar follow transformers' ``TrainingArguments.report_to``: a comma list of
trackers, ``all`` for every installed one, ``none`` for no tracker. Each tracker gets the step's
scalars under ``train/`` (every number the trainer writes to ``metrics.jsonl``) and, every
``table_every`` steps, a small table of sampled episodes. TensorBoard event files go to
``OUT/tensorboard``; W&B runs go to ``OUT/wandb`` and honour its own environment variables
(``WANDB_MODE=offline`` needs no account; ``WANDB_PROJECT``, default ``ttg-envs``). A resumed run
continues the same W&B run and drops TensorBoard events after the checkpoint's step.

Both come with the ``track`` extra; a missing one is a one-line error naming it.
:class:`RunReporter` ties the trackers to the trainer's per-step hook and prints the step line a
person watching the run reads (:class:`~ttg_envs.bars.StepLog`).
"""

from __future__ import annotations

import importlib.util
import json
import math
import uuid
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

from .._optional import MissingExtraError, require

__all__ = [
    "TRACKERS",
    "RunReporter",
    "TensorBoardTracker",
    "Tracker",
    "WandbTracker",
    "check_trackers",
    "episode_rows",
    "open_trackers",
    "parse_report_to",
    "scalars",
    "step_figures",
]

#: Tracker name -> the module it needs (all in the ``track`` extra).
TRACKERS: dict[str, str] = {"tensorboard": "tensorboard", "wandb": "wandb"}


def parse_report_to(value: str | Sequence[str] | None) -> tuple[str, ...]:
    """``"tensorboard,wandb"`` (or a list) as tracker names; ``none`` or empty: no tracker; ``all``: the installed ones."""
    if value is None:
        return ()
    parts = value.split(",") if isinstance(value, str) else list(value)
    names = [p.strip().lower() for p in parts if p.strip()]
    if names == ["none"] or not names:
        return ()
    if names == ["all"]:
        return tuple(name for name, module in TRACKERS.items() if importlib.util.find_spec(module) is not None)
    unknown = [n for n in names if n not in TRACKERS]
    if unknown or "none" in names or "all" in names:
        bad = unknown or ["none/all mixed with names"]
        raise ValueError(f"--report-to: unknown tracker {', '.join(bad)}; expected a comma list of {', '.join(TRACKERS)}, or all, or none")
    return tuple(dict.fromkeys(names))


def check_trackers(names: Sequence[str]) -> None:
    """Raise :class:`MissingExtraError` naming the ``track`` extra for a tracker that is not installed."""
    for name in names:
        if importlib.util.find_spec(TRACKERS[name]) is None:
            raise MissingExtraError(
                f"--report-to {name}: {TRACKERS[name]!r} is not installed; it comes with the 'track' extra: pip install 'ttg-envs[track]'"
            )


class Tracker(Protocol):
    """Where a run's scalars and tables go."""

    def log(self, scalars: Mapping[str, float], step: int, tables: Mapping[str, Sequence[Mapping[str, Any]]] | None = None) -> None:
        """Record ``scalars`` (and ``tables``: name -> rows of equal keys) at ``step``."""
        ...

    def close(self) -> None:
        """Flush and finish the run."""
        ...


class TensorBoardTracker:
    """Event files under ``log_dir`` (torch's ``SummaryWriter``); tables as markdown text."""

    def __init__(self, log_dir: str | Path, config: Mapping[str, Any] | None = None, start_step: int = 0):
        require("tensorboard", "track")
        from torch.utils.tensorboard import SummaryWriter

        # purge_step: a resumed run's events after its checkpoint are hidden, as its metrics.jsonl lines are dropped.
        self.writer = SummaryWriter(log_dir=str(log_dir), purge_step=start_step + 1 if start_step else None, flush_secs=10)
        if config:
            self.writer.add_text("config", "```\n" + json.dumps(dict(config), indent=1, default=str) + "\n```", start_step)

    def log(self, scalars: Mapping[str, float], step: int, tables: Mapping[str, Sequence[Mapping[str, Any]]] | None = None) -> None:
        """See :class:`Tracker`."""
        for name, value in scalars.items():
            self.writer.add_scalar(name, value, step)
        for name, rows in (tables or {}).items():
            self.writer.add_text(name, _markdown(rows), step)
        self.writer.flush()

    def close(self) -> None:
        """See :class:`Tracker`."""
        self.writer.close()


class WandbTracker:
    """A W&B run in ``out_dir/wandb`` (``WANDB_MODE=offline`` works with no account).

    The run id is kept in ``out_dir/wandb-run-id``, so a run resumed from a checkpoint (``start_step > 0``)
    continues the same W&B run; a fresh start gets a new one.
    """

    def __init__(self, out_dir: str | Path, config: Mapping[str, Any] | None = None, start_step: int = 0, name: str | None = None):
        import os

        self.wandb = require("wandb", "track")
        out = Path(out_dir)
        out.mkdir(parents=True, exist_ok=True)
        id_file = out / "wandb-run-id"
        run_id = id_file.read_text().strip() if start_step and id_file.exists() else uuid.uuid4().hex[:12]
        id_file.write_text(run_id)
        self.run = self.wandb.init(
            project=os.environ.get("WANDB_PROJECT", "ttg-envs"),
            name=name or out.resolve().name,
            dir=str(out),
            id=run_id,
            resume="allow",
            config=dict(config or {}),
        )

    def log(self, scalars: Mapping[str, float], step: int, tables: Mapping[str, Sequence[Mapping[str, Any]]] | None = None) -> None:
        """See :class:`Tracker`."""
        data: dict[str, Any] = dict(scalars)
        for name, rows in (tables or {}).items():
            columns = list(rows[0]) if rows else []
            data[name] = self.wandb.Table(columns=columns, data=[[row.get(c) for c in columns] for row in rows])
        self.run.log(data, step=step)

    def close(self) -> None:
        """See :class:`Tracker`."""
        self.run.finish()


def open_trackers(names: Sequence[str], out_dir: str | Path, config: Mapping[str, Any] | None = None, start_step: int = 0) -> list[Tracker]:
    """The trackers ``names`` (from :func:`parse_report_to`) writing under ``out_dir``."""
    check_trackers(names)
    config = json.loads(json.dumps(dict(config or {}), default=str))  # trackers want plain values
    out = Path(out_dir)
    trackers: list[Tracker] = []
    for name in names:
        if name == "tensorboard":
            trackers.append(TensorBoardTracker(out / "tensorboard", config, start_step))
        elif name == "wandb":
            trackers.append(WandbTracker(out, config, start_step))
    return trackers


def scalars(metrics: Mapping[str, Any], prefix: str = "train/") -> dict[str, float]:
    """The finite numbers of ``metrics`` (bools as 0/1), keyed ``prefix + name``; ``step`` itself is left out."""
    out = {}
    for key, value in metrics.items():
        if key == "step" or not isinstance(value, (int, float)) or (isinstance(value, float) and not math.isfinite(value)):
            continue
        out[prefix + key] = float(value)
    return out


#: The step line's figures: (metrics key, label, format).
_FIGURES = (
    ("success_rate", "success", "{:.2f}"),
    ("reward_mean", "reward", "{:.3f}"),
    ("turns_mean", "turns", "{:.1f}"),
    ("response_tokens", "tokens", "{:.0f}"),
    ("advantage_std", "adv std", "{:.3f}"),
    ("kl", "kl", "{:.4f}"),
    ("entropy", "entropy", "{:.3f}"),
    ("lr", "lr", "{:.1e}"),
)


def step_figures(metrics: Mapping[str, Any]) -> str:
    """A trainer step's figures for its log line: success, reward, turns, tokens, advantage spread, KL,
    entropy, learning rate, then the time split (rollout, of which meter, and update)."""
    parts = [f"{label} {fmt.format(metrics[key])}" for key, label, fmt in _FIGURES if key in metrics]
    times = [
        f"{name} {metrics[key]:.1f}s"
        for key, name in (("rollout_s", "rollout"), ("meter_s", "meter"), ("update_s", "update"))
        if key in metrics
    ]
    return ", ".join(parts) + (" | " + " ".join(times) if times else "")


def episode_rows(episodes: Sequence[Any], tokenizer: Any = None, n: int = 4, chars: int = 160) -> list[dict[str, Any]]:
    """A small table of sampled episodes: the first episode of each of the first ``n`` groups (then more of each).

    Columns: group, task id, success, reward, turns, assistant tokens, and the last action's text
    (the first ``chars`` characters; empty without a tokenizer).
    """
    firsts = list({e.group: e for e in reversed(episodes)}.values())[::-1]
    picked = (firsts + [e for e in episodes if e not in firsts])[:n]
    rows = []
    for e in picked:
        task = (e.infos[0].get("task") or {}) if e.infos else {}
        last = tokenizer.decode(e.actions[-1], skip_special_tokens=True) if tokenizer is not None and e.actions else ""
        rows.append(
            {
                "group": int(e.group),
                "task": str(task.get("id", e.task_index)),
                "success": bool(e.success),
                "reward": float(e.reward),
                "turns": int(e.num_steps),
                "tokens": int(sum(len(a) for a in e.actions)),
                "last_action": last.strip().replace("\n", " ")[:chars],
            }
        )
    return rows


class RunReporter:
    """The trainer's per-step hook: the step line (:class:`~ttg_envs.bars.StepLog`), the trackers'
    scalars and, every ``table_every`` steps (0: never), a table of ``table_rows`` sampled episodes.

    Args:
        trackers: from :func:`open_trackers` (closed by :meth:`close`).
        tokenizer: decodes the table's last actions.
        console: write the step line (to ``file``, default stderr).
        desc: the line's prefix.
    """

    def __init__(
        self,
        trackers: Sequence[Tracker] = (),
        *,
        tokenizer: Any = None,
        table_every: int = 10,
        table_rows: int = 4,
        console: bool = True,
        desc: str = "ttg train",
        file: Any = None,
    ):
        self.trackers = list(trackers)
        self.tokenizer = tokenizer
        self.table_every = table_every
        self.table_rows = table_rows
        self.console = console
        self.desc = desc
        self.file = file
        self._line = None
        #: Steps logged through :meth:`stage` loggers so far (meter training's global step).
        self.steps = 0

    def start(self, total: int, initial: int = 0) -> None:
        """A run (or a resumed one) of ``total`` steps begins at step ``initial``."""
        from ..bars import StepLog

        self._line = StepLog(total, initial=initial, desc=self.desc, file=self.file) if self.console else None

    def step(self, metrics: Mapping[str, Any], episodes: Sequence[Any] | None = None) -> None:
        """Report one finished step (``metrics["step"]`` is its 1-based number)."""
        step = int(metrics["step"])
        tables = {}
        if episodes and self.table_every and step % self.table_every == 0:
            tables["episodes"] = episode_rows(episodes, self.tokenizer, self.table_rows)
        values = scalars(metrics)
        for tracker in self.trackers:
            tracker.log(values, step, tables)
        if self._line is not None:
            self._line.update(step_figures(metrics))

    def log(self, metrics: Mapping[str, Any], step: int, prefix: str = "") -> None:
        """Scalars only (meter training's per-step losses and its held-out figures), to the trackers."""
        values = scalars(metrics, prefix)
        for tracker in self.trackers:
            tracker.log(values, step)

    def stage(self, prefix: str) -> Callable[[Mapping[str, Any]], None]:
        """A per-step logger for one training stage (``sft/``, ``grpo/``, ``encoder/``): each call logs
        its figures under ``prefix`` at the next step of one count shared by every stage."""

        def log(metrics: Mapping[str, Any]) -> None:
            self.steps += 1
            self.log(metrics, self.steps, prefix)

        return log

    def close(self) -> None:
        """Finish every tracker."""
        for tracker in self.trackers:
            tracker.close()
        self.trackers = []


def _markdown(rows: Sequence[Mapping[str, Any]]) -> str:
    if not rows:
        return "(no rows)"
    columns = list(rows[0])
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join(str(row.get(c, "")).replace("|", "\\|") for c in columns) + " |" for row in rows]
    return "\n".join(lines)
