"""EnsembleMeter: the mean of its members' head outputs, saved and loaded as one meter, trained by ``--ensemble``."""

from __future__ import annotations

import json
import math

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from ttg_envs.meters import EncoderMeter, load_meter
from ttg_envs.meters.encoder import EncoderConfig, build_model, history_segments
from ttg_envs.meters.ensemble import EnsembleMeter
from ttg_envs.training.tiny_models import tiny_encoder, train_wordpiece_tokenizer
from ttg_envs.wrappers.progress_meter import estimate_idle

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def episode(turns: int, seed: int = 0) -> list[dict]:
    msgs = [{"role": "system", "content": "rules"}, {"role": "user", "content": f"Your task is to: put a mug in fridge {seed}."}]
    for i in range(turns):
        msgs += [
            {"role": "assistant", "content": f"<action>go to cabinet {i + seed}</action>"},
            {"role": "user", "content": f"You arrive at cabinet {i}. The cabinet {i} is closed."},
        ]
    return msgs


HISTORIES = [episode(t, s) for t in range(4) for s in range(2)]


def member(seed: int, turn_limit: int | None = None) -> EncoderMeter:
    tokenizer = train_wordpiece_tokenizer([s for h in HISTORIES for s in history_segments(h)], vocab_size=200)
    config = EncoderConfig(max_segment_tokens=16, max_task_tokens=8, hidden=16, turn_limit=turn_limit)
    torch.manual_seed(seed)
    backbone = tiny_encoder(tokenizer, hidden=32, layers=1, heads=2, max_tokens=27, seed=seed)
    model = build_model(backbone, config.hidden, budget_aware=turn_limit is not None)
    with torch.no_grad():  # an untrained head predicts nearly the same everywhere: spread its outputs
        for p in model.parameters():
            p.add_(torch.randn_like(p) * 0.5)
    return EncoderMeter(model, tokenizer, config)


def outputs(meter: EncoderMeter, histories, idle=None) -> list[tuple[float, float]]:
    """The member's head outputs (completion logit, log1p remaining) at each history's last segment."""
    lists = [meter.segments(h) for h in histories]
    steps = [len(s) - 1 + (idle[i] if idle else 0) for i, s in enumerate(lists)]
    out, lengths = meter.predict([meter.window(s) for s in lists], steps)
    return [tuple(float(v) for v in out[b, n - 1]) for b, n in enumerate(lengths.tolist())]


def test_the_estimate_is_made_from_the_members_mean_outputs():
    a, b, c = member(0), member(1), member(2)
    ensemble = EnsembleMeter([a, b, c])
    got = ensemble.estimate(HISTORIES)
    per_member = [outputs(m, HISTORIES) for m in (a, b, c)]
    for i, est in enumerate(got):
        logit = sum(m[i][0] for m in per_member) / 3
        log_remaining = sum(m[i][1] for m in per_member) / 3
        assert est.completion_logit == pytest.approx(logit, abs=1e-5)
        assert est.can_complete == (logit > 0)
        if est.can_complete:
            assert est.remaining_tokens == max(0, round(math.expm1(max(log_remaining, 0.0))))
    # not the first member's verdicts (the test would not tell a mean from a pick otherwise)
    assert [e.completion_logit for e in got] != pytest.approx([e.completion_logit for e in a.estimate(HISTORIES)], abs=1e-3)


def test_an_ensemble_of_one_meter_twice_is_that_meter():
    a = member(3)
    ensemble = EnsembleMeter([a, a])
    for mine, its in zip(ensemble.estimate(HISTORIES), a.estimate(HISTORIES)):
        assert mine.can_complete == its.can_complete and mine.remaining_tokens == its.remaining_tokens
        assert mine.completion_logit == pytest.approx(its.completion_logit, abs=1e-6)


