"""No-op siblings for meter training: real-engine branches, exact targets, and the pair loss."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from sibling_rows import sibling_rows

from ttg_envs.registry import make_policy
from ttg_envs.training.meter.datasets import load_trajectories
from ttg_envs.training.meter.evaluation import NOOP_VERBS
from ttg_envs.training.meter.siblings import add_noop_siblings, noop_commands
from ttg_envs.wrappers import PlanLength, make_env

ENV = "ttg/ALFWorld-v0"


def react(command: str) -> str:
    return make_policy(ENV, "expert").respond(command)


def command_of(text: str) -> str:
    return text.split("<action>")[-1].split("</action>")[0]


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    from ttg_envs.training.meter.record import collect_trajectories

    out = tmp_path_factory.mktemp("siblings")
    return collect_trajectories(ENV, {}, "valid_seen", ["expert", "noisy_expert:0.5"], out, tasks=[5], plan_lengths=True)


@pytest.fixture(scope="module")
def wandering(tmp_path_factory):
    """Noisy-expert episodes that leave the planner's path (12 and 33 steps)."""
    from ttg_envs.training.meter.record import collect_trajectories

    out = tmp_path_factory.mktemp("wandering")
    return collect_trajectories(ENV, {}, "valid_seen", ["noisy_expert:0.75"], out, tasks=[5, 6], plan_lengths=True)


def test_noop_commands_keep_only_commands_that_do_nothing():
    assert noop_commands(["go to desk 1", "look", "examine desk 1", "take mug 1 from desk 1", "look"]) == ["look", "examine desk 1", "help"]


def test_siblings_are_real_branches_with_the_expert_rollouts_target(recorded):
    trajectories = load_trajectories(recorded)
    made = add_noop_siblings(trajectories, ENV, respond=react, turn_limit=50, every=1, per_state=2, progress=False)
    assert made == sum(len(t.siblings) for t in trajectories) > 0
    env = PlanLength(make_env(ENV, split="valid_seen"), respond=react)
    try:
        for traj in trajectories:
            assert {s.step for s in traj.siblings} == set(range(traj.num_steps))
            for sibling in traj.siblings:
                t = sibling.step
                assert sibling.messages[: traj.actions[t]] == traj.prefix(t)
                taken = sibling.messages[traj.actions[t]]["content"]
                assert command_of(taken).split()[0] in NOOP_VERBS and taken != traj.messages[traj.actions[t]]["content"]
                # The target is what PlanLength measures after really taking that command there.
                env.reset(seed=0, options={"task_id": traj.task["id"]})
                for i in traj.actions[:t]:
                    env.step(traj.messages[i]["content"])
                *_, info = env.step(taken)
                assert env.unwrapped.messages == sibling.messages
                assert sibling.expert_ttg == info["expert_ttg"] == traj.expert_ttg[t]
    finally:
        env.close()


def test_siblings_are_deterministic_and_honour_every_and_per_state(recorded):
    first, second = load_trajectories(recorded), load_trajectories(recorded)
    add_noop_siblings(first, ENV, respond=react, turn_limit=50, every=2, per_state=1, seed=7, progress=False)
    add_noop_siblings(second, ENV, respond=react, turn_limit=50, every=2, per_state=1, seed=7, progress=False)
    assert [t.siblings for t in first] == [t.siblings for t in second]
    for traj in first:
        assert [s.step for s in traj.siblings] == list(range(0, traj.num_steps, 2))


def test_a_copy_of_the_recordings_elsewhere_draws_the_same_siblings(recorded, tmp_path):
    """The draw must not depend on the folder the files were read from (a rebuild from a fresh
    clone reads them from another path)."""
    import shutil

    copies = [shutil.copy(p, tmp_path / p.name) for p in map(Path, recorded)]
    here, there = load_trajectories(recorded), load_trajectories(copies)
    assert here[0].id != there[0].id
    for trajectories in (here, there):
        add_noop_siblings(trajectories, ENV, respond=react, turn_limit=50, every=1, per_state=1, progress=False)
    assert [t.siblings for t in here] == [t.siblings for t in there]


def test_always_tried_commands_come_first(recorded):
    trajectories = load_trajectories(recorded)
    add_noop_siblings(trajectories, ENV, respond=react, turn_limit=50, every=1, per_state=2, always=("help",), progress=False)
    for traj in trajectories:
        firsts = [s for s in traj.siblings if s is next(x for x in traj.siblings if x.step == s.step)]
        assert [command_of(s.messages[traj.actions[s.step]]["content"]) for s in firsts] == ["help"] * traj.num_steps
        assert len(traj.siblings) == 2 * traj.num_steps


