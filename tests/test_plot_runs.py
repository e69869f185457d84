"""``ttg plot``: runs from ttg train folders and train_compare results, averaged per label, drawn to a PNG."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from ttg_envs.eval.plot_runs import group_curves, load_runs

COMPARE = Path(__file__).parent.parent / "benchmarks" / "results" / "train_compare"


def _run_dir(folder: Path, rows: list[dict]) -> Path:
    folder.mkdir(parents=True)
    (folder / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return folder


def test_committed_train_compare_runs_average_to_its_summary():
    runs = load_runs([COMPARE])
    summary = {row["estimator"]: row for row in json.loads((COMPARE / "curves.json").read_text())["summary"]}
    curves = {c.label: c for c in group_curves(runs, "heldout_success")}
    assert set(curves) == set(summary)
    for label, curve in curves.items():
        assert curve.runs == summary[label]["seeds"]
        assert curve.steps.tolist() == summary[label]["steps"]
        np.testing.assert_allclose(curve.mean, summary[label]["mean"])
        np.testing.assert_allclose(curve.std, summary[label]["std"], atol=1e-12)
        np.testing.assert_allclose(curve.tokens, summary[label]["tokens"])


def test_run_folders_group_by_name_without_the_seed_and_count_actor_tokens(tmp_path):
    a = _run_dir(
        tmp_path / "grpo-0",
        [{"step": 1, "success_rate": 0.0, "response_tokens": 10}, {"step": 2, "success_rate": 0.5, "response_tokens": 30}],
    )
    b = _run_dir(
        tmp_path / "grpo-1",
        [{"step": 1, "success_rate": 1.0, "response_tokens": 20}, {"step": 2, "success_rate": 0.5, "response_tokens": 10}],
    )
    # A resumed run repeats step 2 after a crash: the last record of a step counts.
    c = _run_dir(
        tmp_path / "delta",
        [
            {"step": 1, "success_rate": 0.1, "response_tokens": 5},
            {"step": 2, "success_rate": 0.9, "response_tokens": 5},
            {"step": 2, "success_rate": 0.2, "response_tokens": 7},
        ],
    )
    (grpo, delta) = group_curves(load_runs([a, b, c / "metrics.jsonl"]), "success_rate")
    assert (grpo.label, grpo.runs, delta.label, delta.runs) == ("grpo", 2, "delta", 1)
    assert grpo.mean.tolist() == [0.5, 0.5] and np.allclose(grpo.std, [0.5**0.5, 0.0])
    assert grpo.tokens.tolist() == [15.0, 35.0] and delta.tokens.tolist() == [5.0, 12.0]
    assert delta.mean.tolist() == [0.1, 0.2]


def test_ttg_plot_writes_a_png_and_refuses_what_it_cannot_draw(tmp_path, capsys):
    pytest.importorskip("matplotlib")
    from ttg_envs.cli import main

    run = _run_dir(tmp_path / "run", [{"step": s, "success_rate": s / 4, "kl": 0.01 * s, "response_tokens": 9} for s in (1, 2, 3)])
    out = tmp_path / "fig.png"
    assert main(["plot", str(run), str(COMPARE), "--out", str(out), "--metrics", "heldout_success,success_rate,kl"]) == 0
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert main(["plot", str(run), "--out", str(out), "--metrics", "nope"]) == 2
    assert "no run has nope" in capsys.readouterr().err
    assert main(["plot", str(tmp_path / "missing"), "--out", str(out)]) == 2
