"""Arguments shared by every ``ttg`` subcommand's parser: each flag is declared once, here.

One meaning per flag name in every subcommand: ``--env``/``--env-kwargs`` the env, ``--splits``
the splits to run on (one or more), ``--seed`` a run's seed and ``--seeds`` the seeds an evaluation
averages over, ``--limit`` how many tasks of each split (spread evenly), ``--tasks`` task indices
(``3``, ``0-99``, ``0,5,7``), ``--workers`` worker processes, ``--out`` the output folder. Older
spellings (``--split``, ``--seeds`` for one seed, ``--task-indices``, the demo's ``--tasks N``)
still parse, hidden from ``--help``.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import Any

DEFAULT_ENV = "ttg/ALFWorld-v0"


def _whole_number_at_least(text: str, low: int) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < low:
        raise argparse.ArgumentTypeError(f"must be at least {low}, got {value}")
    return value


def positive_int(text: str) -> int:
    """An argparse type: a whole number >= 1 (a count of tasks, seeds, workers or epochs)."""
    return _whole_number_at_least(text, 1)


def non_negative_int(text: str) -> int:
    """An argparse type: a whole number >= 0 (a count where 0 means "the library's default")."""
    return _whole_number_at_least(text, 0)


class TaskIndices(Sequence[int]):
    """Task indices as the ranges they were written in: ``0-3000000000`` is one range, not a list of
    three billion numbers. A sequence (length, indexing, iteration, ``in``, ``==`` with a list)."""

    def __init__(self, ranges: Sequence[range]):
        self.ranges = tuple(r for r in ranges if len(r))
        self._len = sum(len(r) for r in self.ranges)

    def __len__(self) -> int:
        return self._len

    def __getitem__(self, i):  # noqa: ANN001 - int or slice, as Sequence has it
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(self._len))]
        if i < 0:
            i += self._len
        if not 0 <= i < self._len:
            raise IndexError("task index position out of range")
        for r in self.ranges:
            if i < len(r):
                return r[i]
            i -= len(r)
        raise AssertionError("unreachable")

    def __iter__(self):
        for r in self.ranges:
            yield from r

    def __contains__(self, value: object) -> bool:
        return any(value in r for r in self.ranges)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, (list, tuple, TaskIndices)):
            return len(other) == self._len and all(a == b for a, b in zip(self, other))
        return NotImplemented

    def __repr__(self) -> str:
        return "TaskIndices(" + ",".join(f"{r.start}-{r.stop - 1}" if len(r) > 1 else str(r.start) for r in self.ranges) + ")"

    def listed(self, limit: int = 1 << 20) -> tuple[int, ...]:
        """The indices as a tuple; ``ValueError`` (one line) when there are more than ``limit``."""
        if self._len > limit:
            raise ValueError(f"--tasks names {self._len} tasks; at most {limit} can be listed")
        return tuple(self)


def task_indices(values: Sequence[str] | str | None) -> TaskIndices | None:
    """Task indices from ``3``, ``0-99`` or ``0,5,7`` tokens (any mix); None stays None. Ranges stay
    ranges (:class:`TaskIndices`), so a huge one costs nothing to parse."""
    if values is None:
        return None
    out: list[range] = []
    for token in [values] if isinstance(values, str) else values:
        for part in str(token).split(","):
            if not part.strip():
                continue
            lo, sep, hi = part.strip().partition("-")
            try:
                start = int(lo)
                stop = int(hi) + 1 if sep else start + 1
            except ValueError:
                raise argparse.ArgumentTypeError(f"task indices are N, A-B or A,B,C; got {part!r}") from None
            if start < 0 or stop <= start:
                raise argparse.ArgumentTypeError(f"task indices are N, A-B or A,B,C with 0 <= A <= B; got {part!r}")
            out.append(range(start, stop))
    return TaskIndices(out)


class _TaskIndices(argparse.Action):
    def __call__(self, parser, namespace, values, option_string=None):
        try:
            setattr(namespace, self.dest, task_indices(values))
        except argparse.ArgumentTypeError as exc:
            parser.error(f"argument {option_string}: {exc}")


def _hidden(p: argparse.ArgumentParser, *names: str, **kwargs: Any) -> None:
    p.add_argument(*names, help=argparse.SUPPRESS, **kwargs)


def add_env(p: argparse.ArgumentParser, *, kwargs_help: str = "JSON dict of extra gym.make kwargs") -> None:
    """``--env`` (a registered id) and ``--env-kwargs`` (JSON)."""
    p.add_argument("--env", default=DEFAULT_ENV, help="registered env id (default: %(default)s)")
    p.add_argument("--env-kwargs", default="{}", help=kwargs_help)


def add_splits(p: argparse.ArgumentParser, default: Sequence[str] | None, help: str = "splits to run on") -> None:
    """``--splits A [B ...]`` (``--split`` too); a None default means the env's evaluation splits."""
    if default is None:
        p.add_argument("--splits", nargs="+", default=None, help=f"{help} (default: the env's evaluation splits)")
    else:
        p.add_argument("--splits", nargs="+", default=list(default), help=f"{help} (default: %(default)s)")
    _hidden(p, "--split", dest="splits", nargs="+")


