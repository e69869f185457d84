"""``ttg plot``: the flags (the figure is :func:`ttg_envs.eval.plot_runs.plot_runs`)."""

from __future__ import annotations

import argparse

_PLOT = """Draw training curves of one or more runs into a PNG: each metric against the training step and
against the cumulative actor response tokens (as the paper's figure 3).

A RUN is a ttg train --out folder (its metrics.jsonl), a metrics.jsonl file, or a
benchmarks/train_compare.py result (curves.json or its folder, many runs with held-out success).
Runs with one label are averaged, with a band of one standard deviation: a folder's label is its name
without a trailing -<seed>, a train_compare run's is its estimator."""


def add_plot(sub: argparse._SubParsersAction) -> None:
    """``ttg plot``."""
    p = sub.add_parser(
        "plot",
        help="training curves of runs vs step and vs actor tokens",
        description=_PLOT,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("runs", nargs="+", metavar="RUN", help="run folders, metrics.jsonl or curves.json files")
    p.add_argument("--out", default="curves.png", help="PNG to write (default: %(default)s)")
    p.add_argument(
        "--metrics",
        default=None,
        help="comma list: heldout_success (train_compare runs) or metrics.jsonl fields such as success_rate, "
        "reward_mean, kl (default: heldout_success where present, and success_rate)",
    )
    p.add_argument("--title", default=None, help="figure title")
    p.set_defaults(func=_plot)


def _plot(args: argparse.Namespace) -> int:
    from ..eval.plot_runs import plot_runs

    metrics = [m.strip() for m in args.metrics.split(",") if m.strip()] if args.metrics else None
    out = plot_runs(args.runs, args.out, metrics, args.title)
    print(f"wrote {out}")
    return 0
