"""Defaults that follow the env, and specs checked before any model, game or progress bar loads."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from ttg_envs.cli import build_parser, main
from ttg_envs.cli.checks import resolve_selection


def resolved(*argv: str):
    args = build_parser().parse_args(list(argv))
    return resolve_selection(args, meter_default=args.command == "eval")


@pytest.mark.parametrize(
    "env,splits,actor",
    [
        ("ttg/ALFWorld-v0", ["valid_seen", "valid_unseen"], "scripted:noisy_expert:0.75"),
        ("ttg/PaperSearchQA-v0", ["test"], "scripted:noisy_expert:0.75"),
        ("ttg/AWM-v0", ["train"], "scripted:noisy_expert:0.75"),
        ("ttg/BFCL-v0", ["all"], "scripted:gold"),
        ("ttg/Tau2-v0", ["test"], "scripted:gold"),
    ],
)
def test_eval_defaults_follow_the_env(env, splits, actor):
    args = resolved("eval", "--env", env)
    assert (args.splits, args.actor, args.meter) == (splits, actor, env)  # the env id loads its shipped meter


def test_no_meter_is_needed_without_a_guided_condition():
    assert resolved("eval", "--conditions", "natural", "random-2").meter is None


def test_bare_ttg_eval_runs_on_alfworld_with_its_shipped_meter(tmp_path, capsys):
    assert main(["eval", "--limit", "1", "--seeds", "0", "--workers", "1", "--out", str(tmp_path)]) == 0
    report = json.loads((tmp_path / "eval.json").read_text())
    assert report["config"]["meter"] == "ttg/ALFWorld-v0" and report["config"]["splits"] == ["valid_seen", "valid_unseen"]
    assert {e["policy"] for e in report["episodes"]} == {"natural", "random-4", "guided-4"}
    # The evaluation phase reports its planner time-limit hits, as recording does.
    assert report["config"]["planner_timeouts"] == 0 and "planner time limit hit 0 times" in capsys.readouterr().out


def test_ttg_eval_on_papersearchqa_needs_no_other_flag(tmp_path):
    assert main(["eval", "--env", "ttg/PaperSearchQA-v0", "--limit", "1", "--seeds", "0", "--workers", "1", "--out", str(tmp_path)]) == 0
    report = json.loads((tmp_path / "eval.json").read_text())
    assert {e["split"] for e in report["episodes"]} == {"test"} and report["config"]["meter"] == "ttg/PaperSearchQA-v0"
    assert "planner_timeouts" not in report["config"]  # no planner, nothing to count


def test_ttg_eval_plays_the_tasks_it_is_given(tmp_path):
    argv = ["eval", "--env", "ttg/PaperSearchQA-v0", "--conditions", "natural", "--seeds", "0", "--workers", "1"]
    assert main([*argv, "--tasks", "2", "0", "--out", str(tmp_path / "named")]) == 0
    named = json.loads((tmp_path / "named" / "eval.json").read_text())
    assert named["config"]["tasks"] == [2, 0]
    assert sorted(e["task_id"] for e in named["episodes"]) == ["test-00000", "test-00002"]  # the split's tasks 0 and 2


@pytest.mark.parametrize(
    "extra,says",
    [(["--tasks", "5000"], "task indices must lie in 0..599 for split 'test'; got 5000"), (["--tasks", "0", "--limit", "2"], "not both")],
)
def test_ttg_eval_refuses_bad_tasks_in_one_line(extra, says, capsys):
    assert main(["eval", "--env", "ttg/PaperSearchQA-v0", "--conditions", "natural", *extra]) == 2
    err = capsys.readouterr().err
    assert err.startswith("ttg: error: argument --tasks: ") and says in err


def test_demo_on_an_env_without_a_train_split_guides_with_the_shipped_meter():
    args = build_parser().parse_args(["demo", "--env", "ttg/BFCL-v0"])
    resolve_selection(args, meter_default=True)
    assert (args.splits, args.actor, args.meter) == (["all"], "scripted:gold", "ttg/BFCL-v0")


_FAST = """
import sys, time
from ttg_envs.cli import main
t = time.perf_counter()
code = main(sys.argv[1:])
print(code, round(time.perf_counter() - t, 2), any(m in sys.modules for m in ("torch", "transformers", "textworld")))
"""


@pytest.mark.parametrize(
    "argv,flag,says",
    [
        (["eval", "--meter", "ttg/Nope-v0"], "--meter", "shipped meters: ttg/ALFWorld-v0"),
        (["eval", "--meter", "encodr:x"], "--meter", "no meter scheme"),
        (["eval", "--actor", "scripted:expertt"], "--actor", "choices: expert, noisy_expert"),
        (["eval", "--actor", "scripted:expert", "--env", "ttg/BFCL-v0"], "--actor", "choices: gold, gold_drop_last"),
        (["eval", "--env", "ttg/Nope-v0", "--meter", "ttg/Nope-v0"], "--env", "choices: ttg/ALFWorld-v0"),
        (["eval", "--env", "ttg/PaperSearchQA-v0", "--splits", "valid_seen"], "--splits", "choices: train, test"),
        (["eval", "--env-kwargs", "{bad"], "--env-kwargs", "not valid JSON"),
        (["eval", "--conditions", "guided-x"], "--conditions", "natural, random-<k>, guided-<k>, planner-<k> or gold-<k>"),
        (["rollout", "--env", "ttg/BFCL-v0", "--policies", "expert"], "--policies", "choices: gold"),
        (["demo", "--meter-split", "nope"], "--meter-split", "choices: train, valid_seen"),
        (["train", "--model", "tiny", "--meter", "ttg/Nope-v0"], "--meter", "shipped meters:"),
    ],
)
def test_a_bad_spec_fails_at_once_in_one_line_naming_the_flag(argv, flag, says):
    out = subprocess.run([sys.executable, "-c", _FAST, *argv], capture_output=True, text=True, timeout=60)
    code, seconds, heavy = out.stdout.split()
    assert code == "2" and out.stderr.count("\n") == 1 and out.stderr.startswith(f"ttg: error: argument {flag}: ")
    assert says in out.stderr
    assert heavy == "False" and float(seconds) < 2.0  # no model, game or engine was loaded


@pytest.mark.parametrize("command", [[], ["rollout"], ["eval"], ["demo"], ["train-meter"], ["eval-meter"], ["train"]])
def test_help_pages_are_written_for_the_command_line(command, capsys):
    with pytest.raises(SystemExit):
        main([*command, "--help"])
    text = capsys.readouterr().out
    assert "``" not in text and ":mod:" not in text and ":func:" not in text and "ttg train --help" not in text


def test_threads_reach_torch_here_and_in_spawned_workers(monkeypatch):
    torch = pytest.importorskip("torch")
    from ttg_envs.cli import apply_threads

    assert build_parser().parse_args(["eval", "--threads", "1"]).threads == 1
    assert build_parser().parse_args(["demo", "--threads", "2"]).threads == 2
    before = torch.get_num_threads()
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    try:
        apply_threads(1)
        import os

        assert torch.get_num_threads() == 1 and os.environ["OMP_NUM_THREADS"] == "1"
        torch.set_num_threads(before)
        from ttg_envs.wrappers.stack import cached_meter

        meter = cached_meter("ttg/ALFWorld-v0", device="cpu", threads=1)  # what --meter-kwargs passes
        assert torch.get_num_threads() == 1 and str(meter.device) == "cpu"
        assert cached_meter("ttg/ALFWorld-v0", device="cpu", threads=1) is meter
    finally:
        torch.set_num_threads(before)
    assert build_parser().parse_args(["eval", "--meter-kwargs", '{"threads": 1}']).meter_kwargs == '{"threads": 1}'


def test_model_specs_take_the_hf_prefix_everywhere():
    from ttg_envs.model_spec import parse_model_spec

    assert parse_model_spec("hf:Qwen/Qwen3-4B?revision=main") == parse_model_spec("Qwen/Qwen3-4B?revision=main")
    assert parse_model_spec("transformers:/models/x.gguf")[0] == "/models/x.gguf"


def test_tau2_gets_the_user_its_actor_needs(monkeypatch):
    monkeypatch.delenv("TTG_USER_BASE_URL", raising=False)
    assert json.loads(resolved("eval", "--env", "ttg/Tau2-v0").env_kwargs)["user"] == "gold"
    with pytest.raises(ValueError, match=r"argument --env-kwargs: .*\"user\": \"scenario\""):
        resolved("eval", "--env", "ttg/Tau2-v0", "--actor", "openai:http://h/v1#m")
    args = resolved("eval", "--env", "ttg/Tau2-v0", "--actor", "openai:http://h/v1#m", "--env-kwargs", '{"user": "scenario"}')
    assert json.loads(args.env_kwargs) == {"user": "scenario"}


@pytest.mark.parametrize(
    "argv,splits,policies",
    [
        (["eval-meter", "--meter", "ttg/ALFWorld-v0"], ["valid_seen", "valid_unseen"], ["expert", "noisy_expert:0.25", "noisy_expert:0.5"]),
        (["eval-meter", "--meter", "ttg/PaperSearchQA-v0", "--env", "ttg/PaperSearchQA-v0"], ["test"], None),
        (["train-meter", "--env", "ttg/Tau2-v0"], ["train"], ["gold", "gold_drop_last", "perturbed"]),
    ],
)
def test_meter_commands_follow_the_env(argv, splits, policies):
    from ttg_envs.cli.meter import _following_the_env

    args = _following_the_env(lambda a: a, argv[0])(build_parser().parse_args(argv))
    assert args.splits == splits and (policies is None or args.policies == policies)


def test_meter_commands_check_their_specs_first(capsys):
    assert main(["eval-meter", "--meter", "ttg/Nope-v0"]) == 2
    assert main(["train-meter", "--env", "ttg/BFCL-v0"]) == 2
    err = capsys.readouterr().err.splitlines()
    assert err[0].startswith("ttg: error: argument --meter: no meter ships") and err[1].startswith("ttg: error: argument --splits:")


def test_carry_noops_is_refused_where_the_env_declares_no_task_state(capsys):
    assert main(["eval", "--env", "ttg/PaperSearchQA-v0", "--conditions", "guided-2", "--carry-noops"]) == 2
    assert main(["eval-meter", "--env", "ttg/PaperSearchQA-v0", "--meter", "ttg/PaperSearchQA-v0", "--carry-noops"]) == 2
    err = capsys.readouterr().err.splitlines()
    assert all(line.startswith("ttg: error: argument --carry-noops: ttg/PaperSearchQA-v0 declares no task state") for line in err[:2])


def test_episodes_per_task_is_refused_with_given_trajectories(capsys, tmp_path):
    trajectories = tmp_path / "train-gold.jsonl"
    trajectories.write_text("")
    assert main(["train-meter", "--trajectories", str(trajectories), "--episodes-per-task", "3", "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err.splitlines()
    assert err[0] == "ttg: error: argument --episodes-per-task: sets how many episodes to record; it has no use with --trajectories"


def test_gold_targets_and_labels_are_refused_where_the_env_has_no_gold_policy(capsys, tmp_path):
    # Before: train-meter recorded every episode and failed only when label_gold_path built the gold policy.
    assert main(["train-meter", "--env", "ttg/PaperSearchQA-v0", "--targets", "gold", "--out", str(tmp_path)]) == 2
    assert main(["train-meter", "--env", "ttg/ALFWorld-v0", "--targets", "gold-prefix", "--out", str(tmp_path)]) == 2
    assert main(["eval-meter", "--env", "ttg/AWM-v0", "--meter", "ttg/AWM-v0", "--labels", "gold", "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err.splitlines()
    assert err[0] == (
        "ttg: error: argument --targets: gold needs a gold policy and ttg/PaperSearchQA-v0 has none (choices: expert, noisy_expert)"
    )
    assert err[1].startswith("ttg: error: argument --targets: gold-prefix needs a gold policy and ttg/ALFWorld-v0 has none")
    assert err[2].startswith("ttg: error: argument --labels: gold needs a gold policy and ttg/AWM-v0 has none")
    assert not any(tmp_path.iterdir())  # nothing recorded


def test_train_meter_task_from_user_and_compact_calls_reach_the_config():
    from ttg_envs.cli.configs import from_args
    from ttg_envs.training.meter.config import MeterTrainConfig

    argv = ["train-meter", "--env", "ttg/Tau2-v0", "--targets", "gold"]
    assert not from_args(MeterTrainConfig, build_parser().parse_args(argv)).task_from_user
    assert from_args(MeterTrainConfig, build_parser().parse_args([*argv, "--task-from-user"])).task_from_user
    assert not from_args(MeterTrainConfig, build_parser().parse_args(argv)).compact_calls
    assert from_args(MeterTrainConfig, build_parser().parse_args([*argv, "--compact-calls"])).compact_calls
    assert from_args(MeterTrainConfig, build_parser().parse_args([*argv, "--task-tokens", "160"])).task_tokens == 160
    assert from_args(MeterTrainConfig, build_parser().parse_args(argv)).call_tally == 0
    assert from_args(MeterTrainConfig, build_parser().parse_args([*argv, "--call-tally", "48"])).call_tally == 48
