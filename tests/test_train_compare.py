"""benchmarks/train_compare.py at smoke size on the corridor toy: outputs, reusing finished runs, resuming cut ones."""

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


def _argv(out, *extra):
    return [
        "--env", "corridor", "--steps", "3", "--eval-every", "1", "--seeds", "0", "--estimators", "delta_ttg",
        "--eval-tasks", "4", "--start-eval-seeds", "2", "--out", str(out), *extra,
    ]  # fmt: skip


def _without_clocks(run):
    return {**run, "wall_s": None, "train": [{k: v for k, v in t.items() if k != "step_s"} for t in run["train"]]}


def test_a_run_killed_mid_way_resumes_from_its_last_evaluation_to_the_same_result(tmp_path, monkeypatch, capsys):
    tc = _module()
    assert tc.main(_argv(tmp_path / "whole")) == 0
    whole = json.loads((tmp_path / "whole" / "curves.json").read_text())["runs"][0]

    calls = {"n": 0}
    evaluate = tc.evaluate

    def killed_at_the_third_evaluation_after_the_start(*a, **k):
        calls["n"] += 1
        if calls["n"] == 2 + 3:  # two start seeds, then steps 1 and 2 evaluated; killed evaluating step 3
            raise KeyboardInterrupt
        return evaluate(*a, **k)

    monkeypatch.setattr(tc, "evaluate", killed_at_the_third_evaluation_after_the_start)
    cut = tmp_path / "cut"
    with pytest.raises(KeyboardInterrupt):
        tc.main(_argv(cut))
    run_dir = cut / "runs" / "delta_ttg-0"
    assert json.loads((run_dir / "partial.json").read_text())["eval_steps"] == [0, 1, 2]
    kept = sorted(p.name for p in run_dir.glob("checkpoint-*"))
    assert kept == ["checkpoint-2", "checkpoint-3"]  # step 1's dropped; step 3's saved before its evaluation was cut
    monkeypatch.setattr(tc, "evaluate", evaluate)
    capsys.readouterr()
    assert tc.main(_argv(cut)) == 0
    assert "resuming after step 2" in capsys.readouterr().out
    resumed = json.loads((cut / "curves.json").read_text())["runs"][0]
    assert _without_clocks(resumed) == _without_clocks(whole)
    assert not (run_dir / "partial.json").exists() and not list(run_dir.glob("checkpoint-*"))


def test_a_budget_stops_at_an_evaluation_and_the_table_names_what_is_unfinished(tmp_path, capsys):
    tc = _module()
    assert tc.main(_argv(tmp_path, "--budget-s", "1e-9")) == 0  # out of time before the first step
    assert "unfinished" in capsys.readouterr().out and not (tmp_path / "curves.json").exists()
    assert tc.main(_argv(tmp_path, "--seeds", "0,1", "--budget-s", "1e9")) == 0
    assert "Unfinished" not in (tmp_path / "table.md").read_text()
