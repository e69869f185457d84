"""Meter core: the strict answer parser, prompt rendering, the cache, load_meter and the HTTP backend."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ttg_envs.meters import (
    ANSWER_PREFIX,
    Estimate,
    PromptConfig,
    ScriptedMeter,
    format_answer,
    history_key,
    load_meter,
    meter_messages,
    parse_answer,
    render_history,
)

MALFORMED = [
    "",
    "   ",
    "null",
    "true",
    "420",
    "[]",
    "{}",
    '"{\\"can_complete\\": true, \\"remaining_tokens\\": 3}"',
    '{"can_complete": true}',
    '{"remaining_tokens": 10, "can_complete": true}',  # keys out of order: the prefix is fixed
    '{"can_complete": true, "remaining_tokens": null}',
    '{"can_complete": false, "remaining_tokens": 12}',
    '{"can_complete": false, "remaining_tokens": 0}',
    '{"can_complete": "true", "remaining_tokens": 12}',
    '{"can_complete": 1, "remaining_tokens": 12}',
    '{"can_complete": null, "remaining_tokens": null}',
    '{"can_complete": true, "remaining_tokens": "420"}',
    '{"can_complete": true, "remaining_tokens": 420.0}',
    '{"can_complete": true, "remaining_tokens": 4.2e2}',
    '{"can_complete": true, "remaining_tokens": -1}',
    '{"can_complete": true, "remaining_tokens": true}',
    '{"can_complete": true, "remaining_tokens": NaN}',
    '{"can_complete": true, "remaining_tokens": Infinity}',
    '{"can_complete": true, "remaining_tokens": 10000000000}',
    '{"can_complete": true, "remaining_tokens": [1]}',
    '{"can_complete": true, "remaining_tokens": 12, "why": "close"}',
    '{"can_complete": true, "remaining_tokens": 12, "remaining_tokens": 13}',
    '{"can_complete": true, "remaining_tokens": 12',
    '{"can_complete": true, "remaining_tokens": 12}}',
    '{"can_complete": true, "remaining_tokens": 12} extra',
    '{"can_complete": true, "remaining_tokens": 12}\n{"can_complete": true, "remaining_tokens": 12}',
    'Sure! {"can_complete": true, "remaining_tokens": 12}',
    '```json\n{"can_complete": true, "remaining_tokens": 12}\n```',
    '<think>hmm</think>{"can_complete": true, "remaining_tokens": 12}',
    "{'can_complete': True, 'remaining_tokens': 12}",
    '{"can_complete": True, "remaining_tokens": 12}',
    '{"can_complete":' + "[" * 5000 + "]" * 5000 + "}",  # deep nesting
    "\x00\xff\ud800",
]


@pytest.mark.parametrize("text", MALFORMED)
def test_malformed_answers_are_invalid(text):
    est = parse_answer(text)
    assert est.valid is False and est.can_complete is False and est.remaining_tokens is None
    assert est.raw == text


@pytest.mark.parametrize("value", [None, 12, 1.5, b'{"can_complete": false, "remaining_tokens": null}', ["x"], object()])
def test_non_text_answers_are_invalid(value):
    assert parse_answer(value).valid is False


@pytest.mark.parametrize(
    "text, expected",
    [
        ('{"can_complete": true, "remaining_tokens": 420}', (True, 420)),
        ('{"can_complete": true, "remaining_tokens": 0}', (True, 0)),
        ('  {"can_complete":true,"remaining_tokens":7}\n', (True, 7)),
        ('{"can_complete": false, "remaining_tokens": null}', (False, None)),
    ],
)
def test_well_formed_answers(text, expected):
    est = parse_answer(text)
    assert est.valid and (est.can_complete, est.remaining_tokens) == expected


@given(st.booleans(), st.integers(0, 10**9))
def test_format_parse_round_trip(can, remaining):
    text = format_answer(can, remaining if can else None)
    assert text.startswith(ANSWER_PREFIX)
    est = parse_answer(text)
    assert est.valid and est.can_complete == can and est.remaining_tokens == (remaining if can else None)


@settings(max_examples=300)
@given(st.text())
def test_parser_never_raises(text):
    est = parse_answer(text)
    assert isinstance(est, Estimate)
    assert est.valid == (est.raw.strip().startswith(ANSWER_PREFIX) and est.valid)


def test_format_answer_rejects_missing_count():
    with pytest.raises(ValueError):
        format_answer(True, None)


# ------------------------------------------------------------------------------ prompt rendering
def words(text: str) -> int:
    return len(text.split())


def transcript(turns: int) -> list[dict]:
    msgs = [{"role": "system", "content": "agent rules"}, {"role": "user", "content": "Your task is to: put a mug in fridge."}]
    for i in range(turns):
        msgs.append({"role": "assistant", "content": f"action number {i}"})
        msgs.append({"role": "user", "content": f"observation number {i}"})
    return msgs


def test_render_keeps_everything_within_budget():
    text = render_history(transcript(2), words, PromptConfig(max_tokens=1000))
    assert text.startswith("## Task\nYour task is to: put a mug in fridge.")
    assert "agent rules" not in text
    assert text.count("## Agent") == 2 and text.count("## Environment") == 2
    assert "omitted" not in text


def test_render_cuts_from_the_left_and_keeps_the_task():
    history = transcript(30)
    config = PromptConfig(max_tokens=60)
    text = render_history(history, words, config)
    assert words(text) <= config.max_tokens
    assert text.startswith("## Task\nYour task is to: put a mug in fridge.")
    assert "observation number 29" in text and "action number 29" in text
    assert "observation number 0\n" not in text
    assert "earlier messages omitted" in text
    kept = text.count("## Agent") + text.count("## Environment")
    assert f"[... {60 - kept} earlier messages omitted ...]" in text


def test_render_system_and_message_cap():
    history = transcript(1)
    history[3]["content"] = "word " * 100
    text = render_history(history, words, PromptConfig(include_system=True, max_message_tokens=10))
    assert "## System\nagent rules" in text
    env_block = text.split("## Environment\n")[1]
    assert words(env_block) <= 10 and env_block.endswith("[...]")


def test_render_cuts_a_huge_last_turn_from_its_start():
    history = transcript(1)
    history[3]["content"] = " ".join(f"w{i}" for i in range(500)) + " END"
    text = render_history(history, words, PromptConfig(max_tokens=50))
    assert words(text) <= 50 and text.rstrip().endswith("END") and "Your task is to" in text


def test_render_tool_calls_and_meter_messages():
    history = transcript(0) + [
        {"role": "assistant", "content": None, "tool_calls": [{"function": {"name": "ls", "arguments": "{}"}}]},
        {"role": "tool", "name": "ls", "content": "a.txt"},
    ]
    msgs = meter_messages(history, words)
    assert [m["role"] for m in msgs] == ["system", "user"]
    assert '"name": "ls"' in msgs[1]["content"] and "## Tool result (ls)\na.txt" in msgs[1]["content"]


# ------------------------------------------------------------------------------ cache and dedup
def test_cache_and_in_batch_dedup():
    meter = ScriptedMeter(lambda h: (True, 10 * len(h)), cache_size=100)
    a, b = transcript(1), transcript(2)
    out = meter.estimate([a, b, a, [dict(m) for m in a]])
    assert [e.remaining_tokens for e in out] == [40, 60, 40, 40]
    assert meter.calls == [2]
    meter.estimate([b, a])
    assert meter.calls == [2] and meter.hits == 2
    meter.estimate([transcript(3), a])
    assert meter.calls == [2, 1]
    meter.clear_cache()
    meter.estimate([a])
    assert meter.calls == [2, 1, 1]


def test_cache_disabled_still_dedups():
    meter = ScriptedMeter(lambda h: (False, None), cache_size=0)
    meter.estimate([transcript(1)] * 3)
    meter.estimate([transcript(1)])
    assert meter.calls == [1, 1]


def test_history_key():
    assert history_key(transcript(2)) == history_key(transcript(2))
    assert history_key(transcript(2)) != history_key(transcript(3))


def _whole_json(history) -> str:
    """A history as one JSON text, as its key was hashed before messages' hashes were remembered."""
    import json

    return json.dumps(list(history), sort_keys=True, ensure_ascii=False, default=str, separators=(",", ":"))


