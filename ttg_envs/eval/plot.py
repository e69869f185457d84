"""The guidance plot (paper figure 6): natural -> guided arrows per actor and split, random as a marker."""

from __future__ import annotations

import os
from typing import Any, Sequence

from .._optional import require


def plot_guidance(rows: Sequence[dict[str, Any]], path: str | os.PathLike) -> None:
    """Write a two-panel figure (success rate, average steps) from :func:`~ttg_envs.eval.report.seed_summary` rows.

    One line per (actor, split) with a natural and a guided condition; the arrow goes from natural
    to guided and is labelled with the change; random-of-k is drawn as a cross; bars show the
    spread over seeds. Needs matplotlib (the ``plot`` extra).
    """
    require("matplotlib", "plot")
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    lines = _lines(rows)
    if not lines:
        raise ValueError("no (actor, split) has both a natural and a guided condition to plot")
    fig, axes = plt.subplots(1, 2, figsize=(10, 0.7 * len(lines) + 1.6), sharey=True)
    panels = (("success_rate", 100.0, "success rate (%)", "pp"), ("avg_steps", 1.0, "average steps", ""))
    for ax, (metric, scale, title, unit) in zip(axes, panels):
        for y, (label, conds) in enumerate(lines):
            if y % 2:
                ax.axhspan(y - 0.5, y + 0.5, color="0.92", zorder=0)
            nat, gui = conds["natural"], conds["guided"]
            x0, x1 = scale * nat[f"{metric}_mean"], scale * gui[f"{metric}_mean"]
            ax.errorbar(
                [x0, x1],
                [y, y],
                xerr=[scale * nat[f"{metric}_std"], scale * gui[f"{metric}_std"]],
                fmt="none",
                ecolor="0.5",
                capsize=3,
                zorder=1,
            )
            ax.scatter([x0], [y], color="tab:gray", zorder=3, label="natural" if y == 0 else None)
            ax.scatter([x1], [y], color="tab:blue", zorder=3, label=gui["condition"] if y == 0 else None)
            if "random" in conds:
                ax.scatter(
                    [scale * conds["random"][f"{metric}_mean"]],
                    [y],
                    marker="x",
                    color="tab:orange",
                    zorder=3,
                    label=conds["random"]["condition"] if y == 0 else None,
                )
            ax.annotate("", xy=(x1, y), xytext=(x0, y), arrowprops={"arrowstyle": "->", "color": "tab:blue", "lw": 1.5})
            ax.annotate(f"{x1 - x0:+.1f}{unit}", xy=((x0 + x1) / 2, y + 0.18), ha="center", fontsize=8)
        ax.set_title(title)
        ax.set_ylim(-0.5, len(lines) - 0.5)
    axes[0].set_yticks(range(len(lines)), [label for label, _ in lines])
    axes[0].invert_yaxis()
    axes[0].legend(loc="lower right", fontsize=8)
    fig.tight_layout()
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    fig.savefig(path, dpi=150)
    plt.close(fig)


def _lines(rows: Sequence[dict[str, Any]]) -> list[tuple[str, dict[str, dict[str, Any]]]]:
    grouped: dict[tuple[str, str], dict[str, dict[str, Any]]] = {}
    for r in rows:
        if r["task_type"] == "all":
            grouped.setdefault((r["actor"], r["split"]), {})[r["condition"].split("-")[0]] = r
    return [(f"{actor} {split}".strip(), conds) for (actor, split), conds in grouped.items() if "natural" in conds and "guided" in conds]