def test_save_and_load_as_one_meter(tmp_path):
    ensemble = EnsembleMeter([member(0), member(1)])
    ensemble.save_pretrained(tmp_path / "ens", extra={"note": "kept"})
    saved = json.loads((tmp_path / "ens" / "meter.json").read_text())
    assert saved["kind"] == "ensemble" and saved["members"] == ["member-0", "member-1"] and saved["note"] == "kept"
    for spec in (str(tmp_path / "ens"), f"encoder:{tmp_path / 'ens'}"):
        loaded = load_meter(spec)
        assert isinstance(loaded, EnsembleMeter) and len(loaded.members) == 2
        assert [e.completion_logit for e in loaded.estimate(HISTORIES)] == pytest.approx(
            [e.completion_logit for e in ensemble.estimate(HISTORIES)], abs=1e-5
        )
    with pytest.raises(ValueError, match="not an ensemble"):
        EnsembleMeter.from_pretrained(tmp_path / "ens" / "member-0")


def test_budget_aware_members_share_the_turn_limit_and_carry_at_fewer_turns():
    a, b = member(0, turn_limit=10), member(1, turn_limit=10)
    ensemble = EnsembleMeter([a, b])
    assert ensemble.budget_aware and ensemble.turn_limit == 10
    before = ensemble.estimate(HISTORIES[:3])
    ensemble.turn_limit = 6
    assert a.turn_limit == b.turn_limit == 6
    after = ensemble.estimate(HISTORIES[:3])  # the cache was dropped: other turns left, other outputs
    assert [e.completion_logit for e in after] != pytest.approx([e.completion_logit for e in before], abs=1e-4)
    same = ensemble.estimate_at_turns(HISTORIES[:3], [0, 0, 0])
    assert [e.completion_logit for e in same] == pytest.approx([e.completion_logit for e in after], abs=1e-6)
    idle = [2, 0, 3]
    carried = estimate_idle(ensemble, HISTORIES[:3], idle)
    mean = [(x[0] + y[0]) / 2 for x, y in zip(outputs(a, HISTORIES[:3], idle), outputs(b, HISTORIES[:3], idle))]
    assert [e.completion_logit for e in carried] == pytest.approx(mean, abs=1e-5)


def test_members_must_agree_and_be_two_or_more():
    with pytest.raises(ValueError, match="at least two"):
        EnsembleMeter([member(0)])
    with pytest.raises(ValueError, match="turns left"):
        EnsembleMeter([member(0), member(1, turn_limit=10)])


def test_train_meter_ensemble_member_zero_is_the_single_meter(tiny_game, tmp_path):
    """``--ensemble 2``: member 0 is the meter one run with the same seed trains; member 1 differs."""
    from ttg_envs.cli import main

    env = ["--env-kwargs", json.dumps({"game_files": str(tiny_game)}), "--workers", "1", "--limit", "1"]
    common = ["--policies", "expert", "noisy_expert:0.5", "--epochs", "1", "--hidden", "16", "--val-fraction", "0"]
    assert main(["train-meter", *env, *common, "--out", str(tmp_path / "one")]) == 0
    files = sorted(str(p) for p in (tmp_path / "one" / "trajectories").glob("*.jsonl"))
    assert main(["train-meter", *env, *common, "--trajectories", *files, "--ensemble", "2", "--out", str(tmp_path / "two")]) == 0
    single = load_meter(str(tmp_path / "one" / "meter"))
    ensemble = load_meter(str(tmp_path / "two" / "meter"))
    assert isinstance(ensemble, EnsembleMeter)
    histories = [t["messages"] for t in map(json.loads, open(files[0]))][:1]
    prefixes = [histories[0][: 2 + 2 * k] for k in range(3)]
    first, second = ensemble.members
    assert [e.completion_logit for e in first.estimate(prefixes)] == pytest.approx(
        [e.completion_logit for e in single.estimate(prefixes)], abs=1e-6
    )
    assert [e.completion_logit for e in second.estimate(prefixes)] != pytest.approx(
        [e.completion_logit for e in single.estimate(prefixes)], abs=1e-4
    )
    report = json.loads((tmp_path / "two" / "train_report.json").read_text())
    assert len(report["train"]["members"]) == 2
