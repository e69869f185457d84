"""The ``ttg`` parser: one meaning per flag in every subcommand, older spellings still parsed."""

from __future__ import annotations

import time

import pytest

from ttg_envs.cli import build_parser


def parse(*argv: str):
    return build_parser().parse_args(list(argv))


def test_splits_and_its_old_spelling_in_every_subcommand():
    for command in ("rollout", "eval", "demo", "train-meter"):
        assert parse(command, "--splits", "a", "b").splits == ["a", "b"]
        assert parse(command, "--split", "a").splits == ["a"]
    assert parse("eval-meter", "--meter", "m", "--split", "x").splits == ["x"]


def test_seed_is_one_run_seed_and_seeds_an_average():
    for command in ("rollout", "train-meter", "train"):
        assert parse(command, "--seed", "3").seed == 3 and parse(command, "--seeds", "4").seed == 4
    for command in ("eval", "demo"):
        assert parse(command, "--seeds", "1", "2").seeds == [1, 2] and parse(command, "--seed", "5").seeds == [5]


def test_tasks_are_indices_and_limit_a_count():
    assert parse("train-meter", "--tasks", "0-2", "7,9").tasks == [0, 1, 2, 7, 9]
    assert parse("train", "--tasks", "0-3").tasks == [0, 1, 2, 3]
    assert parse("train", "--task-indices", "0,5").tasks == [0, 5]
    assert parse("demo", "--limit", "4").tasks == 4 and parse("demo", "--tasks", "4").tasks == 4
    assert parse("rollout", "--limit", "4").limit == 4


def test_bad_values_are_usage_errors(capsys):
    with pytest.raises(SystemExit) as exc:
        parse("train-meter", "--tasks", "a-b")
    assert exc.value.code == 2 and "task indices are N, A-B or A,B,C" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        parse("rollout", "--limit", "0")


def test_train_meter_defaults_are_the_pipelines():
    from ttg_envs.training.meter.pipeline import TRAIN_DEFAULTS

    args = vars(parse("train-meter"))
    following = {"splits", "policies"}  # None: filled from --env when the command runs
    assert {k: args[k] for k in TRAIN_DEFAULTS if k not in following} == {k: v for k, v in TRAIN_DEFAULTS.items() if k not in following}
    assert args["splits"] is None and args["policies"] is None


def test_task_ranges_are_parsed_lazily():
    # Before: --tasks 0-3000000000 built the whole list while parsing (MemoryError).
    start = time.perf_counter()
    tasks = parse("train", "--tasks", "0-3000000000", "7").tasks
    assert time.perf_counter() - start < 1 and len(tasks) == 3_000_000_002
    assert tasks[3_000_000_000] == 3_000_000_000 and tasks[-1] == 7 and 2_999_999_999 in tasks
    with pytest.raises(ValueError, match="at most"):
        tasks.listed()
    with pytest.raises(SystemExit):
        parse("train", "--tasks", "5-3")


def test_input_errors_are_one_line_with_exit_2(capsys, monkeypatch, tmp_path):
    from ttg_envs import cli

    assert cli.main(["train-meter", "--tasks", "0-3000000000", "--out", str(tmp_path / "m")]) == 2
    assert capsys.readouterr().err.strip().splitlines() == ["ttg: error: task indices must lie in 0..599 for split 'train'; got 600"]
    for error in (NotADirectoryError(20, "Not a directory", "out/x"), IsADirectoryError("x"), PermissionError("x"), IndexError("x")):

        def fail(argv, error=error):
            raise error

        monkeypatch.setattr(cli, "_dispatch", fail)
        assert cli.main(["rollout"]) == 2  # before: a traceback and exit 1 for these
        err = capsys.readouterr().err
        assert err.startswith("ttg: error: ") and len(err.strip().splitlines()) == 1


def test_demo_and_train_flags_default_to_their_configs():
    from dataclasses import fields

    from ttg_envs.eval.demo import DemoConfig
    from ttg_envs.training.actor.launch import LaunchConfig
    from ttg_envs.training.actor.trainer import TrainConfig

    demo = vars(parse("demo"))
    unset = {"env_kwargs", "splits", "conditions", "actor", "seeds", "meter_note"}  # the CLI's forms / filled later
    assert {f.name: demo[f.name] for f in fields(DemoConfig) if f.name not in unset} == {
        f.name: f.default for f in fields(DemoConfig) if f.name not in unset
    }
    train = vars(parse("train"))
    assert all(train[f.name] == f.default for f in fields(LaunchConfig) if f.name != "resume")
    shared = {f.name for f in fields(TrainConfig)} & set(train) - {"window_turns", "env_kwargs"}  # mapped: as_window, json
    assert shared and all(train[name] == getattr(TrainConfig(), name) for name in shared)