def test_a_sibling_that_leaves_too_few_turns_has_no_target(recorded):
    traj = load_trajectories(recorded)[0]
    plan = traj.plan_lengths[0]
    add_noop_siblings([traj], ENV, respond=react, turn_limit=plan, every=100, per_state=1, progress=False)
    # With exactly `plan` turns, the plan fits from h_0 but not after a wasted turn.
    assert traj.expert_ttg[0] is not None and [s.expert_ttg for s in traj.siblings] == [None]


def test_siblings_need_plan_length_records():
    from ttg_envs.training.meter.datasets import Trajectory

    traj = Trajectory("t", [], [], success=True, ttg=[0])
    with pytest.raises(ValueError, match="PlanLength"):
        add_noop_siblings([traj], ENV, respond=react, turn_limit=50, progress=False)


def test_pair_loss_by_hand():
    torch = pytest.importorskip("torch")
    from ttg_envs.training.meter.regression import _pair_loss

    sibling = torch.tensor([2.0, 1.0, 0.5])
    child = torch.tensor([1.5, 1.0, 0.0])
    # Target differences 0.5 (met exactly), 1.0 (predicted 0: |err| 1 >= beta, 1 - 0.05), NaN (skipped).
    loss = _pair_loss(sibling, child, torch.tensor([3.0, 2.0, math.nan]), torch.tensor([2.5, 1.0, 0.0]), torch)
    assert loss.item() == pytest.approx((0.0 + 0.95) / 2)
    empty = _pair_loss(sibling, child, torch.tensor([math.nan] * 3), child, torch)
    assert empty.item() == 0.0


def test_rank_loss_by_hand():
    torch = pytest.importorskip("torch")
    from ttg_envs.training.meter.regression import RANK_TEMPERATURE, _rank_loss

    sibling = torch.tensor([2.0, 1.0, 0.5, 0.3])
    child = torch.tensor([1.9, 1.2, 0.0, 0.1])
    # Targets: sibling above by 0.5 (predicted above by 0.1), sibling below by 1 (predicted below by
    # 0.2), equal (no order: skipped), NaN (skipped).
    loss = _rank_loss(sibling, child, torch.tensor([3.0, 1.0, 2.0, math.nan]), torch.tensor([2.5, 2.0, 2.0, 0.0]), torch)
    softplus = lambda x: math.log1p(math.exp(x))  # noqa: E731
    assert loss.item() == pytest.approx((softplus(-0.1 / RANK_TEMPERATURE) + softplus(-0.2 / RANK_TEMPERATURE)) / 2, rel=1e-5)
    # A wrong order costs more than a right one by the same gap.
    wrong = _rank_loss(torch.tensor([1.0]), torch.tensor([1.1]), torch.tensor([3.0]), torch.tensor([2.5]), torch)
    right = _rank_loss(torch.tensor([1.1]), torch.tensor([1.0]), torch.tensor([3.0]), torch.tensor([2.5]), torch)
    assert wrong.item() > 10 * right.item()
    empty = _rank_loss(sibling, child, torch.tensor([2.0] * 4), torch.tensor([2.0] * 4), torch)
    assert empty.item() == 0.0


def test_training_with_siblings_moves_a_no_op_above_the_step_taken(recorded, one_torch_thread):
    """The pair loss teaches the comparison: after training, each sibling's predicted TTG sits above
    the trajectory's own next state's wherever the expert's step shortened the plan."""
    pytest.importorskip("torch")
    from ttg_envs.meters.encoder import EncoderConfig, EncoderMeter, build_model, history_segments
    from ttg_envs.training.meter.regression import RegressionConfig, train_encoder_meter
    from ttg_envs.training.tiny_models import tiny_encoder, train_wordpiece_tokenizer

    trajectories = [t for t in load_trajectories(recorded) if t.policy == "expert"]
    add_noop_siblings(trajectories, ENV, respond=react, turn_limit=50, every=1, per_state=3, progress=False)
    histories = [t.messages for t in trajectories] + [s.messages for t in trajectories for s in t.siblings]
    tokenizer = train_wordpiece_tokenizer([s for h in histories for s in history_segments(h)])
    config = EncoderConfig(hidden=32, turn_limit=50)
    meter = EncoderMeter(build_model(tiny_encoder(tokenizer, hidden=32, max_tokens=160), 32, budget_aware=True), tokenizer, config)
    train_encoder_meter(meter, trajectories, RegressionConfig(epochs=60, targets="expert", sibling_weight=4.0), progress=False)
    pairs = [(s, traj) for traj in trajectories for s in traj.siblings if traj.expert_ttg[s.step + 1] < traj.expert_ttg[s.step]]
    sibling = meter.estimate([s.messages for s, _ in pairs])
    child = meter.estimate([traj.prefix(s.step + 1) for s, traj in pairs])
    above = [a.remaining_tokens > b.remaining_tokens for a, b in zip(sibling, child)]
    assert sum(above) >= 0.8 * len(above)


