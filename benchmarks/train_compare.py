"""Train one warm-started tiny policy with grpo, delta_ttg, gigpo and hgpo; held-out success curves.

    PYTHONPATH=. python benchmarks/train_compare.py --out benchmarks/results/train_compare

1. **Start** (cached in ``<out>/start``): a noisy expert (``--sft-eps``) plays the even train-split
   indices of ``--task-types`` (``--sft-episodes`` each) and ``--sft-more`` more train-family tasks
   per type that :func:`~ttg_envs.datagen.alfworld.generate_tasks` makes with the real
   engine (indices 100 and up, never bundled; ``--sft-more-episodes`` each), with bare-command
   actions (``action_format="lenient"``). Every step is labelled with the expert's command from
   that state (DAgger-style, ``teacher=`` of :func:`~ttg_envs.training.actor.sft.record_demonstrations`),
   so the clone learns recoveries, not the noise. A byte-level BPE is trained on those transcripts
   and a tiny Qwen3 (``--hidden``/``--layers``) is fitted to the labels by
   :func:`~ttg_envs.training.actor.sft.sft_train` (prompts through the paper's E.5 window).
2. **RL**: for each estimator and seed, the real :class:`~ttg_envs.training.actor.trainer.Trainer` (loss,
   credit and rollout code unchanged) trains the start on the odd train-split indices, sampling
   through :class:`~ttg_envs.training.actor.admissible.AdmissibleGenerator`; ``delta_ttg``
   uses ``--meter`` (default: the shipped ALFWorld meter).
3. **Evaluation** every ``--eval-every`` steps: success of the sampled policy (temperature 1, a fixed
   seed per task) on ``--eval-tasks`` tasks of valid_seen and of valid_unseen each, spread over the
   split (``spread_indices``) after the task-type filter, ``--eval-samples`` episodes per task.
   Settings were chosen on the train split only; the eval tasks are never trained or tuned on. The
   start is evaluated once, under ``--start-eval-seeds`` sampling seeds; the first is every run's
   step 0, and their spread (printed under the table) is the noise of one evaluation.

Each finished (estimator, seed) run is kept in ``<out>/runs/<estimator>-<seed>/run.json`` with the
settings it ran under, and a rerun with the same settings reuses it, so an interrupted comparison
resumes and more seeds or estimators can be added later. An unfinished run keeps its record and the
trainer's checkpoint at its last evaluation (``partial.json``, ``checkpoint-<step>``) and resumes from
there, repeating exactly the steps an uninterrupted run takes; ``--budget-s`` stops a call at the next
evaluation after that many seconds, so a long comparison grows session by session.

Writes ``curves.json`` (every evaluation and training step), ``table.md`` (success at fixed steps,
mean and std over seeds; steps to ``--threshold``) and ``curves.png`` (paper figure 3's two panels:
held-out success vs step and vs cumulative actor response tokens, mean and spread over seeds).
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

ESTIMATORS = ("grpo", "delta_ttg", "gigpo", "hgpo")
ENV_ID = "ttg/ALFWorld-v0"


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument(
        "--env",
        default="alfworld",
        choices=("alfworld", "corridor"),
        help="alfworld: the noisy-expert SFT start on ttg/ALFWorld-v0; corridor: ttg-toy/Corridor-v0 "
        "from a fresh tiny policy (tasks 0-31 train, 100-131 held out; scripted distance meter)",
    )
    p.add_argument("--out", default=None, help="default: benchmarks/results/train_compare[_corridor]")
    p.add_argument("--estimators", default=",".join(ESTIMATORS))
    p.add_argument("--seeds", default="0,1,2")
    p.add_argument("--steps", type=int, default=8)
    p.add_argument("--eval-every", type=int, default=4)
    p.add_argument("--eval-tasks", type=int, default=None, help="tasks per held-out split (valid_seen, valid_unseen); default: all of them")
    p.add_argument("--eval-samples", type=int, default=1, help="sampled episodes per held-out task and evaluation")
    p.add_argument(
        "--start-eval-seeds",
        type=int,
        default=4,
        help="evaluate the start with this many sampling seeds (the first is every run's step 0) to show the evaluation's own noise",
    )
    p.add_argument("--task-types", default="pick_and_place_simple")
    p.add_argument("--tasks-per-step", type=int, default=8)
    p.add_argument("--group-size", type=int, default=4)
    p.add_argument("--max-turns", type=int, default=15, help="turn cap of training and evaluation episodes")
    p.add_argument("--lr", type=float, default=3e-4)
    p.add_argument("--kl-coef", type=float, default=0.0)
    p.add_argument(
        "--meter",
        default=ENV_ID,
        help="load_meter spec for delta_ttg (default: the shipped ALFWorld "
        "meter); with --env corridor, 'budget' gives the scripted meter that also predicts failure "
        "when too few turns are left (corridor_meter(budget_aware=True))",
    )
    p.add_argument("--sft-eps", type=float, default=0.3, help="noise of the recorded noisy expert")
    p.add_argument("--sft-tasks", type=int, default=None, help="record on this many even-index train tasks (default: all)")
    p.add_argument("--sft-episodes", type=int, default=4, help="noisy-expert episodes per even-index train task")
    p.add_argument("--sft-more", type=int, default=300, help="more train-family tasks per type, generated for SFT only")
    p.add_argument("--sft-more-episodes", type=int, default=2)
    p.add_argument("--sft-turns", type=int, default=15, help="turn cap of the recorded noisy-expert episodes")
    p.add_argument("--sft-epochs", type=int, default=4)
    p.add_argument("--sft-lr", type=float, default=2e-3)
    p.add_argument("--hidden", type=int, default=64)
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--vocab", type=int, default=1024)
    p.add_argument("--threshold", type=float, default=0.5, help="held-out success for 'steps to threshold'")
    p.add_argument("--threads", type=int, default=2, help="workers that generate the warm start's extra tasks")
    p.add_argument(
        "--torch-threads",
        type=int,
        default=1,
        help="torch CPU threads (default 1: the tiny policy's ops are too small to split; on the shared 2-core "
        "machine 2 threads cost several times the CPU time per step, benchmarks/bench_trainer.py)",
    )
    p.add_argument(
        "--budget-s",
        type=float,
        default=None,
        help="stop starting training steps after this many seconds; an unfinished run keeps its last evaluation's "
        "checkpoint and the next call with the same arguments resumes it",
    )
    args = p.parse_args(argv)
    if args.env == "corridor":  # the toy's own sizes unless given
        defaults = {"max_turns": 5, "lr": 3e-3, "tasks_per_step": 4, "hidden": 32, "layers": 1, "vocab": 300, "eval_tasks": 32}
        given = set(a.split("=")[0].lstrip("-").replace("-", "_") for a in (argv if argv is not None else sys.argv[1:]))
        for k, v in defaults.items():
            if k not in given:
                setattr(args, k, v)
    args.out = args.out or ("benchmarks/results/train_compare" + ("_corridor" if args.env == "corridor" else ""))
    return args


def env_id(args) -> str:
    if args.env == "corridor":
        from ttg_envs.envs.corridor import ENV_ID as CORRIDOR

        return CORRIDOR
    return ENV_ID


def env_kwargs(args, split: str) -> dict[str, Any]:
    if args.env == "corridor":
        return {}
    return {"split": split, "action_format": "lenient", "task_types": args.task_types.split(",")}


def make_envs(args, split: str, n: int, turns: int | None = None, **extra: Any) -> list[Any]:
    """``n`` envs of ``split`` capped at ``turns`` (default ``--max-turns``)."""
    import gymnasium as gym

    import ttg_envs  # noqa: F401

    turns = turns or args.max_turns
    return [gym.make(env_id(args), max_steps=turns, **env_kwargs(args, split), **extra) for _ in range(n)]


def more_train_tasks(args, folder: Path) -> Path:
    """``--sft-more`` generated train-family tasks per type (indices 100 and up), cached as JSON lines."""
    from ttg_envs.datagen.alfworld import generate_tasks, write_jsonl_gz

    path = folder / f"more_train_{args.sft_more}.jsonl.gz"
    if not path.is_file():
        lines = [
            line
            for t in args.task_types.split(",")
            for line in generate_tasks("train", t, range(100, 100 + args.sft_more), workers=args.threads)
        ]
        folder.mkdir(parents=True, exist_ok=True)
        write_jsonl_gz(path, lines)
    return path


def window(args):
    from ttg_envs.agents.window import PAPER_E5, PromptWindow

    return PromptWindow() if args.env == "corridor" else PAPER_E5


def train_pool(args) -> tuple[int, ...]:
    if args.env == "corridor":
        return tuple(range(32))
    return tuple(range(1, make_envs(args, "train", 1)[0].unwrapped.num_tasks, 2))


def build_corridor_start(args, folder: Path) -> dict[str, Any]:
    """A fresh tiny policy (seed 0) and a tokenizer trained on the corridor's texts."""
    from ttg_envs.envs.corridor import corridor_texts
    from ttg_envs.training.tiny_models import tiny_causal_lm, train_bpe_tokenizer

    tokenizer = train_bpe_tokenizer(corridor_texts(), vocab_size=args.vocab)
    model = tiny_causal_lm(tokenizer, hidden=args.hidden, layers=args.layers, heads=max(1, args.hidden // 32), seed=0)
    folder.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    info = {"policy": "fresh tiny Qwen3 (seed 0), no SFT", "params": sum(p.numel() for p in model.parameters())}
    (folder / "start.json").write_text(json.dumps(info, indent=1))
    return info


def build_start(args, folder: Path) -> dict[str, Any]:
    """Record the noisy expert, train the tokenizer, SFT the tiny policy; cached in ``folder``."""
    if (folder / "start.json").is_file():
        return json.loads((folder / "start.json").read_text())
    if args.env == "corridor":
        return build_corridor_start(args, folder)
    from ttg_envs.agents.window import PAPER_E5
    from ttg_envs.envs.alfworld.policies import make_policy
    from ttg_envs.training.actor.sft import command_only, demonstration_rows, record_demonstrations, sft_train
    from ttg_envs.training.tiny_models import tiny_causal_lm, train_bpe_tokenizer

    env = make_envs(args, "train", 1, turns=args.sft_turns)[0]
    n = env.unwrapped.num_tasks
    start = time.perf_counter()
    from ttg_envs.runner import spread_indices

    even = list(range(0, n, 2))
    sft_tasks = [even[i] for i in spread_indices(len(even), args.sft_tasks)]
    noisy = lambda s: command_only(make_policy("noisy_expert", seed=s, eps=args.sft_eps))  # noqa: E731
    expert = command_only(make_policy("expert"))
    demos, stats = record_demonstrations(env, noisy, sft_tasks, episodes_per_task=args.sft_episodes, teacher=expert)
    recorded = [("bundled train, even indices", stats)]
    if args.sft_more:
        more = more_train_tasks(args, folder)
        more_env = make_envs(args, "train", 1, turns=args.sft_turns, game_files=more)[0]
        more_demos, more_stats = record_demonstrations(
            more_env, noisy, range(more_env.unwrapped.num_tasks), episodes_per_task=args.sft_more_episodes, teacher=expert, seed=10**6
        )
        demos += more_demos
        recorded.append((f"generated train family, {args.sft_more} per type", more_stats))
    texts = [env.unwrapped.system_prompt] + [m["content"] for d in demos for m in d.messages[1:]] + [d.action for d in demos]
    tokenizer = train_bpe_tokenizer(texts, vocab_size=args.vocab)
    rows = demonstration_rows(tokenizer, demos, PAPER_E5)
    model = tiny_causal_lm(tokenizer, hidden=args.hidden, layers=args.layers, heads=max(2, args.hidden // 32), seed=0)
    sft_start = time.perf_counter()
    losses = sft_train(model, rows, epochs=args.sft_epochs, lr=args.sft_lr, batch_rows=16, pad_id=tokenizer.pad_token_id)
    folder.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    info = {
        "recorded": [
            {
                "tasks": name,
                "policy": f"noisy_expert:{args.sft_eps}",
                "labels": "expert",
                "task_count": len(st.per_task),
                "episodes": st.episodes,
                "success_rate": st.success_rate,
                "steps": st.steps,
                "planner_timeouts": st.planner_timeouts,
                "seconds": round(st.seconds, 1),
            }
            for name, st in recorded
        ],
        "sft": {
            "rows": len(rows),
            "epochs": args.sft_epochs,
            "losses": [round(x, 4) for x in losses],
            "seconds": round(time.perf_counter() - sft_start, 1),
            "params": sum(p.numel() for p in model.parameters()),
        },
        "build_s": round(time.perf_counter() - start, 1),
    }
    (folder / "start.json").write_text(json.dumps(info, indent=1))
    return info


def load_start(folder: Path):
    from transformers import AutoModelForCausalLM, PreTrainedTokenizerFast

    tokenizer = PreTrainedTokenizerFast.from_pretrained(folder)
    return AutoModelForCausalLM.from_pretrained(folder), tokenizer


def held_out_tasks(args) -> dict[str, tuple[int, ...]]:
    from ttg_envs.runner import spread_indices

    if args.env == "corridor":
        return {"held_out": tuple(range(100, 100 + args.eval_tasks))}
    return {
        split: spread_indices(make_envs(args, split, 1)[0].unwrapped.num_tasks, args.eval_tasks) for split in ("valid_seen", "valid_unseen")
    }


def evaluate(model, tokenizer, envs: dict[str, list[Any]], tasks: dict[str, tuple[int, ...]], args, seed: int = 12345) -> dict[str, float]:
    """Held-out success per split (and pooled) of the sampled policy over ``--eval-samples`` episodes per
    task; the RNG is seeded so reruns agree."""
    import torch

    from ttg_envs.training.actor.admissible import AdmissibleGenerator
    from ttg_envs.training.actor.rollout import run_episodes

    state = torch.get_rng_state()
    torch.manual_seed(seed)
    out, every = {}, []
    generator = AdmissibleGenerator(model, tokenizer)
    for split, indices in tasks.items():
        # Sample j of task i plays with env seed 1000 + i + 10**5 j (one sample: the seeds 1000 + i).
        specs = [(i, task, 1000 + i + 10**5 * j) for j in range(args.eval_samples) for i, task in enumerate(indices)]
        episodes = run_episodes(envs[split][: len(specs)], generator, tokenizer, specs, max_tokens(args), 1.0, 1.0, window(args))
        out[split] = float(np.mean([e.success for e in episodes]))
        every += [e.success for e in episodes]
    out["all"] = float(np.mean(every))
    torch.set_rng_state(state)
    return out


def max_tokens(args) -> int:
    return 4 if args.env == "corridor" else 16


def train_run(
    args, estimator: str, seed: int, start: Path, tasks, eval_envs, meter, start_eval: dict[str, float], deadline: float | None = None
) -> dict[str, Any] | None:
    """One (estimator, seed) run from the start; ``start_eval`` is the start's own evaluation (step 0, the same for every run).

    After each evaluation the run so far and the trainer's checkpoint are kept (``partial.json``), so a
    run cut short resumes from its last evaluation; past ``deadline`` (``time.perf_counter``) the run
    stops at its next evaluation and returns ``None``."""
    from ttg_envs.training.actor.admissible import AdmissibleGenerator
    from ttg_envs.training.actor.trainer import TrainConfig, Trainer

    model, tokenizer = load_start(start)
    config = TrainConfig(
        env_id=env_id(args),
        env_kwargs=env_kwargs(args, "train"),
        estimator=estimator,
        steps=args.steps,
        tasks_per_step=args.tasks_per_step,
        group_size=args.group_size,
        max_turns=args.max_turns,
        max_tokens_per_turn=max_tokens(args),
        lr=args.lr,
        kl_coef=args.kl_coef,
        entropy_coef=0.0,
        mini_batch_rows=32 if args.env == "corridor" else 256,
        micro_batch_rows=16,
        task_indices=train_pool(args),
        window_turns=window(args).turns,
        max_prompt_tokens=window(args).max_prompt_tokens,
        failure_cost=64.0 if args.env == "corridor" else None,
        seed=seed,
        save_every=0,
        out_dir=str(Path(args.out) / "runs" / f"{estimator}-{seed}"),
    )
    trainer = Trainer(
        config, model, tokenizer, meter=meter if estimator == "delta_ttg" else None, generator=AdmissibleGenerator(model, tokenizer)
    )
    run = {"estimator": estimator, "seed": seed, "eval_steps": [], "eval": [], "eval_tokens": [], "train": [], "wall_s": 0.0}
    partial = resumable_run(args, estimator, seed)
    if partial is not None:
        run = partial
        trainer.resume(checkpoint_folder(args, estimator, seed, run["eval_steps"][-1]))
        print(f"{estimator} seed {seed}: resuming after step {trainer.step_index}", flush=True)
    else:
        metrics_file = Path(config.out_dir) / "metrics.jsonl"
        if metrics_file.exists():
            metrics_file.unlink()
    tokens = run["eval_tokens"][-1] if run["eval_tokens"] else 0
    begin = time.perf_counter() - run["wall_s"]
    for target in range(0, args.steps + 1, args.eval_every):
        if target in run["eval_steps"]:
            continue
        if target and deadline is not None and time.perf_counter() > deadline:
            print(f"{estimator} seed {seed}: out of --budget-s after step {trainer.step_index}; rerun to go on", flush=True)
            return None
        if target:
            for m in trainer.train(steps=target, progress=False):
                tokens += m["response_tokens"]
                run["train"].append(
                    {k: m[k] for k in ("step", "success_rate", "reward_mean", "turns_mean", "response_tokens", "loss", "step_s")}
                )
        run["eval_steps"].append(target)
        run["eval_tokens"].append(tokens)
        run["eval"].append(evaluate(model, tokenizer, eval_envs, tasks, args) if target else start_eval)
        run["wall_s"] = round(time.perf_counter() - begin, 1)
        print(f"{estimator} seed {seed} step {target}: held-out {run['eval'][-1]} ({run['wall_s']:.0f}s)", flush=True)
        if target and target < args.steps:
            keep_partial(args, run)
    run["settings"] = run_settings(args)
    run_file(args, estimator, seed).write_text(json.dumps(run, indent=1))
    drop_partial(args, estimator, seed)
    return run


def checkpoint_folder(args, estimator: str, seed: int, step: int) -> Path:
    """The trainer's checkpoint of ``step`` (``Trainer.save``'s default folder name)."""
    return run_file(args, estimator, seed).parent / f"checkpoint-{step}"


def _partial_file(args, estimator: str, seed: int) -> Path:
    return run_file(args, estimator, seed).parent / "partial.json"


def keep_partial(args, run: dict[str, Any]) -> None:
    """Record an unfinished run at its last evaluation (whose checkpoint the trainer just saved); older checkpoints go."""
    estimator, seed, step = run["estimator"], run["seed"], run["eval_steps"][-1]
    path = _partial_file(args, estimator, seed)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps({**run, "settings": run_settings(args)}, indent=1))
    tmp.replace(path)
    for old in path.parent.glob("checkpoint-*"):
        if old.name != f"checkpoint-{step}":
            shutil.rmtree(old)


def resumable_run(args, estimator: str, seed: int) -> dict[str, Any] | None:
    """An unfinished run's record when its settings match ``args`` and its checkpoint is there."""
    path = _partial_file(args, estimator, seed)
    if not path.is_file():
        return None
    run = json.loads(path.read_text())
    if run.pop("settings") != run_settings(args) or not checkpoint_folder(args, estimator, seed, run["eval_steps"][-1]).is_dir():
        return None
    return run


def drop_partial(args, estimator: str, seed: int) -> None:
    """Remove an unfinished run's record and the trainer's checkpoints (a finished run keeps only ``run.json``)."""
    _partial_file(args, estimator, seed).unlink(missing_ok=True)
    for old in run_file(args, estimator, seed).parent.glob("checkpoint-*"):
        shutil.rmtree(old)


#: Arguments that do not change what one (estimator, seed) run computes.
_NOT_RUN_SETTINGS = ("out", "estimators", "seeds", "threads", "torch_threads", "threshold", "start_eval_seeds", "budget_s")


def run_settings(args) -> dict[str, Any]:
    """The arguments a finished run's cached result must match to be reused."""
    return {k: v for k, v in sorted(vars(args).items()) if k not in _NOT_RUN_SETTINGS}


def run_file(args, estimator: str, seed: int) -> Path:
    """Where the result of one (estimator, seed) run is cached."""
    return Path(args.out) / "runs" / f"{estimator}-{seed}" / "run.json"


def cached_run(args, estimator: str, seed: int) -> dict[str, Any] | None:
    """A finished run's result when its settings match ``args`` (so an interrupted comparison resumes)."""
    path = run_file(args, estimator, seed)
    if not path.is_file():
        return None
    run = json.loads(path.read_text())
    if run.get("settings") != run_settings(args):
        return None
    print(f"{estimator} seed {seed}: reusing {path}", flush=True)
    return run


def summary(runs: list[dict[str, Any]], threshold: float) -> list[dict[str, Any]]:
    rows = []
    for estimator in dict.fromkeys(r["estimator"] for r in runs):
        mine = [r for r in runs if r["estimator"] == estimator]
        steps = mine[0]["eval_steps"]
        success = np.array([[e["all"] for e in r["eval"]] for r in mine])
        mean = success.mean(0)
        reached = [s for s, m in zip(steps, mean) if m >= threshold]
        rows.append(
            {
                "estimator": estimator,
                "seeds": len(mine),
                "steps": steps,
                "mean": mean.tolist(),
                # the sample sd (ddof 1), the same estimator as the start's spread in ``markdown``
                "std": success.std(0, ddof=min(1, len(mine) - 1)).tolist(),
                "steps_to_threshold": reached[0] if reached else None,
                "tokens": np.mean([r["eval_tokens"] for r in mine], 0).tolist(),
                "wall_s": float(np.mean([r["wall_s"] for r in mine])),
            }
        )
    return rows


def markdown(rows: list[dict[str, Any]], threshold: float, start: list[float] | None = None) -> str:
    """The table of ``summary`` rows; ``start``: the start's held-out success under several sampling seeds."""
    from ttg_envs._io import markdown_table

    steps = rows[0]["steps"]
    columns = ["estimator", "seeds", *(f"step {s}" for s in steps), f"steps to {threshold:.0%}", "wall s/run"]
    body = [
        [
            r["estimator"],
            r["seeds"],
            *(f"{100 * m:.1f} ± {100 * s:.1f}" for m, s in zip(r["mean"], r["std"])),
            r["steps_to_threshold"] if r["steps_to_threshold"] is not None else f"> {steps[-1]}",
            f"{r['wall_s']:.0f}",
        ]
        for r in rows
    ]
    text = markdown_table(columns, body) + "\n"
    if start and len(start) > 1:
        text += (
            f"\nThe start itself, sampled with {len(start)} seeds: {100 * np.mean(start):.1f} ± {100 * np.std(start, ddof=1):.1f} "
            f"(range {100 * min(start):.1f}-{100 * max(start):.1f}); step 0 above is the first seed, and every later "
            "evaluation is one draw with that much noise.\n"
        )
    return text


def plot(rows: list[dict[str, Any]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(10, 3.8), sharey=True)
    for r in rows:
        mean, std = 100 * np.array(r["mean"]), 100 * np.array(r["std"])
        for ax, x in zip(axes, (r["steps"], r["tokens"])):
            (line,) = ax.plot(x, mean, marker="o", label=r["estimator"])
            ax.fill_between(x, mean - std, mean + std, color=line.get_color(), alpha=0.15)
    axes[0].set_xlabel("training step")
    axes[1].set_xlabel("cumulative actor response tokens")
    axes[0].set_ylabel("held-out success (%)")
    axes[0].set_title("(a) success vs step")
    axes[1].set_title("(b) success vs actor tokens")
    axes[0].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=130)
    plt.close(fig)


def start_evaluations(args, out: Path, eval_envs, tasks, seeds: tuple[int, ...]) -> list[dict[str, float]]:
    """The start's held-out evaluation under each sampling seed, cached in ``<out>/start_eval.json`` under
    the settings it depends on (the start's weights among them)."""
    import hashlib

    key = {k: getattr(args, k) for k in ("env", "task_types", "eval_tasks", "eval_samples", "max_turns")}
    key["seeds"] = list(seeds)
    key["start_sha256"] = hashlib.sha256((out / "start" / "model.safetensors").read_bytes()).hexdigest()
    path = out / "start_eval.json"
    if path.is_file():
        cached = json.loads(path.read_text())
        if cached["key"] == key:
            return cached["evals"]
    start_model = load_start(out / "start")
    evals = [evaluate(*start_model, eval_envs, tasks, args, seed) for seed in seeds]
    path.write_text(json.dumps({"key": key, "evals": evals}, indent=1))
    return evals


def main(argv=None) -> int:
    args = parse_args(argv)
    import torch

    torch.set_num_threads(args.torch_threads)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    begin = time.perf_counter()
    start_info = build_start(args, out / "start")
    print("start:", json.dumps(start_info), flush=True)
    tasks = held_out_tasks(args)
    eval_envs = {split: make_envs(args, split, args.eval_samples * len(idx)) for split, idx in tasks.items()}
    meter = None
    estimators = args.estimators.split(",")
    if "delta_ttg" in estimators and args.env == "corridor":
        from ttg_envs.envs.corridor import corridor_meter

        meter = corridor_meter(budget_aware=args.meter == "budget")
    elif "delta_ttg" in estimators:
        from ttg_envs.meters import load_meter

        meter = load_meter(args.meter)
    start_seeds = (12345, *range(1, args.start_eval_seeds))
    start_evals = start_evaluations(args, out, eval_envs, tasks, start_seeds)
    start_eval = start_evals[0]
    print(f"start: held-out {start_eval}", flush=True)
    deadline = begin + args.budget_s if args.budget_s else None
    runs, unfinished = [], []
    for seed in args.seeds.split(","):
        for est in estimators:
            run = cached_run(args, est, int(seed)) or train_run(
                args, est, int(seed), out / "start", tasks, eval_envs, meter, start_eval, deadline
            )
            (runs if run is not None else unfinished).append(run or f"{est}-{seed}")
    if unfinished:
        print(f"unfinished (rerun with the same arguments to go on): {', '.join(unfinished)}", flush=True)
    if not runs:
        return 0
    rows = summary(runs, args.threshold)
    result = {
        "command": "python " + " ".join(sys.argv),
        "args": vars(args),
        "start": start_info,
        "start_eval": {"seeds": list(start_seeds), "evals": start_evals},
        "held_out_tasks": tasks,
        "runs": runs,
        "unfinished": unfinished,
        "summary": rows,
        "wall_s": round(time.perf_counter() - begin, 1),
    }
    (out / "curves.json").write_text(json.dumps(result, indent=1))
    table = markdown(rows, args.threshold, [e["all"] for e in start_evals])
    if unfinished:
        table += f"\nUnfinished runs, not in the rows above (the same command resumes them): {', '.join(unfinished)}.\n"
    (out / "table.md").write_text(table)
    try:
        plot(rows, out / "curves.png")
    except ImportError as exc:  # matplotlib is the plot extra
        print(f"no plot: {exc}")
    print(table)
    print(f"wall {result['wall_s']:.0f}s; outputs in {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
