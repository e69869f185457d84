"""Gold siblings for the tool envs' meters: departures from gold's move tried in real branches, with
the targets the gold walk gives, and the pair rows the meter trains on (tau2's opening included)."""

from __future__ import annotations

import math

import pytest

pytest.importorskip("tau2")
pytest.importorskip("bfcl_eval")

from sibling_rows import sibling_rows  # noqa: E402

from ttg_envs.training.meter.datasets import load_trajectories  # noqa: E402
from ttg_envs.training.meter.evaluation import _move, label_gold_path  # noqa: E402
from ttg_envs.training.meter.siblings import add_gold_siblings  # noqa: E402
from ttg_envs.wrappers.gold_path import gold_actions, gold_to_go, replay_wins  # noqa: E402

TAU2 = "ttg/Tau2-v0"
TAU2_KWARGS = {"user": "gold"}


@pytest.fixture(scope="module")
def tau2_recorded(tmp_path_factory):
    """gold and gold_drop_last on two retail train tasks, labelled with gold-path targets."""
    from ttg_envs.training.meter.record import collect_trajectories

    out = tmp_path_factory.mktemp("gold-siblings")
    paths = collect_trajectories(TAU2, TAU2_KWARGS, "train", ["gold", "gold_drop_last", "perturbed:0.5"], out, tasks=[0, 1], workers=1)
    return paths


def _labelled(paths):
    trajectories = load_trajectories(paths)
    label_gold_path(trajectories, TAU2, TAU2_KWARGS, progress=False, targets=True)
    return trajectories


def test_gold_siblings_are_real_branches_with_the_gold_walks_targets(tau2_recorded):
    import gymnasium as gym

    import ttg_envs  # noqa: F401

    trajectories = _labelled(tau2_recorded)
    made = add_gold_siblings(trajectories, TAU2, env_kwargs=TAU2_KWARGS, per_state=2, progress=False)
    assert made == sum(len(t.siblings) for t in trajectories) > 0
    env = gym.make(TAU2, split="train", **TAU2_KWARGS)
    checked = {"best": 0, "departure": 0, "closed early": 0}
    try:
        for traj in trajectories:
            gold = gold_actions(env, traj.task["id"], TAU2)
            to_go = gold_to_go(gold)
            for sibling in traj.siblings:
                t, k = sibling.step, traj.gold_positions[sibling.step]
                assert k is not None and k < len(gold)
                assert sibling.messages[: traj.actions[t]] == traj.prefix(t)
                made_move = _move(sibling.messages[traj.actions[t]])
                assert made_move != _move(traj.messages[traj.actions[t]])  # never the step taken
                assert (made_move == _move(gold[k])) == (sibling.kind == "best")
                # The target, worked out again from a fresh env that replays the trajectory and the sibling.
                from ttg_envs.tools import action_text

                base = env.unwrapped
                base.reset(seed=0, options={"task_id": traj.task["id"]})
                for i in traj.actions[:t]:
                    base.step(action_text(traj.messages[i]))
                base.step(action_text(sibling.messages[traj.actions[t]]))
                assert base.messages == sibling.messages
                if base.done:
                    expected = 0 if base.success else None
                else:
                    expected = to_go[k + 1] if replay_wins(base, gold[k + 1 :]) else to_go[k] if replay_wins(base, gold[k:]) else None
                assert sibling.expert_ttg == expected
                checked[sibling.kind] += 1
                if sibling.kind == "departure" and made_move == _move(gold[-1]) and k < len(gold) - 1:
                    # gold's closing message before its last call: the conversation ends and is lost
                    assert sibling.expert_ttg is None
                    checked["closed early"] += 1
    finally:
        env.close()
    assert checked["best"] >= 1 and checked["departure"] >= 10 and checked["closed early"] >= 1


def test_gold_siblings_are_deterministic_and_skip_ahead_first(tau2_recorded):
    import gymnasium as gym

    import ttg_envs  # noqa: F401

    first, second = _labelled(tau2_recorded), _labelled(tau2_recorded)
    add_gold_siblings(first, TAU2, env_kwargs=TAU2_KWARGS, per_state=1, seed=3, progress=False)
    add_gold_siblings(second, TAU2, env_kwargs=TAU2_KWARGS, per_state=1, seed=3, progress=False)
    assert [t.siblings for t in first] == [t.siblings for t in second]
    env = gym.make(TAU2, split="train", **TAU2_KWARGS)
    try:
        for traj in first:
            gold = gold_actions(env, traj.task["id"], TAU2)
            departures = [s for s in traj.siblings if s.kind == "departure"]
            assert len({s.step for s in departures}) == len(departures)  # one per state
            on_path = [t for t in range(traj.num_steps) if traj.gold_positions[t] is not None]
            assert {s.step for s in departures} <= set(on_path) and len(departures) >= len(on_path) - 1
            for s in departures:  # the one departure of a state skips ahead: gold's next move, else its last
                k, made = traj.gold_positions[s.step], _move(s.messages[traj.actions[s.step]])
                ahead = [_move(gold[j]) for j in (k + 1, len(gold) - 1) if k < j < len(gold)]
                skipping = [m for m in ahead if m not in (_move(traj.messages[traj.actions[s.step]]), _move(gold[k]))]
                assert made == skipping[0] if skipping else made not in ahead
    finally:
        env.close()