def test_siblings_need_expert_targets_and_the_whole_history(recorded):
    pytest.importorskip("torch")
    from ttg_envs.meters.encoder import EncoderConfig, EncoderMeter, build_model
    from ttg_envs.training.meter.regression import RegressionConfig, train_encoder_meter
    from ttg_envs.training.tiny_models import tiny_encoder, train_wordpiece_tokenizer

    trajectories = load_trajectories(recorded)[:1]
    add_noop_siblings(trajectories, ENV, respond=react, turn_limit=50, every=4, per_state=1, progress=False)
    tokenizer = train_wordpiece_tokenizer(["go to desk 1"] * 10, vocab_size=100)
    for config, rc in [
        (EncoderConfig(hidden=16), RegressionConfig(targets="recorded")),
        (EncoderConfig(hidden=16, window=2), RegressionConfig(targets="expert")),
    ]:
        meter = EncoderMeter(build_model(tiny_encoder(tokenizer, hidden=16, max_tokens=96), 16), tokenizer, config)
        with pytest.raises(ValueError, match="siblings need"):
            train_encoder_meter(meter, trajectories, rc, progress=False)


@pytest.mark.parametrize("budget_aware, carry_gate", [(False, False), (True, False), (True, True)])
def test_extend_equals_reading_the_longer_history(one_torch_thread, budget_aware, carry_gate):
    torch = pytest.importorskip("torch")
    from ttg_envs.meters.encoder import build_model
    from ttg_envs.training.tiny_models import tiny_encoder, train_wordpiece_tokenizer

    tokenizer = train_wordpiece_tokenizer(["go to desk 1"] * 10, vocab_size=100)
    model = build_model(tiny_encoder(tokenizer, hidden=16, max_tokens=32), 16, budget_aware=budget_aware, carry_gate=carry_gate).eval()
    vectors = torch.randn(2, 6, 16)
    turns = torch.tensor([[9, 8, 7, 6, 5, 4]] * 2) if budget_aware else None
    with torch.no_grad():
        full, states, _ = model(vectors, torch.tensor([6, 6]), turns, return_states=True)
        short, short_states, _ = model(vectors[:, :4], torch.tensor([4, 4]), None if turns is None else turns[:, :4], return_states=True)
        step = model.extend(short_states[:, 3], vectors[:, 4], None if turns is None else turns[:, 4], short[:, 3, 1])
    assert full.shape == (2, 6, 2)
    assert torch.allclose(step, full[:, 4], atol=1e-5)
    assert torch.allclose(short_states[:, 3], states[:, 3], atol=1e-6)


def test_a_carry_gate_carries_the_previous_estimate(one_torch_thread):
    """v_t = g v_{t-1} + (1 - g) raw_t, worked by hand from the raw head outputs."""
    torch = pytest.importorskip("torch")
    from ttg_envs.meters.encoder import build_model
    from ttg_envs.training.tiny_models import tiny_encoder, train_wordpiece_tokenizer

    tokenizer = train_wordpiece_tokenizer(["go to desk 1"] * 10, vocab_size=100)
    model = build_model(tiny_encoder(tokenizer, hidden=16, max_tokens=32), 16, carry_gate=True).eval()
    raw = torch.tensor([[[0.5, 2.0, 0.0], [0.1, 5.0, 100.0], [0.2, 1.0, -100.0], [0.3, 4.0, 0.0]]])
    out, gate = model._carry(raw)
    assert out[0, :, 0].tolist() == pytest.approx([0.5, 0.1, 0.2, 0.3])
    # 2 (first), carried (gate ~1): 2, replaced (gate ~0): 1, half and half: (1 + 4) / 2.
    assert out[0, :, 1].tolist() == pytest.approx([2.0, 2.0, 1.0, 2.5], abs=1e-6)
    assert gate.tolist() == [[0.0, 100.0, -100.0, 0.0]]
    with pytest.raises(ValueError, match="previous estimates"):
        model.extend(torch.zeros(1, 16), torch.zeros(1, 16))


def test_gate_labels_by_hand():
    torch = pytest.importorskip("torch")
    from ttg_envs.training.meter.regression import _gate_labels

    y = torch.tensor([1.0, 2.0, math.nan, 3.0])
    labels, known = _gate_labels(y, torch.tensor([1.0, 1.5, 2.0, math.nan]), torch)
    assert labels.tolist()[:2] == [1.0, 0.0] and known.tolist() == [True, True, False, False]


