"""Per-seed metrics, their mean and spread over seeds, the Markdown table, and the guidance check."""

from __future__ import annotations

import time
from collections import defaultdict
from pathlib import Path
from statistics import mean, pstdev
from typing import Any, Sequence

from .._io import markdown_table as _markdown_table
from ..runner import EpisodeResult, count_phrases, count_totals
from .rollout import write_report

_ORDER = {"natural": 0, "random": 1, "guided": 2, "planner": 3, "gold": 3}


def seed_summary(results: Sequence[EpisodeResult], actor: str = "") -> list[dict[str, Any]]:
    """One row per (split, condition, task type, with ``all`` for the whole split).

    Success rate and average steps are computed per seed, then given as mean and standard
    deviation over seeds (``*_mean``, ``*_std``); ``per_seed`` keeps the per-seed values.
    """
    groups: dict[tuple[str, str, str], dict[int, list[EpisodeResult]]] = defaultdict(lambda: defaultdict(list))
    for r in results:
        for task_type in ("all", r.task_type):
            groups[(r.split, r.policy, task_type)][r.seed].append(r)
    rows = []
    for (split, condition, task_type), by_seed in groups.items():
        rates = [sum(r.success for r in rs) / len(rs) for rs in by_seed.values()]
        steps = [sum(r.steps for r in rs) / len(rs) for rs in by_seed.values()]
        tokens = [sum(r.assistant_tokens for r in rs) / len(rs) for rs in by_seed.values()]
        rows.append(
            {
                "actor": actor,
                "split": split,
                "condition": condition,
                "task_type": task_type,
                "seeds": sorted(by_seed),
                "episodes": sum(len(rs) for rs in by_seed.values()),
                "success_rate_mean": mean(rates),
                "success_rate_std": pstdev(rates),
                "avg_steps_mean": mean(steps),
                "avg_steps_std": pstdev(steps),
                "avg_tokens_mean": mean(tokens),
                "per_seed": {"success_rate": rates, "avg_steps": steps},
            }
        )
    return sorted(
        rows,
        key=lambda r: (
            r["actor"],
            r["split"],
            r["task_type"] != "all",
            r["task_type"],
            _ORDER.get(r["condition"].split("-")[0], 3),
            r["condition"],
        ),
    )


def markdown_table(rows: Sequence[dict[str, Any]], *, per_type: bool = False) -> str:
    """A Markdown table of :func:`seed_summary` rows: mean +- std over seeds (overall rows unless ``per_type``;
    ``n/a`` where a row has a single seed)."""

    def cells(r: dict[str, Any]) -> tuple:
        one = len(r["seeds"]) < 2  # no spread over seeds to show
        rate_sd = "n/a" if one else f"{100 * r['success_rate_std']:.1f}"
        steps_sd = "n/a" if one else f"{r['avg_steps_std']:.2f}"
        return (
            r["actor"],
            r["split"],
            r["condition"],
            r["task_type"],
            len(r["seeds"]),
            r["episodes"],
            f"{100 * r['success_rate_mean']:.1f} ± {rate_sd}",
            f"{r['avg_steps_mean']:.2f} ± {steps_sd}",
            f"{r['avg_tokens_mean']:.0f}",
        )

    return _markdown_table(
        ("actor", "split", "condition", "task type", "seeds", "episodes", "success rate (%)", "avg steps", "avg tokens"),
        (cells(r) for r in rows if r["task_type"] == "all" or per_type),
        right=5,
    )


#: Conditions that choose by a perfect meter (guided-k's ceilings): the planner (ALFWorld) or gold (BFCL, tau2).
CEILINGS = ("planner", "gold")


def capture_ratios(rows: Sequence[dict[str, Any]]) -> dict[tuple[str, str, int], dict[str, float | None]]:
    """Per (actor, split, k) with ``random-k``, ``guided-k`` and a ceiling's rows (``planner-k`` or
    ``gold-k``): how much of the ceiling's gain guidance captures, ``(guided - random) / (ceiling -
    random)`` on mean success rate.

    ``planner-k`` chooses among the same k candidates by the planner's plan length, ``gold-k`` by the
    gold tokens that still win (each a perfect meter), so 1 means the meter guides as well as a
    perfect one and 0 no better than chance. Each value also carries the means and ``ceiling`` (its
    name); the ratio is None when the ceiling is not ahead of random.
    """
    by_key: dict[tuple[str, str, int], dict[str, float]] = defaultdict(dict)
    for r in rows:
        kind, _, k = r["condition"].partition("-")
        if r["task_type"] == "all" and kind in ("random", "guided", *CEILINGS) and k.isdigit():
            by_key[(r["actor"], r["split"], int(k))][kind] = r["success_rate_mean"]
    out: dict[tuple[str, str, int], dict[str, float | None]] = {}
    for key, means in sorted(by_key.items()):
        ceiling = next((c for c in CEILINGS if c in means), None)
        if ceiling is not None and "random" in means and "guided" in means:
            gain = means[ceiling] - means["random"]
            ratio = (means["guided"] - means["random"]) / gain if gain > 0 else None
            out[key] = {**means, "ceiling": ceiling, "capture": ratio}
    return out


