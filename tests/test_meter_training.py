"""Meter datasets, rewards, SFT, GRPO, encoder training, evaluation and the train/eval commands."""

from __future__ import annotations

import copy
import json
import math

import numpy as np
import pytest

from ttg_envs.meters import (
    Estimate,
    PromptConfig,
    ScriptedMeter,
    format_answer,
    parse_answer,
)
from ttg_envs.training.meter.datasets import (
    build_examples,
    load_trajectories,
    parse_trajectory,
    split_trajectories,
    trajectory_examples,
)
from ttg_envs.training.meter.evaluation import evaluate_meter, markdown_report, step_labels_from_plan_lengths
from ttg_envs.training.meter.grpo import group_normalize, meter_reward, token_accuracy
from ttg_envs.wrappers import write_trajectory


def record(task: str, tokens: list[int], success: bool, policy: str = "p", split: str = "train") -> dict:
    msgs = [{"role": "system", "content": "rules"}, {"role": "user", "content": f"Your task is to: {task}."}]
    for i, _ in enumerate(tokens):
        msgs += [{"role": "assistant", "content": f"<action>step {i}</action>"}, {"role": "user", "content": f"obs {i}"}]
    ttg = [sum(tokens[i:]) for i in range(len(tokens))] if success else None
    return {
        "messages": msgs,
        "success": success,
        "assistant_tokens": tokens,
        "ttg_labels": ttg,
        "metadata": {"policy": policy},
        "task": {"id": task, "type": "t", "split": split},
    }


# ------------------------------------------------------------------------------ datasets (eq. 1-2)
def test_examples_from_a_successful_and_a_failed_trajectory(tmp_path):
    path = tmp_path / "traj.jsonl"
    write_trajectory(path, record("a", [10, 20, 30], True))
    write_trajectory(path, record("b", [5, 5], False, policy="q"))
    ok, failed = load_trajectories([path])
    assert (ok.id, ok.num_steps, ok.success, ok.ttg, ok.policy) == (f"{path}:1", 3, True, [60, 50, 30, 0], "p")
    assert (failed.ttg, failed.policy) == (None, "q")
    ex = trajectory_examples(ok)
    assert [(e.step, e.can_complete, e.ttg) for e in ex] == [(0, True, 60), (1, True, 50), (2, True, 30)]
    assert [len(e.history) for e in ex] == [2, 4, 6]  # h_t ends right before action t
    assert ex[1].history[-1] == {"role": "user", "content": "obs 0"}
    assert ex[0].answer == '{"can_complete": true, "remaining_tokens": 60}'
    fex = trajectory_examples(failed, include_terminal=True)
    assert [(e.step, e.can_complete, e.ttg) for e in fex] == [(0, False, None), (1, False, None), (2, False, None)]
    assert fex[0].answer == format_answer(False, None) and len(fex[-1].history) == 6
    assert len(build_examples([ok, failed], include_terminal=True)) == 4 + 3


def test_ttg_from_token_counts_when_labels_are_missing():
    rec = record("a", [3, 4], True)
    rec["ttg_labels"] = None
    assert parse_trajectory(rec, "x").ttg == [7, 4, 0]


def test_agentprocessbench_record():
    rec = record("a", [1, 1, 1], True)
    apb = {"messages": rec["messages"], "final_label": 1, "step_labels": {"2": 1, "4": -1}, "data_source": "bfcl"}
    traj = parse_trajectory(apb, "apb:1", tokenizer="qwen3")
    assert traj.step_labels == [1, -1, 0] and traj.policy == "bfcl" and traj.success
    assert traj.ttg[-1] == 0 and traj.ttg[0] > traj.ttg[1] > traj.ttg[2] > 0
    assert parse_trajectory({**apb, "final_label": -1}, "apb:2").ttg is None


def test_split_by_trajectory_and_by_task():
    trajs = [parse_trajectory(record(f"task{i % 5}", [1, 2], i % 2 == 0), f"f:{i}") for i in range(20)]
    train, test = split_trajectories(trajs, 0.25, seed=3)
    assert len(test) == 5 and not {t.id for t in train} & {t.id for t in test}
    assert split_trajectories(trajs, 0.25, seed=3)[1] == test
    train, test = split_trajectories(trajs, 0.4, seed=0, by="task")
    assert not {t.task["id"] for t in train} & {t.task["id"] for t in test} and len(test) == 8