def test_train_meter_command_with_noop_siblings(tiny_game, tmp_path, capsys):
    import json

    from ttg_envs.cli import main

    env = ["--env-kwargs", json.dumps({"game_files": str(tiny_game)}), "--workers", "1", "--limit", "1"]
    args = ["train-meter", *env, "--policies", "expert", "noisy_expert:0.5", "--targets", "expert", "--turn-limit", "50"]
    assert main([*args, "--noop-siblings", "2", "--epochs", "1", "--hidden", "16", "--val-fraction", "0", "--out", str(tmp_path)]) == 0
    report = json.loads((tmp_path / "train_report.json").read_text())
    assert report["config"]["noop_siblings"] == 2 and report["timings"]["siblings_s"] > 0
    assert "no-op siblings from 2 trajectories" in capsys.readouterr().out
    assert (
        main(
            [
                *args,
                "--noop-siblings",
                "1",
                "--best-siblings",
                "--epochs",
                "1",
                "--hidden",
                "16",
                "--val-fraction",
                "0",
                "--out",
                str(tmp_path / "best"),
            ]
        )
        == 0
    )
    assert "no-op and best siblings from 2 trajectories" in capsys.readouterr().out


def test_best_siblings_take_the_planners_next_command_with_its_exact_target(wandering):
    """A best sibling is the planner's next command from the state, where the trajectory took
    another, and its target is what PlanLength measures after really taking it there."""
    trajectories = load_trajectories(wandering)
    add_noop_siblings(trajectories, ENV, respond=react, turn_limit=50, every=1, per_state=1, best=True, progress=False)
    env = PlanLength(make_env(ENV, split="valid_seen"), respond=react)
    checked = 0
    try:
        for traj in trajectories:
            bests = [s for s in traj.siblings if s.kind == "best"]
            assert {s.kind for s in traj.siblings} <= {"noop", "best"} and len({s.step for s in bests}) == len(bests)
            for t in range(traj.num_steps):
                env.reset(seed=0, options={"task_id": traj.task["id"]})
                for i in traj.actions[:t]:
                    env.step(traj.messages[i]["content"])
                planned = react(env.unwrapped.expert_plan()[0])
                sibling = next((s for s in bests if s.step == t), None)
                if planned == traj.messages[traj.actions[t]]["content"]:
                    assert sibling is None
                    continue
                *_, info = env.step(planned)
                assert sibling.messages == env.unwrapped.messages and sibling.messages[traj.actions[t]]["content"] == planned
                assert sibling.expert_ttg == info["expert_ttg"]
                checked += 1
    finally:
        env.close()
    assert checked >= 10


def test_each_no_op_sibling_is_paired_with_its_states_best_sibling(wandering, one_torch_thread):
    """The pair losses read every sibling against the step taken, and every no-op sibling also
    against the best sibling of its state (the comparison a guide makes), with both targets."""
    pytest.importorskip("torch")
    from ttg_envs.meters.encoder import EncoderConfig, EncoderMeter, build_model, history_segments
    from ttg_envs.training.tiny_models import tiny_encoder, train_wordpiece_tokenizer

    trajectories = load_trajectories(wandering)
    add_noop_siblings(trajectories, ENV, respond=react, turn_limit=50, every=2, per_state=2, best=True, progress=False)
    histories = [t.messages for t in trajectories] + [s.messages for t in trajectories for s in t.siblings]
    tokenizer = train_wordpiece_tokenizer([s for h in histories for s in history_segments(h)])
    meter = EncoderMeter(
        build_model(tiny_encoder(tokenizer, hidden=16, max_tokens=160), 16, budget_aware=True),
        tokenizer,
        EncoderConfig(hidden=16, turn_limit=50),
    )
    last, y, pairs, parents = sibling_rows(meter, trajectories)
    siblings = [s for traj in trajectories for s in traj.siblings]
    expected = []
    for traj in trajectories:
        bests = {s.step: s for s in traj.siblings if s.kind == "best"}
        expected += [(s.expert_ttg, bests[s.step].expert_ttg) for s in traj.siblings if s.kind == "noop" and s.step in bests]
    assert len(expected) >= 10 and len(pairs[0]) == len(siblings) + len(expected)
    log = lambda v: math.nan if v is None else math.log1p(v)  # noqa: E731
    got = [*pairs[2][len(siblings) :].tolist(), *pairs[3][len(siblings) :].tolist()]
    assert got == pytest.approx([log(a) for a, _ in expected] + [log(b) for _, b in expected], nan_ok=True)
    # The paired estimates are the siblings' own head outputs.
    assert set(pairs[0][len(siblings) :].tolist()) <= set(last[:, 1].tolist())
    # The step order loss also reads each best sibling against the state it was tried from.
    best = [(s.expert_ttg, traj.expert_ttg[s.step]) for traj in trajectories for s in traj.siblings if s.kind == "best"]
    assert len(parents[0]) == len(best) >= 5
    assert parents[2].tolist() == pytest.approx([log(a) for a, _ in best], nan_ok=True)
    assert parents[3].tolist() == pytest.approx([log(b) for _, b in best], nan_ok=True)
    assert set(parents[0].tolist()) <= set(last[:, 1].tolist())
