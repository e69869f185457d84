"""Evaluation: conditions, the per-seed summary, the guidance check, the plot, and ``ttg eval``."""

from __future__ import annotations

import json

import pytest

from ttg_envs.cli import main
from ttg_envs.eval import EpisodeResult, evaluate, guidance_wins, parse_condition, seed_summary
from ttg_envs.eval.report import markdown_table
from ttg_envs.meters import ScriptedMeter


def result(condition, split, seed, success, steps, task_type="pick"):
    return EpisodeResult(condition, split, f"t{seed}{steps}", task_type, seed, success, steps, 10 * steps)


@pytest.mark.parametrize("name,expected", [("natural", ("natural", 1)), ("random-4", ("random", 4)), ("guided-8", ("guided", 8))])
def test_parse_condition(name, expected):
    assert parse_condition(name) == expected


@pytest.mark.parametrize("name", ["guided", "random-0", "best-4", "guided-4x"])
def test_bad_conditions_raise(name):
    with pytest.raises(ValueError):
        parse_condition(name)


def rows_for(guided_steps):
    results = []
    for seed in (0, 1):
        results += [result("natural", "s", seed, seed == 0, 10), result("natural", "s", seed, False, 20)]
        results += [result("random-4", "s", seed, True, 9), result("random-4", "s", seed, False, 19)]
        results += [result("guided-4", "s", seed, True, guided_steps), result("guided-4", "s", seed, True, 6, "heat")]
    return seed_summary(results, actor="a")


def test_seed_summary_gives_mean_and_spread_over_seeds():
    rows = rows_for(guided_steps=4)
    natural = next(r for r in rows if r["condition"] == "natural" and r["task_type"] == "all")
    assert natural["per_seed"]["success_rate"] == [0.5, 0.0]
    assert (natural["success_rate_mean"], natural["success_rate_std"]) == (0.25, 0.25)
    assert (natural["avg_steps_mean"], natural["avg_steps_std"], natural["episodes"]) == (15.0, 0.0, 4)
    assert [r["condition"] for r in rows if r["task_type"] == "all"] == ["natural", "random-4", "guided-4"]
    heat = [r for r in rows if r["task_type"] == "heat"]
    assert len(heat) == 1 and heat[0]["avg_steps_mean"] == 6
    table = markdown_table(rows)
    assert "| a | s | natural | all | 2 | 4 | 25.0 ± 25.0 | 15.00 ± 0.00 | 150 |" in table
    assert "heat" not in table and "heat" in markdown_table(rows, per_type=True)


def test_guidance_wins_needs_both_more_success_and_fewer_steps():
    assert guidance_wins(rows_for(guided_steps=4)) == {("a", "s"): True}
    assert guidance_wins(rows_for(guided_steps=40)) == {("a", "s"): False}


def test_plot_writes_a_png(tmp_path):
    pytest.importorskip("matplotlib")
    from ttg_envs.eval.plot import plot_guidance

    plot_guidance(rows_for(guided_steps=4), tmp_path / "fig.png")
    assert (tmp_path / "fig.png").read_bytes()[:4] == b"\x89PNG"
    with pytest.raises(ValueError):
        plot_guidance([r for r in rows_for(4) if r["condition"] != "natural"], tmp_path / "none.png")


def test_evaluate_runs_every_condition_and_reproduces_by_seed(tiny_game):
    meter = ScriptedMeter(lambda h: (True, 5 * len(h)))
    run = lambda: evaluate(
        "ttg/ALFWorld-v0",
        ["tiny"],
        ["natural", "random-2", "guided-2"],
        "scripted:noisy_expert:0.5",  # noqa: E731
        seeds=[0, 1],
        meter=meter,
        env_kwargs={"game_files": str(tiny_game), "split": "tiny"},
    )
    first = run()
    assert [(r.policy, r.seed) for r in first] == [(c, s) for c in ("natural", "random-2", "guided-2") for s in (0, 1)]
    assert first == run()
    with pytest.raises(ValueError, match="needs a meter"):
        evaluate("ttg/ALFWorld-v0", ["tiny"], ["guided-2"], "scripted:expert", seeds=[0], env_kwargs={"game_files": str(tiny_game)})


