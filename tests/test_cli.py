"""The ``ttg`` parser: one meaning per flag in every subcommand, older spellings still parsed."""

from __future__ import annotations

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