def capture_lines(ratios: dict[tuple[str, str, int], dict[str, Any]]) -> str:
    """One line per :func:`capture_ratios` entry, for reports."""
    lines = []
    for (actor, split, k), v in ratios.items():
        ceiling = v.get("ceiling", "planner")
        verdict = f"n/a ({ceiling} not ahead of random)" if v["capture"] is None else f"{v['capture']:.2f}"
        lines.append(
            f"- {actor} {split}: guided-{k} captures {verdict} of {ceiling}-{k}'s gain over random-{k} "
            f"({100 * v['random']:.1f} -> {100 * v['guided']:.1f}, ceiling {100 * v[ceiling]:.1f})"
        )
    return "\n".join(lines)


def guidance_wins(rows: Sequence[dict[str, Any]]) -> dict[tuple[str, str], bool]:
    """Per (actor, split): does every ``guided-*`` condition beat every other one on mean success rate
    (higher) and mean average steps (lower)? Splits without a guided condition are left out."""
    by_key: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    for r in rows:
        if r["task_type"] == "all":
            by_key[(r["actor"], r["split"])].append(r)
    verdict = {}
    for key, group in by_key.items():
        guided = [r for r in group if r["condition"].startswith("guided")]
        # The ceilings (planner, gold) are not competitors.
        others = [r for r in group if not r["condition"].startswith(("guided", *CEILINGS))]
        if guided:
            verdict[key] = all(
                g["success_rate_mean"] > o["success_rate_mean"] and g["avg_steps_mean"] < o["avg_steps_mean"]
                for g in guided
                for o in others
            )
    return verdict


def write_outputs(
    out: Path,
    name: str,
    results: list,
    rows: list,
    config: dict[str, Any],
    timings: dict[str, float],
    *,
    per_type: bool,
    checks: dict,
    start: float,
    env_id: str = "",
) -> int:
    """Write ``<name>.json``, ``<name>.md`` and ``<name>.png`` under ``out`` and print the table.

    The episode counts of ``env_id`` (:func:`~ttg_envs.runner.count_totals`: ALFWorld's planner
    time-limit hits, since a result can then depend on machine load) go into the report and the last line.
    """
    table = markdown_table(rows, per_type=per_type)
    verdict = "\n".join(
        f"- {actor} {split}: guided beats the other conditions on success rate and steps: {'yes' if ok else 'NO'}"
        for (actor, split), ok in checks.items()
    )
    ratios = capture_ratios(rows)
    if ratios:
        verdict += "\n" + capture_lines(ratios)
    timings["total_s"] = time.perf_counter() - start
    totals = count_totals(results, env_id)
    out.mkdir(parents=True, exist_ok=True)
    write_report(
        out / f"{name}.json",
        results,
        rows,
        {
            **config,
            "timings": timings,
            "guidance_wins": {f"{a} {s}": ok for (a, s), ok in checks.items()},
            "capture": {f"{a} {s} k={k}": v for (a, s, k), v in ratios.items()},
            **totals,
        },
    )
    (out / f"{name}.md").write_text(table + "\n\n" + verdict + "\n")
    print(table + "\n\n" + verdict)
    try:
        from .plot import plot_guidance

        plot_guidance(rows, out / f"{name}.png")
        plotted = f", plot {out / (name + '.png')}"
    except ImportError as exc:
        plotted = f" (no plot: {exc})"
    except ValueError:
        plotted = " (no plot: needs a natural and a guided condition)"
    limit = f" ({count_phrases(totals)})" if totals else ""
    print(
        f"\n{len(results)} episodes{limit}; {timings['total_s']:.0f} s in all; report {out / (name + '.json')}, "
        f"table {out / (name + '.md')}{plotted}"
    )
    return 0