def test_ttg_eval_writes_json_and_markdown(tiny_game, tmp_path, capsys):
    env_kwargs = json.dumps({"game_files": str(tiny_game)})
    code = main(
        [
            "eval",
            "--env-kwargs",
            env_kwargs,
            "--splits",
            "tiny",
            "--conditions",
            "natural",
            "random-2",
            "--actor",
            "scripted:noisy_expert:0.3",
            "--seeds",
            "0",
            "1",
            "--workers",
            "1",
            "--out",
            str(tmp_path),
        ]
    )
    assert code == 0
    report = json.loads((tmp_path / "eval.json").read_text())
    assert len(report["episodes"]) == 4 and report["config"]["conditions"] == ["natural", "random-2"]
    assert "| scripted:noisy_expert:0.3 | tiny | natural | all | 2 | 2 |" in (tmp_path / "eval.md").read_text()
    assert "no plot" in capsys.readouterr().out


def test_spread_indices_covers_the_split_evenly():
    from ttg_envs.runner import spread_indices

    assert spread_indices(140, 10) == (0, 15, 31, 46, 62, 77, 93, 108, 124, 139)
    assert spread_indices(5, None) == spread_indices(5, 9) == (0, 1, 2, 3, 4)
    assert spread_indices(10, 1) == (0,) and spread_indices(10, 0) == ()
    assert spread_indices(10, 3, skip=4) == (4, 6, 9)


def test_demo_plan_spreads_over_task_types_and_keeps_meter_tasks_out():
    from ttg_envs.eval.demo import plan_tasks

    split, meter, tasks, _ = plan_tasks("ttg/ALFWorld-v0", {}, ["valid_seen", "valid_unseen"], "train", 12, 30)
    assert split == "train" and len(meter) == 30 and meter[-1] == 599
    import gymnasium as gym

    env = gym.make("ttg/ALFWorld-v0", split="valid_seen").unwrapped
    assert len({env.tasks[i].type for i in tasks["valid_seen"]}) == 6  # all six ALFWorld task types
    development = plan_tasks("ttg/ALFWorld-v0", {}, ["valid_seen", "valid_unseen"], "train", 10, 30)[2]
    heldout = plan_tasks("ttg/ALFWorld-v0", {}, ["valid_seen", "valid_unseen"], "train", 20, 30, "heldout")[2]
    for name in ("valid_seen", "valid_unseen"):
        assert len(heldout[name]) == 20 and not set(heldout[name]) & set(development[name])
        assert len({env.tasks[i].type for i in heldout["valid_seen"]}) == 6
    split, meter, tasks, note = plan_tasks("ttg/ALFWorld-v0", {}, ["valid_seen"], "no-such-split", 12, 30)
    assert split == "valid_seen" and "unavailable" in note
    assert len(tasks["valid_seen"]) == 12 and not set(tasks["valid_seen"]) & set(meter)


def test_ttg_demo_runs_end_to_end_at_tiny_scale(tmp_path):
    # PaperSearchQA's bundled tasks load in milliseconds; ALFWorld's full demo is the README's main job.
    code = main(
        [
            "demo",
            "--env",
            "ttg/PaperSearchQA-v0",
            "--splits",
            "test",
            "--meter-split",
            "train",
            "--meter-tasks",
            "4",
            "--tasks",
            "2",
            "--seeds",
            "0",
            "1",
            "2",
            "--epochs",
            "1",
            "--workers",
            "1",
            "--out",
            str(tmp_path),
        ]
    )
    assert code == 0
    report = json.loads((tmp_path / "demo.json").read_text())
    assert len(report["episodes"]) == 2 * 3 * 3  # tasks x conditions x seeds
    assert report["config"]["meter"].endswith("meter") and (tmp_path / "meter-train" / "meter" / "meter.json").exists()
    assert set(report["config"]["timings"]) >= {"meter_s", "evaluate_s", "total_s"}
    assert "guided beats the other conditions" in (tmp_path / "demo.md").read_text()


def test_the_plot_legend_covers_no_point_and_names_the_bars():
    pytest.importorskip("matplotlib")
    import matplotlib.pyplot as plt

    from ttg_envs.eval.plot import guidance_figure

    rows = [dict(r, split=split) for split in ("valid_seen", "valid_unseen") for r in rows_for(guided_steps=4)]
    fig = guidance_figure(rows)  # guided at 100% on the last row: where the old in-axes legend sat
    fig.canvas.draw()
    [legend] = fig.legends + [ax.get_legend() for ax in fig.axes if ax.get_legend()]
    box = legend.get_window_extent()
    for ax in fig.axes:
        for points in ax.collections:
            for x, y in points.get_offsets():
                px, py = ax.transData.transform((x, y))
                assert not box.contains(px, py)
        assert not box.overlaps(ax.get_window_extent())
    assert all("std over seeds" in t.get_text() for t in legend.get_texts())
    plt.close(fig)
