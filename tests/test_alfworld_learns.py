"""The real trainer raises success on a small fixed pool of ALFWorld tasks: a CI learning check.

**Not a held-out claim.** The policy is trained and evaluated on the same few train-split tasks; the
test catches a broken rollout, advantage or update path at CI cost (with grpo: the meter path is
not exercised, delta_ttg did not rise in the settings tried below); it does not say that training
generalises (benchmarks/train_compare.py measures held-out success).

Everything is the real path: the committed tiny start (``benchmarks/results/train_compare/start``,
a 158k-parameter Qwen3 SFT'd on a noisy expert), the real ALFWorld engine, :class:`AdmissibleGenerator`
rollouts through the paper's E.5 window, the trainer's advantages and clipped loss. Success on the
pool is that of the sampled policy (temperature 1), ``EVAL_SAMPLES`` episodes per task, with one
fixed sampling seed (``EVAL_SEED``).

Noise and margin (``python tests/test_alfworld_learns.py noise 10``): the start's pool success under
10 sampling seeds is 0.342 +- 0.062 (sample std; range 0.219-0.406), so ``MARGIN`` = 3 std = 0.187
and the test needs 0.529 after training; none of the start's 10 evaluations reaches it.

Settings (``python tests/test_alfworld_learns.py train 0,1,2,3,4``; pool
success after 20 steps, same evaluation seed): seeds 0-4 reach 0.719, 0.547, 0.594, 0.703, 0.625 (all 5 pass; mean 0.638, std 0.073; the closest, seed 1, by 0.018). Tried on seed 0 and dropped: grpo at lr
2e-3 peaked at 0.75 training success by step 14, then fell (pool 0.500 after 20 steps); delta_ttg
(the shipped meter) at lr 1e-3 ended at 0.266 and at lr 5e-4 was near 0.44 training success when stopped at step 13;
delta_ttg at lr 1e-3 with the meter trained on the start's own episodes
(``meter_spec=benchmarks/results/train_compare/start_meter``, see ``benchmarks/diagnose_credit.py``) reached
0.594 (seed 0, the only one run; two of the pool's tasks, 12 and 34, are among that meter's training tasks).
The test runs seed 0: about 110 CPU-seconds on one thread (98 of them training).
"""

from __future__ import annotations

from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

import ttg_envs  # noqa: F401
from ttg_envs.agents.window import PAPER_E5
from ttg_envs.training.actor.admissible import AdmissibleGenerator
from ttg_envs.training.actor.rollout import run_episodes
from ttg_envs.training.actor.trainer import TrainConfig, Trainer

START = Path(__file__).resolve().parents[1] / "benchmarks" / "results" / "train_compare" / "start"
ENV_ID = "ttg/ALFWorld-v0"
ENV_KWARGS = {"split": "train", "action_format": "lenient", "task_types": ["pick_and_place_simple"]}
#: Train-split tasks on which the start sometimes succeeds (sampled success 0.25-0.63 in a 40-task scan).
POOL = (12, 21, 25, 34)
MAX_TURNS = 15
EVAL_SAMPLES = 16
#: The sampling seed of the test's evaluation (the first of the start's 10 noise seeds).
EVAL_SEED = 12345
STEPS = 20
LR = 1e-3
GROUP_SIZE = 4
ESTIMATOR = "grpo"
#: The start's pool success under 10 sampling seeds (EVAL_SEED, 1-9): mean, sample std (range 0.219-0.406).
START_NOISE = (0.342, 0.0623)
#: Required rise of pool success above the start's mean: 3 standard deviations of its own evaluation spread.
MARGIN = 3 * START_NOISE[1]


def load_start():
    """The committed tiny start: policy and tokenizer."""
    from transformers import AutoModelForCausalLM, PreTrainedTokenizerFast

    return AutoModelForCausalLM.from_pretrained(START), PreTrainedTokenizerFast.from_pretrained(START)


def make_envs(n: int) -> list:
    return [gym.make(ENV_ID, max_steps=MAX_TURNS, **ENV_KWARGS) for _ in range(n)]