def test_gold_siblings_need_the_gold_paths_positions(tau2_recorded):
    trajectories = load_trajectories(tau2_recorded)
    with pytest.raises(ValueError, match="label_gold_path"):
        add_gold_siblings(trajectories, TAU2, env_kwargs=TAU2_KWARGS, progress=False)


def test_a_sibling_after_tau2s_opening_reads_the_state_it_left_from(tau2_recorded, one_torch_thread):
    """tau2's transcript opens with the agent's greeting, a segment before h_0: the pair rows must
    extend the GRU state of h_t (not of the segment before it), so a sibling's training output equals
    what the meter says when it reads the sibling's whole history; each departure is paired with its
    state's best sibling, with both targets."""
    torch = pytest.importorskip("torch")
    from ttg_envs.meters.encoder import EncoderConfig, EncoderMeter, build_model, history_segments
    from ttg_envs.training.tiny_models import tiny_encoder, train_wordpiece_tokenizer

    trajectories = _labelled(tau2_recorded)
    add_gold_siblings(trajectories, TAU2, env_kwargs=TAU2_KWARGS, per_state=2, progress=False)
    histories = [t.messages for t in trajectories] + [s.messages for t in trajectories for s in t.siblings]
    tokenizer = train_wordpiece_tokenizer([s for h in histories for s in history_segments(h)])
    meter = EncoderMeter(build_model(tiny_encoder(tokenizer, hidden=16, max_tokens=160), 16), tokenizer, EncoderConfig(hidden=16))
    meter.model.eval()
    assert all(len(meter.segments(t.messages)) == t.num_steps + 2 for t in trajectories)  # the greeting opens each
    last, y, pairs, _ = sibling_rows(meter, trajectories)
    siblings = [s for traj in trajectories for s in traj.siblings]
    with torch.no_grad():
        whole, _ = meter.predict([meter.segments(s.messages) for s in siblings])
    lengths = [len(meter.segments(s.messages)) for s in siblings]
    read = torch.stack([whole[i, n - 1, 1] for i, n in enumerate(lengths)])
    assert torch.allclose(last[:, 1], read, atol=1e-5)
    log = lambda v: math.nan if v is None else math.log1p(v)  # noqa: E731
    assert y == pytest.approx([log(s.expert_ttg) for s in siblings], nan_ok=True)
    expected = []
    for traj in trajectories:
        bests = {s.step: s for s in traj.siblings if s.kind == "best"}
        expected += [(s.expert_ttg, bests[s.step].expert_ttg) for s in traj.siblings if s.kind == "departure" and s.step in bests]
    assert expected and len(pairs[0]) == len(siblings) + len(expected)
    got = [*pairs[2][len(siblings) :].tolist(), *pairs[3][len(siblings) :].tolist()]
    assert got == pytest.approx([log(a) for a, _ in expected] + [log(b) for _, b in expected], nan_ok=True)


def test_bfcl_single_and_multi_turn_siblings(tmp_path):
    """BFCL: a single-turn entry's departures end the episode (the checker's verdict: failure); a
    multi-turn state's skipped move is the text that ends the turn before its calls, which loses."""
    from ttg_envs.training.meter.record import collect_trajectories

    # parallel_multiple_125 (one response of several calls) and multi_turn_base_0
    paths = collect_trajectories("ttg/BFCL-v0", {}, "all", ["gold"], tmp_path, tasks=[3000, 3625], workers=1)
    trajectories = load_trajectories(paths)
    label_gold_path(trajectories, "ttg/BFCL-v0", progress=False, targets=True)
    add_gold_siblings(trajectories, "ttg/BFCL-v0", per_state=3, progress=False)
    kinds = {t.task["id"]: [(s.step, s.kind, s.expert_ttg) for s in t.siblings] for t in trajectories}
    assert all(s.kind == "departure" for t in trajectories for s in t.siblings)  # gold took gold's moves
    single = [t for t in trajectories if t.num_steps == 1]
    multi = [t for t in trajectories if t.num_steps > 1]
    assert single and multi, kinds
    assert all(s.expert_ttg is None for t in single for s in t.siblings) and all(t.siblings for t in single)
    ended = [s for t in multi for s in t.siblings if "<tool_call>" not in str(s.messages[t.actions[s.step]].get("content"))]
    assert ended and all(s.expert_ttg is None for s in ended)
