"""``ttg train``: the flags (the run is :func:`ttg_envs.training.actor.launch.train`)."""

from __future__ import annotations

import argparse

from ..cli_args import add_env, add_lora, add_out, add_report_to, add_seed, add_tasks

_TRAIN = """Train an actor with DeltaTTG (or the grpo, dapo, gigpo, hgpo baselines) on one node.

Unset hyperparameters take paper table 4's values for the env. --model tiny builds a small random
Qwen3 with a tokenizer trained on the env's prompts, and --meter turns a rule-based meter (remaining
tokens shrink with the turn count): together they run end to end on a CPU in seconds. Checkpoints and
metrics.jsonl go to --out; a run resumes from the newest checkpoint there unless --no-resume is given.
A step whose groups of rollouts all have equal rewards is reported with a warning (nothing to learn)."""


def add_train(sub: argparse._SubParsersAction) -> None:
    """``ttg train``."""
    from ..training.actor import launch
    from ..training.actor.advantages import ESTIMATORS

    p = sub.add_parser(
        "train",
        help="train an actor with DeltaTTG or a baseline",
        description=_TRAIN,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_env(p, kwargs_help='JSON dict of extra gym.make kwargs, e.g. \'{"split": "train"}\'')
    p.add_argument("--model", default="Qwen/Qwen3-4B", help="policy: HF name or folder, or 'tiny' (default: %(default)s)")
    p.add_argument("--meter", default=None, help="load_meter spec, or 'turns' (rule-based, smoke runs); needed by delta_ttg")
    p.add_argument(
        "--estimator",
        default="delta_ttg",
        choices=ESTIMATORS,
        help="advantages: delta_ttg (needs --meter), grpo, dapo (GRPO with dynamic sampling: up to "
        "10 rollout batches per step until enough groups have varied rewards), gigpo or hgpo",
    )
    p.add_argument("--steps", type=int, default=150)
    p.add_argument("--tasks-per-step", type=int, default=None, help="table 4's training batch size by default")
    p.add_argument("--group-size", type=int, default=None, help="rollouts per task G (table 4)")
    p.add_argument("--max-turns", type=int, default=None, help="table 4")
    p.add_argument("--max-tokens-per-turn", type=int, default=None, help="table 4")
    p.add_argument("--lr", type=float, default=None, help="table 4")
    p.add_argument("--kl-coef", type=float, default=None, help="table 4")
    p.add_argument("--entropy-coef", type=float, default=None, help="table 4")
    p.add_argument("--temperature", type=float, default=None, help="table 4")
    p.add_argument("--mini-batch-rows", type=int, default=256, help="turns per optimizer step")
    p.add_argument("--micro-batch-rows", type=int, default=8, help="turns per forward pass")
    add_tasks(p, "task pool as indices, e.g. 0-99 or 0,5,7 (default: all)", "--task-indices")
    p.add_argument(
        "--history",
        default="full",
        help="policy prompt window: 'full', 'paper' (last 2 turns within 2048 tokens, appendix E.5), or a turn count",
    )
    p.add_argument("--max-prompt-tokens", type=int, default=None, help="policy prompt budget (overrides the window's)")
    add_seed(p)
    p.add_argument("--save-every", type=int, default=10)
    add_out(p, "runs/train", help="checkpoints and metrics.jsonl")
    p.add_argument("--no-resume", action="store_true", help="start over even if --out holds checkpoints")
    p.add_argument("--device", default=None, help="torch device (default: cuda when available)")
    p.add_argument("--dtype", default="bfloat16", help="policy dtype on GPU (default: %(default)s; CPU uses float32)")
    p.add_argument(
        "--rollout",
        default="auto",
        choices=("auto", "hf", "vllm"),
        help="rollout engine: vLLM when installed and on a GPU (auto), transformers (hf), or vllm",
    )
    p.add_argument("--vllm-memory", type=float, default=0.35, help="vLLM gpu_memory_utilization (default: %(default)s)")
    add_report_to(p, episode_tables=True)
    add_lora(p, merge=True)
    p.set_defaults(func=_checked(launch.train))


def _checked(func):
    """``func`` after the ``--meter``, ``--env-kwargs`` and ``--report-to`` checks (a wrong meter or a
    missing tracker fails before the policy loads)."""

    def run(args: argparse.Namespace):
        from ..training.tracking import check_trackers, parse_report_to
        from .checks import check_meter

        if args.meter not in (None, "turns"):
            check_meter(args.meter)
        check_trackers(parse_report_to(args.report_to))
        if args.lora_r and args.rollout == "vllm":
            raise ValueError("--rollout vllm with --lora-r: vLLM rollouts of a LoRA policy are not wired yet; use --rollout hf")
        return func(args)

    return run