def pool_success(model, tokenizer, seed: int = EVAL_SEED, envs=None) -> float:
    """Success of the sampled policy on ``POOL``, ``EVAL_SAMPLES`` episodes per task, torch seeded with ``seed``."""
    specs = [(g, task, 1000 + task + 10**5 * j) for g, task in enumerate(POOL) for j in range(EVAL_SAMPLES)]
    envs = envs or make_envs(len(specs))
    state = torch.get_rng_state()
    torch.manual_seed(seed)
    try:
        episodes = run_episodes(envs, AdmissibleGenerator(model, tokenizer), tokenizer, specs, 16, 1.0, 1.0, PAPER_E5)
    finally:
        torch.set_rng_state(state)
    return float(np.mean([e.success for e in episodes]))


def train_on_pool(
    out_dir,
    seed: int,
    steps: int = STEPS,
    lr: float = LR,
    estimator: str = ESTIMATOR,
    group_size: int = GROUP_SIZE,
    meter_spec: str = ENV_ID,
):
    """Train the start on ``POOL`` for ``steps`` steps; returns the trained model, tokenizer and per-step metrics.

    ``meter_spec``: the ``load_meter`` spec delta_ttg reads (default: the shipped ALFWorld meter)."""
    model, tokenizer = load_start()
    meter = None
    if estimator == "delta_ttg":
        from ttg_envs.meters import load_meter

        meter = load_meter(meter_spec)
    config = TrainConfig(
        env_id=ENV_ID,
        env_kwargs=ENV_KWARGS,
        estimator=estimator,
        steps=steps,
        tasks_per_step=len(POOL),
        group_size=group_size,
        max_turns=MAX_TURNS,
        max_tokens_per_turn=16,
        lr=lr,
        kl_coef=0.0,
        entropy_coef=0.0,
        mini_batch_rows=256,
        micro_batch_rows=16,
        task_indices=POOL,
        window_turns=PAPER_E5.turns,
        max_prompt_tokens=PAPER_E5.max_prompt_tokens,
        seed=seed,
        save_every=0,
        out_dir=str(out_dir),
    )
    trainer = Trainer(config, model, tokenizer, meter=meter, generator=AdmissibleGenerator(model, tokenizer))
    metrics = trainer.train(progress=False)
    return model, tokenizer, metrics


@pytest.mark.slow
def test_training_raises_success_on_a_fixed_alfworld_pool(tmp_path, one_torch_thread):
    model, tokenizer, _ = train_on_pool(tmp_path, seed=0)
    after = pool_success(model, tokenizer)
    assert after >= START_NOISE[0] + MARGIN, (after, START_NOISE, MARGIN)


if __name__ == "__main__":  # the measurements MARGIN and the settings were chosen from
    import sys
    import tempfile
    import time

    torch.set_num_threads(1)
    what = sys.argv[1]
    if what == "noise":
        model, tokenizer = load_start()
        envs = make_envs(len(POOL) * EVAL_SAMPLES)
        seeds = [EVAL_SEED, *range(1, int(sys.argv[2]))]
        values = []
        for s in seeds:
            values.append(pool_success(model, tokenizer, s, envs))
            print(f"start, sampling seed {s}: pool success {values[-1]:.3f}", flush=True)
        print(f"start: mean {np.mean(values):.4f}, std {np.std(values, ddof=1):.4f}, range {min(values):.3f}-{max(values):.3f}")
    else:
        seeds = [int(s) for s in sys.argv[2].split(",")]
        kw = dict(a.split("=") for a in sys.argv[3:])
        kw = {k: (v if k in ("estimator", "meter_spec") else float(v) if k == "lr" else int(v)) for k, v in kw.items()}
        for s in seeds:
            cpu, wall = time.process_time(), time.perf_counter()
            with tempfile.TemporaryDirectory() as tmp:
                model, tokenizer, metrics = train_on_pool(Path(tmp), s, **kw)
            train_cpu = time.process_time() - cpu
            after = pool_success(model, tokenizer)
            print(
                f"{kw} seed {s}: pool success after {after:.3f}; train success {[round(m['success_rate'], 2) for m in metrics]}; "
                f"cpu {train_cpu:.0f}s train, {time.process_time() - cpu:.0f}s total, wall {time.perf_counter() - wall:.0f}s",
                flush=True,
            )
