"""The guidance plot (paper figure 6): natural -> guided arrows per actor and split, random and the
planner ceiling as markers."""

from __future__ import annotations

import os
from typing import Any, Sequence

from .._optional import require


def plot_guidance(rows: Sequence[dict[str, Any]], path: str | os.PathLike) -> None:
    """Write :func:`guidance_figure` of ``rows`` to ``path`` (PNG). Needs matplotlib (the ``plot`` extra)."""
    import matplotlib.pyplot as plt

    fig = guidance_figure(rows)
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    fig.savefig(path, dpi=150)
    plt.close(fig)


def guidance_figure(rows: Sequence[dict[str, Any]]) -> Any:
    """A two-panel figure (success rate, average steps) from :func:`~ttg_envs.eval.report.seed_summary` rows.

    One line per (actor, split) with a natural and a guided condition; the arrow goes from natural
    to guided and is labelled with the change; random-of-k is drawn as a cross and planner-of-k (the
    ceiling, where the env has a planner) as a green diamond. Each point's bar is
    its own spread over seeds (± one standard deviation), drawn in its condition's colour. The
    legend sits below the panels, outside the data area, so it never covers a point.
    """
    require("matplotlib", "plot")
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    lines = _lines(rows)
    if not lines:
        raise ValueError("no (actor, split) has both a natural and a guided condition to plot")
    fig, axes = plt.subplots(1, 2, figsize=(10, 0.7 * len(lines) + 2.2), sharey=True)
    panels = (("success_rate", 100.0, "success rate (%)", "pp"), ("avg_steps", 1.0, "average steps", ""))
    for ax, (metric, scale, title, unit) in zip(axes, panels):
        for y, (label, conds) in enumerate(lines):
            if y % 2:
                ax.axhspan(y - 0.5, y + 0.5, color="0.92", zorder=0)
            points = [
                ("natural", "tab:gray", "o"),
                ("guided", "tab:blue", "o"),
                ("random", "tab:orange", "x"),
                ("planner", "tab:green", "D"),
                ("gold", "tab:green", "D"),
            ]
            for kind, colour, marker in points:
                if kind not in conds:
                    continue
                row = conds[kind]
                x, spread = scale * row[f"{metric}_mean"], scale * row[f"{metric}_std"]
                name = row["condition"] if y == 0 or not any(kind in c for _, c in lines[:y]) else None
                ax.errorbar([x], [y], xerr=[spread], fmt="none", ecolor=colour, alpha=0.6, capsize=3, zorder=1)
                ax.scatter([x], [y], color=colour, marker=marker, zorder=3, label=name)
            x0, x1 = scale * conds["natural"][f"{metric}_mean"], scale * conds["guided"][f"{metric}_mean"]
            ax.annotate("", xy=(x1, y), xytext=(x0, y), arrowprops={"arrowstyle": "->", "color": "tab:blue", "lw": 1.5})
            ax.annotate(f"{x1 - x0:+.1f}{unit}", xy=((x0 + x1) / 2, y + 0.18), ha="center", fontsize=8)
        ax.set_title(title)
        ax.set_ylim(-0.5, len(lines) - 0.5)
    axes[0].set_yticks(range(len(lines)), [label for label, _ in lines])
    axes[0].invert_yaxis()
    handles, labels = axes[0].get_legend_handles_labels()
    labels = [f"{name} (bar: ± std over seeds)" for name in labels]
    legend = fig.legend(handles, labels, loc="lower center", ncol=len(labels), fontsize=8, frameon=False)
    fig.canvas.draw()
    height = legend.get_window_extent().transformed(fig.transFigure.inverted()).height
    fig.tight_layout(rect=(0, height + 0.02, 1, 1))  # the panels and their tick labels sit above the legend
    return fig


def _lines(rows: Sequence[dict[str, Any]]) -> list[tuple[str, dict[str, dict[str, Any]]]]:
    grouped: dict[tuple[str, str], dict[str, dict[str, Any]]] = {}
    for r in rows:
        if r["task_type"] == "all":
            grouped.setdefault((r["actor"], r["split"]), {})[r["condition"].split("-")[0]] = r
    return [(f"{actor} {split}".strip(), conds) for (actor, split), conds in grouped.items() if "natural" in conds and "guided" in conds]
