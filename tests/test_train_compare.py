"""benchmarks/train_compare.py at smoke size on the corridor toy: outputs, and resuming from finished runs."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "train_compare.py"


def _module():
    spec = importlib.util.spec_from_file_location("train_compare", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_a_rerun_reuses_finished_runs_and_a_changed_setting_does_not(tmp_path, capsys):
    tc = _module()
    argv = [
        "--env",
        "corridor",
        "--steps",
        "2",
        "--eval-every",
        "1",
        "--seeds",
        "0",
        "--estimators",
        "grpo",
        "--eval-tasks",
        "4",
        "--start-eval-seeds",
        "2",
        "--out",
        str(tmp_path),
    ]
    assert tc.main(argv) == 0
    first = json.loads((tmp_path / "curves.json").read_text())
    table = (tmp_path / "table.md").read_text()
    assert table.startswith("| estimator") and "The start itself, sampled with 2 seeds" in table
    assert first["start_eval"]["evals"][0] == first["runs"][0]["eval"][0]  # step 0 is the start's first evaluation
    (run,) = first["runs"]
    assert run["eval_steps"] == [0, 1, 2] and [t["step"] for t in run["train"]] == [1, 2]
    out = capsys.readouterr().out
    assert out.count("start: held-out") == 1 and "grpo seed 0 step 1: held-out" in out

    assert tc.main(argv) == 0
    assert "grpo seed 0: reusing" in capsys.readouterr().out
    assert json.loads((tmp_path / "curves.json").read_text())["runs"] == first["runs"]

    assert tc.main([*argv, "--lr", "1e-3"]) == 0  # another setting: trained again, and its result replaces the cache
    assert "reusing" not in capsys.readouterr().out
    assert json.loads(tc.run_file(tc.parse_args([*argv, "--lr", "1e-3"]), "grpo", 0).read_text())["settings"]["lr"] == 1e-3