# ------------------------------------------------------------------------------ reward (eq. 4-5, 13)
def est(can: bool, remaining: int | None) -> Estimate:
    return parse_answer(format_answer(can, remaining))


@pytest.mark.parametrize(
    "answer, can_complete, ttg, reward",
    [
        (est(True, 90), True, 100, 0.2 + 0.8 * 0.9),
        (est(True, 110), True, 100, 0.2 + 0.8 * 0.9),
        (est(True, 250), True, 100, 0.2),  # u clipped at 0
        (est(True, 100), True, 100, 1.0),
        (est(True, 0), True, 0, 1.0),
        (est(True, 2), True, 0, 0.2),  # max(v, 1) in the denominator
        (est(False, None), False, None, 1.0),
        (est(True, 100), False, None, -1.0),
        (est(False, None), True, 100, -1.0),
        (parse_answer("nonsense"), True, 100, -1.0),
        (parse_answer("nonsense"), False, None, -1.0),
    ],
)
def test_meter_reward(answer, can_complete, ttg, reward):
    assert meter_reward(answer, can_complete, ttg) == pytest.approx(reward)


def test_token_accuracy_and_group_normalisation():
    assert token_accuracy(75, 100) == pytest.approx(0.75) and token_accuracy(None, 3) == 0.0
    adv = group_normalize([1.0, -1.0, 1.0, -1.0])
    np.testing.assert_allclose(adv, np.array([1, -1, 1, -1]) / (math.sqrt(4 / 3) + 1e-6))
    np.testing.assert_allclose(group_normalize([0.2, 0.6, 1.0]), np.array([-0.4, 0.0, 0.4]) / (0.4 + 1e-6))
    assert group_normalize([0.5, 0.5]).tolist() == [0.0, 0.0] and group_normalize([1.0]).tolist() == [0.0]


# ------------------------------------------------------------------------------ evaluation (paper 5.1)
def test_step_labels_from_plan_lengths():
    assert step_labels_from_plan_lengths([5, 4, 4, 6, 0]) == [1, 0, -1, 1]


def test_evaluate_meter_by_hand():
    ok = parse_trajectory(record("a", [10, 10, 10, 10], True), "f:1")
    ok.step_labels = [1, -1, 0, 1]
    bad = parse_trajectory(record("b", [10, 10], False, policy="q"), "f:2")
    # After k actions the meter says: task a -> 40, 50, 30, 30, 0; task b -> completable 20, then failure.
    answers = {
        ("a", 0): (True, 40),
        ("a", 1): (True, 50),
        ("a", 2): (True, 30),
        ("a", 3): (True, 30),
        ("a", 4): (True, 0),
        ("b", 0): (True, 20),
        ("b", 1): "garbage",
        ("b", 2): (False, None),
    }

    def script(history):
        task = history[1]["content"].split(": ")[1][0]
        return answers[(task, sum(m["role"] == "assistant" for m in history))]

    report = evaluate_meter(ScriptedMeter(script), [ok, bad], failure_cost=1000.0, progress=False)
    assert report.prefixes == 6 and report.valid_rate == pytest.approx(5 / 6)
    # completion: a: 4/4 right; b: h0 wrong (says completable), h1 invalid -> wrong
    assert report.completion_accuracy == pytest.approx(4 / 6)
    # u on task a (TTG 40, 30, 20, 10): 1, 1 - 20/30, 1 - 10/20, 1 - 20/10 -> 0
    assert report.token_accuracy == pytest.approx((1 + 1 / 3 + 0.5 + 0) / 4)
    # costs a: 40, 50, 30, 30, 0 -> deltas -10, +20, 0, +30 vs labels +1, -1, 0, +1: wrong, wrong, (neutral), right
    assert (report.good_step_accuracy, report.bad_step_accuracy) == (0.5, 0.0)
    assert report.step_quality_accuracy == pytest.approx(1 / 3) and report.steps == {"good": 2, "bad": 1, "neutral": 1, "ties": 0}
    assert report.per_policy["q"]["step_quality_accuracy"] is None
    assert report.per_policy["p"]["completion_accuracy"] == 1.0


# ------------------------------------------------------------------------------ SFT and GRPO
torch = pytest.importorskip("torch")
pytest.importorskip("transformers")


pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module")
def tiny_setup():
    from ttg_envs.meters import render_history
    from ttg_envs.training.meter.sft import SFTConfig, sft
    from ttg_envs.training.tiny_models import tiny_causal_lm, train_bpe_tokenizer

    torch.set_num_threads(1)
    trajs = [
        parse_trajectory(record("put a mug in fridge", [20] * 4, True), "f:1"),
        parse_trajectory(record("heat an egg", [20] * 3, False), "f:2"),
    ]
    examples = build_examples(trajs)
    prompt = PromptConfig(max_tokens=100)
    texts = [render_history(e.history, lambda t: len(t.split()), prompt) + "\n" + e.answer for e in examples]
    tokenizer = train_bpe_tokenizer(texts + [prompt.system_prompt], vocab_size=400)
    model = tiny_causal_lm(tokenizer, hidden=64, layers=2, heads=2, seed=0)
    losses = sft(model, tokenizer, examples, prompt=prompt, config=SFTConfig(lr=3e-3, epochs=40, batch_size=4), progress=False)
    return model, tokenizer, examples, prompt, losses


def test_sft_lowers_the_answer_loss_and_teaches_the_format(tiny_setup):
    from ttg_envs.meters import TransformersMeter

    model, tokenizer, examples, prompt, losses = tiny_setup
    assert np.mean(losses[-5:]) < 0.25 * np.mean(losses[:5])
    meter = TransformersMeter(model, tokenizer, prompt=prompt, cache_size=0)
    out = meter.estimate([e.history for e in examples])
    assert all(e.valid for e in out)
    assert [e.can_complete for e in out] == [e.can_complete for e in examples]


def test_sft_masks_the_prompt(tiny_setup):
    from ttg_envs.meters.hf import token_counter
    from ttg_envs.training.meter.sft import IGNORE_INDEX, encode_example

    _, tokenizer, examples, prompt, _ = tiny_setup
    ids, labels = encode_example(tokenizer, examples[0], prompt, token_counter(tokenizer))
    trained = [i for i, lab in zip(ids, labels) if lab != IGNORE_INDEX]
    assert tokenizer.decode(trained) == examples[0].answer + "<|im_end|>"
    assert labels[: len(ids) - len(trained)] == [IGNORE_INDEX] * (len(ids) - len(trained))


def sampled_reward(model, tokenizer, examples, prompt, n: int = 24) -> float:
    from ttg_envs.meters.hf import chat_prompt, token_counter

    torch.manual_seed(123)
    count = token_counter(tokenizer)
    rewards = []
    for e in examples:
        ids = torch.tensor([tokenizer.encode(chat_prompt(tokenizer, e.history, prompt, count), add_special_tokens=False)])
        out = model.generate(
            input_ids=ids,
            attention_mask=torch.ones_like(ids),
            do_sample=True,
            temperature=0.7,
            top_k=None,
            max_new_tokens=24,
            num_return_sequences=n,
            pad_token_id=tokenizer.pad_token_id,
        )
        for text in tokenizer.batch_decode(out[:, ids.shape[1] :], skip_special_tokens=True):
            rewards.append(meter_reward(parse_answer(text), e.can_complete, e.ttg))
    return float(np.mean(rewards))


@pytest.mark.slow  # a long integration test (CI runs it; -m 'not slow' leaves it out)
def test_grpo_raises_the_reward(tiny_setup):
    from ttg_envs.training.meter.grpo import GRPOConfig, grpo

    base, tokenizer, examples, prompt, _ = tiny_setup
    model = copy.deepcopy(base)
    before = sampled_reward(model, tokenizer, examples, prompt)
    config = GRPOConfig(lr=3e-4, steps=24, group_size=8, prompts_per_step=4, temperature=0.7, seed=1)
    history = grpo(model, tokenizer, examples, prompt=prompt, config=config, progress=False)
    assert len(history) == 24 and all(-1.0 <= h["reward"] <= 1.0 for h in history)
    after = sampled_reward(model, tokenizer, examples, prompt)
    assert after > before + 0.1, (before, after)


def test_grpo_kl_needs_a_reference(tiny_setup):
    from ttg_envs.training.meter.grpo import GRPOConfig, grpo

    model, tokenizer, examples, prompt, _ = tiny_setup
    with pytest.raises(ValueError, match="reference"):
        grpo(model, tokenizer, examples, prompt=prompt, config=GRPOConfig(beta=0.1, steps=1), progress=False)


