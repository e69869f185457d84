"""Benchmark DeltaTTG credit assignment: batched torch form vs the per-trajectory NumPy loop.

A rollout batch of 512 trajectories (64 prompt groups of 8) x 50 steps x 200 trainable tokens
per step. Both forms produce the token-level advantages of every trajectory: the loop calls
``group_advantages`` per group and ``step_weights`` per trajectory, then repeats A_i w_t over
each step's tokens; the batched form is one ``batched_token_advantages`` call with
``token_step`` (output ``[B, L]``). The batched step-level output (``[B, T_max]``, what a
trainer with one row per step needs) is timed too. Prints tokens per second (best of
``--repeats``) and the ratios to the loop.

    python benchmarks/bench_credit.py [--device cpu|cuda] [--repeats 20]
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

import numpy as np
import torch

from ttg_envs.credit import batched_token_advantages, group_advantages, step_weights

BATCH, STEPS, TOKENS, GROUP = 512, 50, 200, 8
FAILURE_COST = 16384.0


def make_batch(seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    success = rng.random(BATCH) < 0.5
    can = rng.random((BATCH, STEPS)) < 0.9
    remaining = np.where(can, rng.integers(0, 8000, (BATCH, STEPS)).astype(float), np.nan)
    return dict(
        rewards=success.astype(float),
        group_ids=np.arange(BATCH) // GROUP,
        num_steps=np.full(BATCH, STEPS),
        can_complete=can,
        remaining=remaining,
        success=success,
        n_tokens=np.full((BATCH, STEPS), TOKENS),
    )


def per_trajectory(batch: dict[str, np.ndarray]) -> list[np.ndarray]:
    out = []
    for start in range(0, BATCH, GROUP):
        rows = range(start, start + GROUP)
        advantages = group_advantages(batch["rewards"][rows], batch["num_steps"][rows])
        for i, a in zip(rows, advantages, strict=False):
            w = step_weights(
                a,
                batch["can_complete"][i],
                batch["remaining"][i],
                bool(batch["success"][i]),
                batch["n_tokens"][i],
                FAILURE_COST,
            )
            out.append(np.repeat(a * w, batch["n_tokens"][i]))
    return out


def batched(batch: dict[str, torch.Tensor], token_step: torch.Tensor | None) -> torch.Tensor:
    out = batched_token_advantages(**batch, failure_cost=FAILURE_COST, token_step=token_step)
    if out.is_cuda:
        torch.cuda.synchronize()
    return out


def best_time(fn: Callable[[], object], repeats: int) -> float:
    fn()  # warm-up
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--repeats", type=int, default=20)
    args = parser.parse_args()

    batch = make_batch()
    tensors = {k: torch.as_tensor(v, device=args.device) for k, v in batch.items()}
    token_step = torch.arange(STEPS, device=args.device).repeat_interleave(TOKENS).expand(BATCH, -1)
    total = BATCH * STEPS * TOKENS

    reference = np.stack(per_trajectory(batch))
    result = batched(tensors, token_step).cpu().numpy()
    error = np.abs(result - reference).max()

    timings = {
        "per-trajectory numpy loop, token-level": best_time(lambda: per_trajectory(batch), args.repeats),
        "batched torch, token-level [B, L]": best_time(lambda: batched(tensors, token_step), args.repeats),
        "batched torch, step-level [B, T_max]": best_time(lambda: batched(tensors, None), args.repeats),
    }
    print(
        f"{BATCH} trajectories x {STEPS} steps x {TOKENS} tokens = {total:,} tokens "
        f"(torch {torch.__version__}, {args.device}, {torch.get_num_threads()} threads)"
    )
    loop_s = timings["per-trajectory numpy loop, token-level"]
    for name, seconds in timings.items():
        print(f"{name:40s} {seconds * 1e3:8.2f} ms {total / seconds:15,.0f} tokens/s {loop_s / seconds:6.1f}x the loop")
    print(f"max |batched - loop| = {error:.2e} (float32)")


if __name__ == "__main__":
    main()
