"""``ttg train``: the flags (the run is :func:`ttg_envs.training.actor.launch.train`)."""

from __future__ import annotations

import argparse

from ..cli_args import add_env, add_lora, add_out, add_report_to, add_seed, add_tasks, non_negative_int

_TRAIN = """Train an actor with DeltaTTG (or the grpo, dapo, gigpo, hgpo baselines) on one node.

Unset hyperparameters take paper table 4's values for the env. --model tiny builds a small random
Qwen3 with a tokenizer trained on the env's prompts, and --meter turns a rule-based meter (remaining
tokens shrink with the turn count): together they run end to end on a CPU in seconds. Checkpoints and
metrics.jsonl go to --out; a run resumes from the newest checkpoint there unless --no-resume is given.
A step whose groups of rollouts all have equal rewards is reported with a warning (nothing to learn)."""


def add_train(sub: argparse._SubParsersAction) -> None:
    """``ttg train``."""
    from ..training.actor.advantages import ESTIMATORS
    from ..training.actor.launch import LaunchConfig
    from ..training.actor.trainer import TrainConfig

    p = sub.add_parser(
        "train",
        help="train an actor with DeltaTTG or a baseline",
        description=_TRAIN,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_env(p, kwargs_help='JSON dict of extra gym.make kwargs, e.g. \'{"split": "train"}\'')
    p.add_argument("--model", default=LaunchConfig.model, help="policy: HF name or folder, or 'tiny' (default: %(default)s)")
    p.add_argument("--meter", default=None, help="load_meter spec, or 'turns' (rule-based, smoke runs); needed by delta_ttg")
    p.add_argument(
        "--estimator",
        default=TrainConfig.estimator,
        choices=ESTIMATORS,
        help="advantages: delta_ttg (needs --meter), grpo, dapo (GRPO with dynamic sampling: up to "
        "10 rollout batches per step until enough groups have varied rewards), gigpo or hgpo",
    )
    p.add_argument("--steps", type=int, default=TrainConfig.steps)
    p.add_argument("--tasks-per-step", type=int, default=None, help="table 4's training batch size by default")
    p.add_argument("--group-size", type=int, default=None, help="rollouts per task G (table 4)")
    p.add_argument("--max-turns", type=int, default=None, help="table 4")
    p.add_argument("--max-tokens-per-turn", type=int, default=None, help="table 4")
    p.add_argument("--lr", type=float, default=None, help="table 4")
    p.add_argument("--kl-coef", type=float, default=None, help="table 4")
    p.add_argument("--entropy-coef", type=float, default=None, help="table 4")
    p.add_argument("--temperature", type=float, default=None, help="table 4")
    p.add_argument("--mini-batch-rows", type=int, default=TrainConfig.mini_batch_rows, help="turns per optimizer step")
    p.add_argument("--micro-batch-rows", type=int, default=TrainConfig.micro_batch_rows, help="turns per forward pass")
    add_tasks(p, "task pool as indices, e.g. 0-99 or 0,5,7 (default: all)", "--task-indices")
    p.add_argument(
        "--window",
        default="full",
        help="policy prompt window: 'full', 'paper' (last 2 turns within 2048 tokens, appendix E.5), or a turn count",
    )
    p.add_argument("--max-prompt-tokens", type=int, default=None, help="policy prompt budget (overrides the window's)")
    add_seed(p)
    p.add_argument("--save-every", type=int, default=TrainConfig.save_every)
    add_out(p, TrainConfig.out_dir, help="checkpoints and metrics.jsonl")
    p.add_argument("--no-resume", action="store_true", help="start over even if --out holds checkpoints")
    p.add_argument("--device", default=None, help="torch device (default: cuda when available)")
    p.add_argument("--dtype", default=LaunchConfig.dtype, help="policy dtype on GPU (default: %(default)s; CPU uses float32)")
    p.add_argument(
        "--rollout",
        default=LaunchConfig.rollout,
        choices=("auto", "hf", "vllm"),
        help="rollout engine: vLLM when installed and on a GPU (auto), transformers (hf), or vllm",
    )
    p.add_argument(
        "--torch-threads",
        type=non_negative_int,
        default=LaunchConfig.torch_threads,
        help="torch CPU threads (default: 1 for a CPU policy under 60M parameters, such as --model tiny, where "
        "splitting its small ops costs several times the CPU time; else torch's default; 0: torch's default)",
    )
    p.add_argument("--vllm-memory", type=float, default=LaunchConfig.vllm_memory, help="vLLM gpu_memory_utilization (default: %(default)s)")
    add_report_to(p, LaunchConfig, episode_tables=True)
    add_lora(p, LaunchConfig, merge=True)
    p.set_defaults(func=_train)


def _train(args: argparse.Namespace) -> int:
    """``ttg train``: the ``--meter``, ``--report-to`` and ``--lora-r`` checks (a wrong meter or a missing
    tracker fails before the policy loads), then the flags mapped onto :class:`TrainConfig` and :class:`LaunchConfig`."""
    import json

    from ..agents.window import as_window
    from ..training.actor.launch import LaunchConfig, train
    from ..training.actor.trainer import TrainConfig
    from ..training.tracking import check_trackers, parse_report_to
    from .checks import check_meter
    from .configs import from_args

    if args.meter not in (None, "turns"):
        check_meter(args.meter)
    check_trackers(parse_report_to(args.report_to))
    window = as_window(args.window)
    config = from_args(
        TrainConfig,
        args,
        env_id=args.env,
        env_kwargs=json.loads(args.env_kwargs),
        task_indices=None if args.tasks is None else _listed(args.tasks),
        out_dir=args.out,
        window_turns=window.turns,
        max_prompt_tokens=args.max_prompt_tokens or window.max_prompt_tokens,
    )
    train(config, from_args(LaunchConfig, args, resume=not args.no_resume))
    return 0


def _listed(tasks) -> tuple[int, ...]:
    """``--tasks`` as a tuple, refused in one line when a range of it is too long to list."""
    return tasks.listed() if hasattr(tasks, "listed") else tuple(tasks)