# ------------------------------------------------------------------------------ encoder training
def test_encoder_training_lowers_the_loss():
    from ttg_envs.meters.encoder import (
        EncoderConfig,
        EncoderMeter,
        build_model,
        history_segments,
    )
    from ttg_envs.training.meter.regression import RegressionConfig, train_encoder_meter
    from ttg_envs.training.tiny_models import tiny_encoder, train_wordpiece_tokenizer

    trajs = [
        parse_trajectory(record(f"put a mug in fridge {i}" if i % 2 else f"heat an egg {i}", [20] * (3 + i % 3), i % 2 == 1), f"f:{i}")
        for i in range(12)
    ]
    tokenizer = train_wordpiece_tokenizer([s for t in trajs for s in history_segments(t.messages)], vocab_size=200)
    config = EncoderConfig(max_segment_tokens=16, max_task_tokens=8, hidden=16, task_pattern=r"task is to: (.*)\.")
    meter = EncoderMeter(build_model(tiny_encoder(tokenizer, hidden=32, layers=1, heads=2, max_tokens=27), 16), tokenizer, config)
    losses = train_encoder_meter(meter, trajs, RegressionConfig(epochs=60, batch_size=4, lr=3e-3, backbone_lr=1e-3), progress=False)
    assert np.mean(losses[-5:]) < 0.5 * np.mean(losses[:5])
    out = meter.estimate([trajs[1].prefix(0), trajs[1].prefix(3), trajs[4].prefix(1)])
    assert all(e.valid for e in out) and out[0].can_complete and not out[2].can_complete


def test_tokenizer_and_encoder_meter_training_are_deterministic(one_torch_thread):
    """Two trainings on the same data give the same tokenizer ids and bit-identical estimates
    (the tokenizers WordPiece trainer used to number equally frequent tokens differently per run)."""
    from ttg_envs.meters.encoder import EncoderConfig, EncoderMeter, build_model, history_segments
    from ttg_envs.training.meter.regression import RegressionConfig, train_encoder_meter
    from ttg_envs.training.tiny_models import tiny_encoder, train_wordpiece_tokenizer

    trajs = [
        parse_trajectory(record(f"put a mug in fridge {i}" if i % 2 else f"heat an egg {i}", [20] * (3 + i % 3), i % 2 == 1), f"f:{i}")
        for i in range(8)
    ]
    texts = [s for t in trajs for s in history_segments(t.messages)]

    def train_once():
        tokenizer = train_wordpiece_tokenizer(texts, vocab_size=200)
        config = EncoderConfig(max_segment_tokens=16, max_task_tokens=8, hidden=16, turn_limit=10)
        model = build_model(tiny_encoder(tokenizer, hidden=32, layers=1, heads=2, max_tokens=27), 16, budget_aware=True)
        meter = EncoderMeter(model, tokenizer, config)
        train_encoder_meter(meter, trajs, RegressionConfig(epochs=3, batch_size=4, lr=3e-3, backbone_lr=1e-3), progress=False)
        return tokenizer.get_vocab(), [(e.completion_logit, e.remaining_tokens) for e in meter.estimate([t.prefix(1) for t in trajs])]

    vocab_a, out_a = train_once()
    vocab_b, out_b = train_once()
    assert vocab_a == vocab_b and out_a == out_b


def test_full_history_loss_equals_the_per_prefix_loss(one_torch_thread):
    """Training without a window reads every prefix from one GRU pass per trajectory; the loss
    equals the one computed prefix by prefix (a window longer than every trajectory)."""
    import dataclasses

    import torch

    from ttg_envs.meters.encoder import EncoderConfig, EncoderMeter, build_model, history_segments
    from ttg_envs.training.meter import regression
    from ttg_envs.training.tiny_models import tiny_encoder, train_wordpiece_tokenizer

    trajs = [
        parse_trajectory(record(f"put a mug in fridge {i}" if i % 2 else f"heat an egg {i}", [20] * (3 + i % 5), i % 2 == 1), f"f:{i}")
        for i in range(6)
    ]
    tokenizer = train_wordpiece_tokenizer([s for t in trajs for s in history_segments(t.messages)], vocab_size=200)
    config = EncoderConfig(max_segment_tokens=16, max_task_tokens=8, hidden=16, turn_limit=10)
    model = build_model(tiny_encoder(tokenizer, hidden=32, layers=1, heads=2, max_tokens=27), 16, budget_aware=True)
    meter = EncoderMeter(model, tokenizer, config)
    batch = [regression._Example(meter.segments(t.messages), *regression.trajectory_targets(t), []) for t in trajs]
    rc = regression.RegressionConfig()
    full = regression._loss(meter, batch, False, rc, torch, "cpu")
    meter.config = dataclasses.replace(config, window=100)
    per_prefix = regression._loss(meter, batch, False, rc, torch, "cpu")
    assert full.item() == per_prefix.item()