def add_seed(p: argparse.ArgumentParser, default: int = 0) -> None:
    """``--seed N``: the run's seed (``--seeds N`` too)."""
    p.add_argument("--seed", type=int, default=default, help="seed (default: %(default)s)")
    _hidden(p, "--seeds", dest="seed", type=int)


def add_seeds(p: argparse.ArgumentParser, default: Sequence[int] | None) -> None:
    """``--seeds A [B ...]``: the seeds an evaluation averages over (``--seed`` too)."""
    p.add_argument(
        "--seeds",
        nargs="+",
        type=int,
        default=None if default is None else list(default),
        help="seeds to average over (default: %(default)s)",
    )
    _hidden(p, "--seed", dest="seeds", nargs="+", type=int)


def add_limit(p: argparse.ArgumentParser, help: str = "N tasks of each split, spread evenly over it (default: all)") -> None:
    """``--limit N``: how many tasks of each split."""
    p.add_argument("--limit", type=positive_int, default=None, help=help)


def add_tasks(p: argparse.ArgumentParser, help: str = "these task indices (N, A-B or A,B,C) instead of --limit", *aliases: str) -> None:
    """``--tasks I [J ...]``: task indices (ranges allowed)."""
    p.add_argument("--tasks", nargs="+", action=_TaskIndices, default=None, help=help)
    for alias in aliases:
        _hidden(p, alias, dest="tasks", nargs="+", action=_TaskIndices)


def add_workers(p: argparse.ArgumentParser, default: int = 2, help: str = "worker processes") -> None:
    """``--workers N``."""
    p.add_argument("--workers", type=positive_int, default=default, help=f"{help} (default: %(default)s)")


def add_out(p: argparse.ArgumentParser, default: str, help: str = "report folder") -> None:
    """``--out DIR``."""
    p.add_argument("--out", default=default, help=f"{help} (default: %(default)s)")


def add_report_to(p: argparse.ArgumentParser, defaults: Any, *, episode_tables: bool = False) -> None:
    """``--report-to`` (experiment trackers, as transformers' ``report_to`` spells them) and, for the
    actor trainer, ``--log-episodes-every`` (a table of sampled episodes every N steps); their defaults
    are the fields of the same names of ``defaults`` (the command's config class)."""
    p.add_argument(
        "--report-to",
        default=defaults.report_to,
        help="experiment trackers: a comma list of tensorboard, wandb (WANDB_MODE=offline needs no account), "
        "or all (the installed ones), or none (default: %(default)s; the 'track' extra installs both)",
    )
    if episode_tables:
        p.add_argument(
            "--log-episodes-every",
            type=int,
            default=defaults.log_episodes_every,
            help="send the trackers a table of sampled episodes every N steps (0: never; default: %(default)s)",
        )


def add_lora(p: argparse.ArgumentParser, defaults: Any, *, merge: bool = False) -> None:
    """``--lora-r``, ``--lora-alpha``, ``--lora-targets`` (peft LoRA adapters; the ``lora`` extra) and, for
    the actor trainer, ``--lora-merge``; their defaults are the fields of ``defaults`` (the config class)."""
    p.add_argument(
        "--lora-r",
        type=int,
        default=defaults.lora_r,
        help="train a LoRA adapter of this rank instead of every weight (0: full fine-tuning)",
    )
    p.add_argument("--lora-alpha", type=float, default=defaults.lora_alpha, help="LoRA scale numerator (default: 2 x rank)")
    p.add_argument(
        "--lora-targets",
        default=defaults.lora_targets,
        help="comma list of module names to adapt, e.g. q_proj,v_proj (default: every linear layer but the LM head)",
    )
    if merge:
        p.add_argument(
            "--lora-merge",
            action="store_true",
            default=defaults.lora_merge,
            help="also write OUT/merged: the policy with its adapter merged in",
        )