def test_history_key_follows_the_whole_history_and_is_never_stale():
    from collections import OrderedDict

    calls = [{"id": "c1", "function": {"name": "f", "arguments": '{"x": 1}'}}]
    history = transcript(2) + [
        {"role": "assistant", "content": None, "tool_calls": calls},
        {"role": "tool", "content": "ünïcode \u2603 \n", "tool_call_id": "c1", "n": 3, "f": 0.5, "ok": True},
        OrderedDict(role="user", content="an ordered dict"),
    ]
    branch = [dict(m) for m in history]  # a branch's copies hold the same strings
    assert history_key(branch) == history_key(history)
    assert history_key(history[:-1]) != history_key(history) != history_key(history[:1] + history[2:])
    # A changed message changes the key: in place (a new string), or in a nested list the memo must not trust.
    versions = [history_key(branch)]
    branch[2]["content"] = "action number 0 (edited)"
    versions.append(history_key(branch))
    calls[0]["function"]["name"] = "g"
    versions.append(history_key(branch))
    branch[2]["content"] = "action number 0"  # an equal string, another object: the first key again
    calls[0]["function"]["name"] = "f"
    versions.append(history_key(branch))
    assert versions[0] == versions[3] == history_key(history) and len(set(versions)) == 3
    texts = [_whole_json(h) for h in (history, branch, history[:-1], transcript(2), transcript(3))]
    keys = [history_key(h) for h in (history, branch, history[:-1], transcript(2), transcript(3))]
    assert all((a == b) == (x == y) for a, x in zip(texts, keys) for b, y in zip(texts, keys))


def _fresh_key(history) -> str:
    """A history's key with no digest remembered: every message's JSON hashed again."""
    import hashlib
    import json

    digests = (
        hashlib.blake2b(
            json.dumps(m, sort_keys=True, ensure_ascii=False, default=str, separators=(",", ":")).encode("utf-8"), digest_size=16
        ).digest()
        for m in history
    )
    return hashlib.blake2b(b"".join(digests), digest_size=16).hexdigest()