# ------------------------------------------------------------------------------ the commands
def test_train_and_eval_meter_commands(tiny_game, tmp_path, capsys):
    from ttg_envs.cli import main

    env = ["--env-kwargs", json.dumps({"game_files": str(tiny_game)}), "--workers", "1", "--limit", "1"]
    policies = ["--policies", "expert", "noisy_expert:0.5", "noisy_expert:1"]
    assert (
        main(["train-meter", *env, *policies, "--epochs", "2", "--hidden", "16", "--val-fraction", "0.34", "--out", str(tmp_path / "run")])
        == 0
    )
    report = json.loads((tmp_path / "run" / "train_report.json").read_text())
    assert report["trajectories"]["train"] == 2 and report["trajectories"]["held_out"] == 1
    assert (tmp_path / "run" / "meter" / "meter.json").is_file()
    assert (
        main(
            [
                "eval-meter",
                *env,
                *policies,
                "--meter",
                str(tmp_path / "run" / "meter"),
                "--splits",
                "valid_unseen",
                "--out",
                str(tmp_path / "eval"),
            ]
        )
        == 0
    )
    result = json.loads((tmp_path / "eval" / "eval_report.json").read_text())["reports"]["valid_unseen"]
    assert result["prefixes"] > 0 and result["valid_rate"] == 1.0
    assert sum(result["steps"].values()) > 0  # planner labels recorded with the trajectories
    assert "step-quality acc" in capsys.readouterr().out


def test_train_meter_causal_tiny(tiny_game, tmp_path):
    from ttg_envs.cli import main
    from ttg_envs.meters import TransformersMeter, load_meter

    args = [
        "train-meter",
        "--env-kwargs",
        json.dumps({"game_files": str(tiny_game)}),
        "--workers",
        "1",
        "--limit",
        "1",
        "--policies",
        "expert",
        "noisy_expert:1",
        "--backbone",
        "causal:tiny",
        "--hidden",
        "32",
        "--batch-size",
        "4",
        "--max-examples",
        "16",
        "--max-prompt-tokens",
        "128",
        "--grpo-steps",
        "1",
        "--group-size",
        "2",
        "--val-fraction",
        "0",
        "--out",
        str(tmp_path / "run"),
    ]
    assert main(args) == 0
    report = json.loads((tmp_path / "run" / "train_report.json").read_text())
    assert report["train"]["sft_steps"] == 4 and report["train"]["grpo_steps"] == 1
    assert isinstance(load_meter(str(tmp_path / "run" / "meter")), TransformersMeter)


def test_step_quality_counts_a_tie_as_wrong_and_decided_accuracy_sets_it_aside():
    traj = parse_trajectory(record("c", [10, 10], True), "f:1")
    traj.step_labels = [1, 1]
    answers = {0: (True, 40), 1: (True, 40), 2: (True, 0)}  # deltas 0 (a tie) and +40
    meter = ScriptedMeter(lambda h: answers[sum(m["role"] == "assistant" for m in h)])
    report = evaluate_meter(meter, [traj], failure_cost=1000.0, progress=False)
    assert report.step_quality_accuracy == 0.5 and report.decided_step_accuracy == 1.0 and report.steps["ties"] == 1


def test_reports_record_task_ranges_as_index_lists():
    # `--tasks 0 25 100-102` is a lazy TaskIndices; a report once wrote its repr ("TaskIndices(...)")
    # into train_report.json and a shipped meter.json.
    from ttg_envs.cli_args import TaskIndices
    from ttg_envs.training.meter.config import MeterRunConfig, report_config

    config = MeterRunConfig(tasks=TaskIndices([range(0, 1), range(25, 26), range(100, 103)]))
    assert json.loads(json.dumps(report_config(config), default=str))["tasks"] == [0, 25, 100, 101, 102]
    assert report_config(MeterRunConfig())["tasks"] is None


