"""One ALFWorld trainer step of the tiny policy, today's code against a baseline commit's, interleaved.

    PYTHONPATH=. python benchmarks/bench_trainer.py                      # paper size: 16 tasks x 8 rollouts
    PYTHONPATH=. python benchmarks/bench_trainer.py --tasks 2 --repeats 2  # same shape, 16 episodes
    PYTHONPATH=. python benchmarks/bench_trainer.py --variants old:2 new:1 old:1  # (the default)

The step is the one ``benchmarks/train_compare.py`` trains with, at the paper's size: the committed
start (``benchmarks/results/train_compare/start``), :class:`AdmissibleGenerator` rollouts on the
train split's odd pick-and-place tasks, ``--tasks`` x ``--group`` episodes of at most ``--turns``
turns through the paper's E.5 window (last 2 turns, 2048 prompt tokens), delta_ttg credit from the
shipped ALFWorld meter, table 4's KL (0.01) and entropy (0.001) terms, one PPO epoch.

Each measurement runs in its own process: ``new`` imports this checkout's ``ttg_envs``, ``old`` the
``--baseline`` commit's, unpacked with ``git archive`` (so the old path is main's code as it was,
not a flag in today's). ``--variants`` names the measurements, each ``code:threads`` (torch CPU
threads of that process): the first is the baseline every ratio divides, by default the old code on
2 threads (how ``train_compare.py`` ran it), then the new code on 1 thread (its new default) and
the old code on 1 thread (what the code alone changed). They alternate (each repeat runs every
variant in turn) so that load on the machine hits all alike. Before the timed step every env is
reset once on a task outside the pool, so the engine's one-time imports are not charged to a step. Every process times the same functions (both versions have them): env steps
(``TokenCounter.step``, the engine), prompt building and tokenization (``chat_prompt_ids``),
generation, meter calls, the reference pass, the recomputed rollout-policy pass (old code only;
the new code keeps the sampler's log-probs), the policy's forward and backward passes and the
optimizer; wall and process CPU seconds of each. CPU seconds are printed because on a shared
machine they move less with load than wall seconds do.

The arithmetic floor is the FLOPs that step's work needs, one forward pass over every turn's prompt
to sample (plus the decoding steps), a reference forward and the policy's forward and backward
(3 forward passes) over every trained row, divided by this machine's float32 matmul throughput
on ``--threads`` threads, measured in the same run (a 1024 x 1024 x 1024 matmul).

``--check-loss ROWS`` also feeds ROWS rows of the first new step's batch, its advantages and its
episodes to the old code and prints the differences of the advantages and of the update's loss terms.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import pickle
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
START = ROOT / "benchmarks" / "results" / "train_compare" / "start"
ENV_ID = "ttg/ALFWorld-v0"
ENV_KWARGS = {"split": "train", "action_format": "lenient", "task_types": ["pick_and_place_simple"]}
BUCKETS = ("env", "prompt", "generate", "meter", "reference", "old_policy", "policy_forward", "policy_backward", "optimizer", "other")


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--tasks", type=int, default=16, help="tasks per step (table 4: 16)")
    p.add_argument("--group", type=int, default=8, help="rollouts per task, G (table 4: 8)")
    p.add_argument("--turns", type=int, default=30)
    p.add_argument("--repeats", type=int, default=1, help="old/new pairs")
    p.add_argument("--baseline", default="deb1417", help="git revision of the old code (default: main before this change)")
    p.add_argument("--variants", nargs="+", default=["old:2", "new:1", "old:1"], help="measurements, each code:threads, run in this order")
    p.add_argument("--base", default=None, help="the variant every ratio divides (default: the first)")
    p.add_argument("--threads", type=int, default=2, help="torch threads of a worker (the driver sets it per variant)")
    p.add_argument(
        "--check-loss", type=int, default=0, metavar="ROWS", help="compare the update's loss terms on ROWS rows of a fixed batch"
    )
    p.add_argument("--out", default=None, help="write the results as JSON here")
    p.add_argument("--worker", choices=("old", "new"), help=argparse.SUPPRESS)
    p.add_argument("--worker-out", help=argparse.SUPPRESS)
    p.add_argument("--batch", help=argparse.SUPPRESS)
    return p.parse_args(argv)


# ---------------------------------------------------------------------------------------- worker
def _config(args):
    from ttg_envs.training.actor.trainer import TrainConfig

    pool = tuple(range(1, 100, 2))
    return TrainConfig(
        env_id=ENV_ID,
        env_kwargs=ENV_KWARGS,
        estimator="delta_ttg",
        steps=1,
        tasks_per_step=args.tasks,
        group_size=args.group,
        max_turns=args.turns,
        max_tokens_per_turn=16,
        lr=3e-4,
        kl_coef=0.01,
        entropy_coef=0.001,
        mini_batch_rows=256,
        micro_batch_rows=16,
        task_indices=pool,
        window_turns=2,
        max_prompt_tokens=2048,
        seed=0,
        save_every=0,
        out_dir=tempfile.mkdtemp(prefix="bench_trainer_"),
    )


class Timers:
    """Wall and CPU seconds per bucket; nested timed calls are charged to the innermost bucket only."""

    def __init__(self):
        self.wall: dict[str, float] = defaultdict(float)
        self.cpu: dict[str, float] = defaultdict(float)
        self._stack: list[list[float]] = []

    def wrap(self, bucket: str, fn, when=None):
        @functools.wraps(fn)
        def timed(*a, **k):
            if when is not None and not when(*a, **k):
                return fn(*a, **k)
            self._stack.append([0.0, 0.0])
            w, c = time.perf_counter(), time.process_time()
            try:
                return fn(*a, **k)
            finally:
                dw, dc = time.perf_counter() - w, time.process_time() - c
                inner_w, inner_c = self._stack.pop()
                self.wall[bucket] += dw - inner_w
                self.cpu[bucket] += dc - inner_c
                if self._stack:
                    self._stack[-1][0] += dw
                    self._stack[-1][1] += dc

        return timed


def _instrument(trainer, timers: Timers) -> None:
    import torch

    from ttg_envs.training.actor import rollout
    from ttg_envs.wrappers.token_counter import TokenCounter

    TokenCounter.step = timers.wrap("env", TokenCounter.step)
    rollout.chat_prompt_ids = timers.wrap("prompt", rollout.chat_prompt_ids)
    gen = trainer.generator
    for name in ("generate", "generate_with_logprobs"):
        if hasattr(gen, name):
            setattr(gen, name, timers.wrap("generate", getattr(gen, name)))
    meter = trainer.meter
    meter.estimate = timers.wrap("meter", meter.estimate)
    cls = type(trainer)
    ref = trainer.ref_model
    original = cls.row_logprobs
    cls.row_logprobs = lambda self, rows, model: timers.wrap("reference" if model is ref else "old_policy", original)(self, rows, model)
    cls._forward = timers.wrap("policy_forward", cls._forward, when=lambda *a, **k: torch.is_grad_enabled())
    torch.Tensor.backward = timers.wrap("policy_backward", torch.Tensor.backward)
    trainer.optimizer.step = timers.wrap("optimizer", trainer.optimizer.step)


def _episode_dicts(episodes) -> list[dict[str, Any]]:
    keys = ("group", "task_index", "prompts", "actions", "infos", "reward", "success")
    return [{k: getattr(e, k) for k in keys} for e in episodes]


def worker(args) -> dict[str, Any]:
    """One timed trainer step (or, with ``--batch``, the old code's advantages and loss on a fixed batch)."""
    import torch
    from transformers import AutoModelForCausalLM, PreTrainedTokenizerFast

    import ttg_envs
    from ttg_envs.meters import load_meter
    from ttg_envs.training.actor.admissible import AdmissibleGenerator
    from ttg_envs.training.actor.trainer import Trainer

    torch.set_num_threads(args.threads)
    model = AutoModelForCausalLM.from_pretrained(START)
    tokenizer = PreTrainedTokenizerFast.from_pretrained(START)
    trainer = Trainer(_config(args), model, tokenizer, meter=load_meter(ENV_ID), generator=AdmissibleGenerator(model, tokenizer))
    if args.batch:
        return fixed_batch(trainer, args.batch)
    for env in trainer._env_pool(args.tasks * args.group):  # building envs and the engine's imports are not part of a step
        env.reset(seed=0, options={"task_index": 0})  # task 0 is outside the pool (odd indices)
    timers = Timers()
    _instrument(trainer, timers)
    captured: dict[str, Any] = {}
    update = trainer.update

    def capture(rows, rng=None):
        captured["rows"] = [(r.prompt, r.action, r.advantage, getattr(r, "old_logprobs", None)) for r in rows]
        return update(rows, rng)

    trainer.update = capture
    rollout = trainer.rollout

    def capture_rollout(rng):
        episodes = rollout(rng)
        captured["episodes"] = _episode_dicts(episodes)
        return episodes

    trainer.rollout = capture_rollout
    wall, cpu = time.perf_counter(), time.process_time()
    metrics = trainer.step()
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    rows = captured["rows"]
    timers.wall["other"] = wall - sum(timers.wall.values())
    timers.cpu["other"] = cpu - sum(timers.cpu.values())
    out = {
        "code": ttg_envs.__file__,
        "wall_s": wall,
        "cpu_s": cpu,
        "split_wall": dict(timers.wall),
        "split_cpu": dict(timers.cpu),
        "episodes": len(captured["episodes"]),
        "rows": len(rows),
        "prompt_tokens": [len(r[0]) for r in rows],
        "action_tokens": [len(r[1]) for r in rows],
        "loss": metrics["loss"],
        "success_rate": metrics["success_rate"],
        "old_logprobs_recomputed": metrics.get("old_logprobs_recomputed", 1.0),
    }
    if args.check_loss and args.worker == "new":
        batch = Path(args.worker_out).with_suffix(".batch.pkl")
        batch.write_bytes(pickle.dumps({"rows": rows[: args.check_loss], "episodes": captured["episodes"], "config": _config(args)}))
        out["batch"] = str(batch)
        out["fixed"] = fixed_batch(_fresh_trainer(args), str(batch))
    return out


def _fresh_trainer(args):
    from transformers import AutoModelForCausalLM, PreTrainedTokenizerFast

    from ttg_envs.meters import load_meter
    from ttg_envs.training.actor.admissible import AdmissibleGenerator
    from ttg_envs.training.actor.trainer import Trainer

    model = AutoModelForCausalLM.from_pretrained(START)
    tokenizer = PreTrainedTokenizerFast.from_pretrained(START)
    return Trainer(_config(args), model, tokenizer, meter=load_meter(ENV_ID), generator=AdmissibleGenerator(model, tokenizer))


def fixed_batch(trainer, path: str) -> dict[str, Any]:
    """Advantages of the batch's episodes and the update's loss terms on its rows, under this process's code."""
    from ttg_envs.training.actor.advantages import episode_advantages
    from ttg_envs.training.actor.rollout import Episode
    from ttg_envs.training.actor.trainer import Row

    data = pickle.loads(Path(path).read_bytes())
    episodes = [Episode(**e) for e in data["episodes"]]
    cfg = trainer.config
    adv = episode_advantages(episodes, cfg.estimator, rho=cfg.rho, cap=cfg.cap).double().numpy()
    fields = Row.__dataclass_fields__
    rows = [Row(p, a, adv_, *([old] if "old_logprobs" in fields else [])) for p, a, adv_, old in data["rows"]]
    terms = trainer.update(rows, np.random.default_rng(5))
    return {"advantages": np.nan_to_num(adv).tolist(), "terms": terms}


# ---------------------------------------------------------------------------------------- driver
def matmul_gflops(threads: int, n: int = 1024, reps: int = 20) -> float:
    """float32 matmul throughput of this machine on ``threads`` threads (best of 3)."""
    import torch

    torch.set_num_threads(threads)
    a, b = torch.randn(n, n), torch.randn(n, n)
    a @ b
    best = float("inf")
    for _ in range(3):
        start = time.perf_counter()
        for _ in range(reps):
            a @ b
        best = min(best, time.perf_counter() - start)
    return 2 * n**3 * reps / best / 1e9


def model_flops(prompt_tokens: list[int], action_tokens: list[int]) -> float:
    """FLOPs of the step's necessary work for the start's architecture (see the module docstring)."""
    cfg = json.loads((START / "config.json").read_text())
    d, layers, inter, vocab = cfg["hidden_size"], cfg["num_hidden_layers"], cfg["intermediate_size"], cfg["vocab_size"]
    heads, kv, hd = cfg["num_attention_heads"], cfg["num_key_value_heads"], cfg["head_dim"]
    per_token = 2 * layers * (d * heads * hd * 2 + d * kv * hd * 2 + 3 * d * inter)  # projections and MLP

    def forward(length: int, scored: int) -> float:
        attention = 2 * 2 * layers * heads * hd * length * (length + 1) / 2  # QK^T and AV, causal
        return per_token * length + attention + 2 * d * vocab * scored

    total = 0.0
    for p, a in zip(prompt_tokens, action_tokens):
        total += forward(p, 1) + a * (per_token + 4 * layers * heads * hd * (p + a) + 2 * d * vocab)  # sample
        total += forward(p + a, a) * (1 + 3)  # reference, policy forward + backward
    return total


def run_worker(which: str, threads: int, args, old_tree: Path, scratch: Path, index: int, check: bool) -> dict[str, Any]:
    out = scratch / f"{which}-{threads}-{index}.json"
    shape = ["--tasks", str(args.tasks), "--group", str(args.group), "--turns", str(args.turns), "--threads", str(threads)]
    cmd = [sys.executable, str(Path(__file__).resolve()), "--worker", which, "--worker-out", str(out), *shape]
    cmd += ["--check-loss", str(args.check_loss if check else 0)]
    env = {**os.environ, "PYTHONPATH": str(old_tree if which == "old" else ROOT), "TQDM_DISABLE": "1"}
    subprocess.run(cmd, check=True, env=env, cwd=str(ROOT))
    result = json.loads(out.read_text())
    if "batch" in result:  # the same fixed batch through the old code
        fixed = scratch / "fixed-old.json"
        cmd = [sys.executable, str(Path(__file__).resolve()), "--worker", "old", "--worker-out", str(fixed), "--batch", result["batch"]]
        subprocess.run(cmd + shape, check=True, env={**env, "PYTHONPATH": str(old_tree)}, cwd=str(ROOT))
        result["fixed_old"] = json.loads(fixed.read_text())
    return result


def main(argv=None) -> int:
    args = parse_args(argv)
    if args.worker:
        result = worker(args)
        Path(args.worker_out).write_text(json.dumps(result))
        return 0
    variants = [(v.split(":")[0], int(v.split(":")[1])) for v in args.variants]
    if any(code not in ("old", "new") for code, _ in variants):
        raise SystemExit(f"--variants: each is old:THREADS or new:THREADS, got {args.variants}")
    scratch = Path(tempfile.mkdtemp(prefix="bench_trainer_"))
    old_tree = scratch / "old"
    old_tree.mkdir()
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", args.baseline, "ttg_envs"], check=True, capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(old_tree)], input=archive, check=True)
    print(f"{args.tasks} tasks x {args.group} rollouts, <= {args.turns} turns; old = {args.baseline}, new = this checkout", flush=True)
    names = [f"{code}:{threads}" for code, threads in variants]
    runs: dict[str, list[dict[str, Any]]] = {name: [] for name in names}
    checked = False
    for i in range(args.repeats):
        for name, (code, threads) in zip(names, variants):
            check = bool(args.check_loss) and code == "new" and not checked
            checked |= check
            result = run_worker(code, threads, args, old_tree, scratch, i, check)
            runs[name].append(result)
            print(f"{name} #{i}: {result['wall_s']:.1f} s wall, {result['cpu_s']:.1f} s CPU, {result['rows']} rows", flush=True)
            if args.out:  # so far, in case a long run is stopped
                Path(args.out).write_text(json.dumps({"args": vars(args), "runs": runs, "partial": True}, indent=1))
    gflops = {t: matmul_gflops(t) for t in sorted({t for _, t in variants})}
    report = summarize(runs, gflops, args.base or names[0])
    print(report["text"])
    checked_run = next((r for name in names for r in runs[name] if "fixed" in r), None)
    if checked_run is not None:
        fixed = checked_run["fixed"], checked_run["fixed_old"]
        adv_new, adv_old = np.array(fixed[0]["advantages"]), np.array(fixed[1]["advantages"])
        print(f"\nfixed batch ({args.check_loss} rows): advantages max |new - old| {np.abs(adv_new - adv_old).max():.3g}")
        for k in ("loss", "pg_loss", "kl", "entropy", "clip_frac", "grad_norm"):
            print(
                f"  {k}: new {fixed[0]['terms'][k]:.9g}, old {fixed[1]['terms'][k]:.9g}, |diff| {abs(fixed[0]['terms'][k] - fixed[1]['terms'][k]):.3g}"
            )
        report["fixed_batch"] = {
            "new": fixed[0]["terms"],
            "old": fixed[1]["terms"],
            "advantage_max_diff": float(np.abs(adv_new - adv_old).max()),
        }
    if args.out:
        Path(args.out).write_text(json.dumps({"args": vars(args), "runs": runs, "matmul_gflops": gflops, **report}, indent=1))
    return 0


def summarize(runs: dict[str, list[dict[str, Any]]], gflops: dict[int, float], base_name: str) -> dict[str, Any]:
    """The split table, throughput and floor of every variant, and each one's ratio to ``base_name``'s."""
    from ttg_envs._io import markdown_table

    names = list(runs)
    lines = []
    rows = []
    for bucket in BUCKETS:
        cells = [bucket]
        for name in names:
            w = np.mean([r["split_wall"].get(bucket, 0.0) for r in runs[name]])
            c = np.mean([r["split_cpu"].get(bucket, 0.0) for r in runs[name]])
            cells.append(f"{w:.1f} / {c:.1f}")
        rows.append(cells)
    stats = {}
    for name in names:
        r = runs[name]
        rate = gflops[int(name.split(":")[1])]
        tokens = np.mean([sum(x["prompt_tokens"]) + sum(x["action_tokens"]) for x in r])
        flops = np.mean([model_flops(x["prompt_tokens"], x["action_tokens"]) for x in r])
        stats[name] = {
            "wall_s": float(np.mean([x["wall_s"] for x in r])),
            "cpu_s": float(np.mean([x["cpu_s"] for x in r])),
            "rows": float(np.mean([x["rows"] for x in r])),
            "row_tokens": float(tokens),
            "flops": float(flops),
            "floor_s": float(flops / (rate * 1e9)),
            "gflops": rate,
        }
    rows.append(["step", *(f"{stats[n]['wall_s']:.1f} / {stats[n]['cpu_s']:.1f}" for n in names)])
    lines.append(markdown_table(["part (s wall / s CPU)", *names], rows))
    for name in names:
        s = stats[name]
        lines.append(
            f"{name}: {s['rows']:.0f} rows, {s['row_tokens'] / s['wall_s']:.0f} trained tokens/s (prompt + action), "
            f"floor {s['floor_s']:.1f} s ({s['flops'] / 1e9:.1f} GFLOP at {s['gflops']:.1f} GFLOP/s), {s['wall_s'] / s['floor_s']:.1f}x the floor"
        )
    base = stats[base_name]
    ratios = {}
    for name in (n for n in names if n != base_name):
        s = stats[name]
        # Episodes differ between the codes' steps (sampling differs), so per-row time is a fair unit too.
        ratios[name] = {
            "wall": base["wall_s"] / s["wall_s"],
            "cpu": base["cpu_s"] / s["cpu_s"],
            "cpu_per_row": (base["cpu_s"] / base["rows"]) / (s["cpu_s"] / s["rows"]),
        }
        r = ratios[name]
        lines.append(f"{base_name} / {name}: {r['wall']:.2f}x wall, {r['cpu']:.2f}x CPU, {r['cpu_per_row']:.2f}x CPU per trained row")
    return {"stats": stats, "ratios": ratios, "text": "\n".join(lines)}


if __name__ == "__main__":
    raise SystemExit(main())