def test_a_tool_call_messages_remembered_digest_equals_a_fresh_one_and_follows_changes(monkeypatch):
    from ttg_envs.meters import base

    calls = [{"id": "c1", "type": "function", "function": {"name": "f", "arguments": '{"x": 1}'}}]
    history = transcript(1) + [
        {"role": "assistant", "content": "", "tool_calls": calls},
        {"role": "tool", "content": "ok", "tool_call_id": "c1"},
        {"role": "assistant", "content": [{"type": "text", "text": "parts"}], "n": [1, 1.0, True, None]},
    ]
    first = history_key(history)
    assert first == _fresh_key(history)
    # A branch's copies (new dicts, the same tool-call list) are remembered: no message is encoded again.
    encoded = []
    monkeypatch.setattr(base, "_ENCODE", lambda m: encoded.append(m) or base.json.JSONEncoder(**base._JSON).encode(m))
    branch = [dict(m) for m in history]
    assert history_key(branch) == first and encoded == []
    seen = {first}

    def changed() -> str:
        key = history_key(branch)
        assert key == _fresh_key(branch) and key not in seen
        seen.add(key)
        return key

    calls[0]["function"]["arguments"] = '{"x": 2}'  # in place, in the shared list
    changed()
    calls.append({"id": "c2", "type": "function", "function": {"name": "g", "arguments": "{}"}})
    changed()
    calls[1]["function"] = {"name": "g", "arguments": "{}", "extra": ""}
    changed()
    calls[1]["function"]["renamed"] = calls[1]["function"].pop("extra")  # same size, another key
    changed()
    calls[0], calls[1] = calls[1], calls[0]
    changed()
    branch[-1]["n"][1] = 1  # an equal number of another type: other JSON
    branch[-1]["n"][2] = 1
    changed()
    nested = branch[-1]["content"]
    nested.append(nested.pop()["text"])  # the same leaves, another structure
    changed()
    # Putting the values back gives the first key again.
    calls[:] = [{"id": "c1", "type": "function", "function": {"name": "f", "arguments": '{"x": 1}'}}]
    branch[-1]["content"], branch[-1]["n"] = [{"type": "text", "text": "parts"}], [1, 1.0, True, None]
    assert history_key(branch) == first == _fresh_key(branch)


def test_history_key_of_messages_it_cannot_remember():
    class Text:
        def __str__(self) -> str:
            return "text"

    history = [{"role": "user", "content": Text()}, {1: "int key", 2: "n"}, {"role": "user", "content": ("a", "tuple")}]
    assert history_key(history) == history_key(history) == _fresh_key(history)


def test_scripted_meter_parses_strings():
    meter = ScriptedMeter(lambda h: "not json")
    assert meter.estimate([transcript(0)])[0].valid is False


# ------------------------------------------------------------------------------ load_meter
def test_load_meter_specs(tmp_path):
    meter = ScriptedMeter(lambda h: (True, 1))
    assert load_meter(meter) is meter
    with pytest.raises(ValueError, match="openai:<base-url>#<model>"):
        load_meter("openai:http://localhost:1/v1")
    with pytest.raises(TypeError):
        load_meter(42)


# ------------------------------------------------------------------------------ HTTP backend
class _Handler(BaseHTTPRequestHandler):
    replies: list = []
    seen: list = []

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        type(self).seen.append(body)
        reply = type(self).replies[len(type(self).seen) - 1] if len(type(self).seen) <= len(type(self).replies) else "x"
        if isinstance(reply, int):
            self.send_response(reply)
            self.end_headers()
            return
        data = json.dumps({"choices": [{"message": {"role": "assistant", "content": reply}}]}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):
        pass


@pytest.fixture
def server():
    _Handler.replies, _Handler.seen = [], []
    srv = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    thread = threading.Thread(target=srv.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{srv.server_address[1]}/v1"
    srv.shutdown()
    srv.server_close()


def test_openai_meter(server):
    _Handler.replies = ['{"can_complete": true, "remaining_tokens": 33}', "I think it can."]
    meter = load_meter(f"openai:{server}#meter-model", concurrency=1, tokenizer=None)
    out = meter.estimate([transcript(1), transcript(2), transcript(1)])
    assert (out[0].valid, out[0].remaining_tokens) == (True, 33)
    assert out[1].valid is False and out[1].raw == "I think it can."
    assert out[2] == out[0] and len(_Handler.seen) == 2
    request = _Handler.seen[0]
    assert request["model"] == "meter-model" and request["temperature"] == 0
    assert request["messages"][0]["role"] == "system" and "## Task" in request["messages"][1]["content"]


def test_openai_meter_retries_then_raises(server):
    from ttg_envs.meters import MeterServerError

    _Handler.replies = [503, '{"can_complete": false, "remaining_tokens": null}']
    meter = load_meter(f"openai:{server}#m", retries=1)
    assert meter.estimate([transcript(0)])[0].valid
    _Handler.replies, _Handler.seen = [404], []
    with pytest.raises(MeterServerError, match="404"):
        meter.estimate([transcript(5)])