def test_anchored_step_accuracy_lets_the_outcome_decide_the_last_step_only():
    # A lost episode whose closing step the meter reads as progress (40 -> 20 -> 0 tokens, success
    # predicted throughout): its own figures call the bad last step good; anchored, c_2 = C = 1000
    # and the step's cost rises by 980. The first step is decided by the meter either way.
    lost = parse_trajectory(record("c", [10, 10], False), "f:1")
    lost.step_labels = [1, -1]
    answers = {0: (True, 40), 1: (True, 20), 2: (True, 0)}
    meter = ScriptedMeter(lambda h: answers[sum(m["role"] == "assistant" for m in h)])
    report = evaluate_meter(meter, [lost], failure_cost=1000.0, progress=False)
    assert (report.good_step_accuracy, report.bad_step_accuracy, report.balanced_step_accuracy) == (1.0, 0.0, 0.5)
    assert (report.anchored_good_step_accuracy, report.anchored_bad_step_accuracy) == (1.0, 1.0)
    assert report.anchored_balanced_step_accuracy == 1.0
    # A won episode whose meter predicts failure after its good last step: anchored, c_2 = 0.
    won = parse_trajectory(record("c", [10, 10], True), "f:2")
    won.step_labels = [-1, 1]
    answers = {0: (True, 40), 1: (True, 60), 2: (False, 0)}
    report = evaluate_meter(meter, [won], failure_cost=1000.0, progress=False)
    assert (report.good_step_accuracy, report.bad_step_accuracy) == (0.0, 1.0)
    assert (report.anchored_good_step_accuracy, report.anchored_bad_step_accuracy) == (1.0, 1.0)
    assert "balanced, last step anchored" in markdown_report({"x": report}).splitlines()[0]


def test_step_rank_loss_by_hand():
    """The logistic loss on consecutive prefixes' order: worked by hand, pairs across trajectories and NaN targets left out."""
    from ttg_envs.training.meter.regression import RANK_TEMPERATURE, _step_rank_loss

    pred = torch.tensor([1.0, 0.9, 0.95, 0.2, 0.4])
    y = torch.tensor([2.0, 1.5, math.nan, 1.0, 1.0])
    # trajectory 1: (0 -> 1) target falls by 0.5, predicted falls by 0.1: softplus(-0.1 / T); (1 -> 2) no target.
    # trajectory 2: (3 -> 4) equal targets: no order. Nothing pairs rows 2 and 3 (different trajectories).
    expected = math.log1p(math.exp(-0.1 / RANK_TEMPERATURE))
    assert _step_rank_loss(pred, y, [3, 2], torch).item() == pytest.approx(expected, rel=1e-5)
    wrong = torch.tensor([1.0, 1.1, 0.95, 0.2, 0.4])  # predicted to rise: a larger loss
    assert _step_rank_loss(wrong, y, [3, 2], torch).item() == pytest.approx(math.log1p(math.exp(0.1 / RANK_TEMPERATURE)), rel=1e-5)
    assert _step_rank_loss(pred, torch.full((5,), math.nan), [3, 2], torch).item() == 0.0


def test_train_meter_with_a_call_tally_on_tau2(tmp_path):
    """A tau2 meter that pairs each action with the calls made so far: the tiny backbone is sized
    for the longer pairs, and the saved meter reads them."""
    pytest.importorskip("tau2")
    from ttg_envs.cli import main
    from ttg_envs.meters import load_meter
    from ttg_envs.training.meter.datasets import load_trajectories

    argv = ["train-meter", "--env", "ttg/Tau2-v0", "--env-kwargs", '{"user": "gold"}', "--tasks", "0", "--workers", "1"]
    argv += ["--policies", "gold", "gold_drop_last", "--targets", "gold", "--task-from-user", "--call-tally", "24"]
    assert main([*argv, "--epochs", "1", "--hidden", "16", "--val-fraction", "0", "--out", str(tmp_path / "run")]) == 0
    meter = load_meter(str(tmp_path / "run" / "meter"))
    assert meter.config.call_tally == 24
    (won,) = load_trajectories([tmp_path / "run" / "trajectories" / "train-gold.jsonl"])
    pairs = [pair for pair, _ in meter.segments(won.messages)]
    assert pairs[-1].rsplit("\n", 1)[-1].endswith("x1") and all(e.valid for e in meter.estimate(list(won.prefixes())))
