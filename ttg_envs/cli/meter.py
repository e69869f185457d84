"""``ttg train-meter`` and ``ttg eval-meter``: the flags (the pipelines are :mod:`ttg_envs.training.meter.pipeline`)."""

from __future__ import annotations

import argparse

from ..cli_args import add_env, add_limit, add_lora, add_out, add_report_to, add_seed, add_splits, add_tasks, add_workers, positive_int
from ..training.meter.pipeline import EVAL_DEFAULTS, TRAIN_DEFAULTS, MeterEvalConfig, MeterTrainConfig


def _common(p: argparse.ArgumentParser) -> None:
    add_env(p)
    p.add_argument(
        "--policies",
        nargs="+",
        help="scripted policies as name[:eps] (default: expert and noisy experts; BFCL and tau2: gold, gold_drop_last, perturbed)",
    )
    p.add_argument("--trajectories", nargs="+", help="read these trajectory files instead of recording")
    add_limit(p)
    add_tasks(p)
    add_workers(p, help="rollout processes")
    add_seed(p)
    p.add_argument(
        "--episodes-per-task",
        type=positive_int,
        help="episodes of each policy that draws (noisy or perturbed, eps above 0) on every task, seeds SEED to SEED+N-1; "
        "the others play once (default: 1)",
    )
    p.add_argument("--threads", type=int, help="torch CPU threads (0: torch's default)")
    p.add_argument("--device", help="cpu, cuda, or auto")


_TRAIN_METER = """Record trajectories of several scripted policies on the env (or read given files), hold out a
share of whole trajectories, train a progress meter (an encoder with a regression head, or a causal
LM with SFT then GRPO) and save it to OUT/meter with a report of sizes, timings and held-out figures.
The saved folder is what --meter takes in ttg eval, ttg demo and ttg train."""

_EVAL_METER = """Record (or read) trajectories on evaluation splits, add step-quality labels (ALFWorld's planner,
the gold path of BFCL and tau2, or annotations in the files) and report the meter's completion, token and step-quality accuracy
per split."""


def _following_the_env(func, command: str):
    """``func`` run on the command's config (:class:`MeterTrainConfig` or :class:`MeterEvalConfig`)
    after the checks of :mod:`.checks`, with ``--splits`` and ``--policies`` following the env when
    not given (train-meter: its train split; eval-meter: its evaluation splits)."""

    def run(args: argparse.Namespace):
        from ..registry import ENV_SPECS
        from .checks import FlagError, check_env, check_gold, check_meter, check_policy, check_splits, json_flag
        from .configs import from_args

        check_env(args.env)
        # The flag's text, or the config's own default (a dict) when --env-kwargs is not given.
        env_kwargs = args.env_kwargs if isinstance(args.env_kwargs, dict) else json_flag(args.env_kwargs, "--env-kwargs")
        spec = ENV_SPECS.get(args.env)
        defaults = TRAIN_DEFAULTS if command == "train-meter" else EVAL_DEFAULTS
        if args.splits is None:
            if spec is None:
                args.splits = list(defaults["splits"])
            elif command == "train-meter":
                if spec.train_split is None:
                    raise FlagError("--splits", f"{args.env} has no train split; name the splits to record on")
                args.splits = [spec.train_split]
            else:
                args.splits = list(spec.eval_splits)
        if args.policies is None:
            own = spec is None or "noisy_expert" in spec.policy_names
            args.policies = list(defaults["policies"]) if own else list(spec.policy_names)
        if args.trajectories and args.episodes_per_task != 1:
            raise FlagError("--episodes-per-task", "sets how many episodes to record; it has no use with --trajectories")
        if not args.trajectories:
            check_splits(args.env, args.splits, env_kwargs)
            for policy in args.policies:
                check_policy(args.env, policy, "--policies")
        if command == "train-meter" and args.targets in ("gold", "gold-prefix"):
            check_gold(args.env, "--targets", args.targets)
        if command == "eval-meter":
            if args.labels == "gold":
                check_gold(args.env, "--labels", args.labels)
            check_meter(args.meter)
            if args.carry_noops and not (spec and spec.task_state):
                raise FlagError("--carry-noops", f"{args.env} declares no task state (task_state_key), so no step is a known no-op there")
        config_class = MeterTrainConfig if command == "train-meter" else MeterEvalConfig
        return func(from_args(config_class, args, env_kwargs=env_kwargs)) or 0

    return run


def add_train_meter(sub: argparse._SubParsersAction) -> None:
    """``ttg train-meter``."""
    from ..training.meter import pipeline

    p = sub.add_parser(
        "train-meter",
        help="record trajectories and train a progress meter",
        description=_TRAIN_METER,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _common(p)
    add_splits(p, None, help="splits to record on")
    p.add_argument(
        "--backbone", help="encoder:tiny | encoder:minilm | encoder:<path> | causal:tiny | causal:<name-or-path> (default: %(default)s)"
    )
    p.add_argument("--val-fraction", type=float, help="held-out share of trajectories (default: %(default)s)")
    p.add_argument("--epochs", type=positive_int, help="encoder: epochs (default: %(default)s)")
    p.add_argument("--lr", type=float, help="encoder: head learning rate")
    p.add_argument("--backbone-lr", type=float, help="encoder: backbone learning rate (default 5e-4 tiny, 0 = frozen otherwise)")
    p.add_argument("--hidden", type=int, help="encoder head / tiny model width (default: %(default)s)")
    p.add_argument("--window", type=int, help="encoder: read only the last N action segments after the task (default: 0, all)")
    p.add_argument("--segment-tokens", type=int, help="encoder: tokens read per segment (default: %(default)s)")
    p.add_argument("--task-tokens", type=int, help="encoder: tokens of the task statement paired with every segment (default: %(default)s)")
    p.add_argument("--keep-reasoning", action="store_true", help="encoder: also read <think> blocks of agent messages")
    p.add_argument(
        "--targets",
        choices=("recorded", "expert", "gold", "gold-prefix"),
        help="encoder: labels from each trajectory's own outcome and TTG (recorded, the paper's eq. 1-2), from the "
        "expert's roll-out from every state (expert; recorded with plan lengths, ALFWorld), or from gold's remaining "
        "moves from every state (gold, replayed in branches after departures; gold-prefix, up to the first departure "
        "and the trajectory's own after it, no branches; BFCL, tau2) (default: %(default)s)",
    )
    p.add_argument(
        "--mark-task-words",
        action="store_true",
        help="encoder: mark the words of each action segment that the task statement names too",
    )
    p.add_argument(
        "--task-from-user",
        action="store_true",
        help="encoder: the task statement is the first user message, also when the agent spoke first (tau2)",
    )
    p.add_argument(
        "--request-per-turn",
        action="store_true",
        help="encoder: pair each action segment with the last user message before it (the request it answers) "
        "instead of the task statement, and mark that request's words (multi-turn tasks: BFCL)",
    )
    p.add_argument(
        "--requests-ahead",
        action="store_true",
        help="encoder: the head also reads how many of the task's user requests are still to come "
        "(the env's task turns, less the requests read; multi-turn tasks: BFCL)",
    )
    p.add_argument(
        "--compact-calls",
        action="store_true",
        help="encoder: read an agent's tool calls as 'name {arguments}' instead of the OpenAI call JSON (tau2)",
    )
    p.add_argument(
        "--call-tally",
        type=int,
        metavar="TOKENS",
        help="encoder: pair each action segment's statement with a tally of the tool calls made so far (names with "
        "counts), cut to this many tokens (0: none; default: %(default)s)",
    )
    p.add_argument(
        "--carry-gate",
        action="store_true",
        help="encoder: the head also says how likely the last action left the remaining work as it was, and carries "
        "the previous estimate over by that much (commands that change nothing then keep the estimate)",
    )
    p.add_argument(
        "--delta-weight",
        type=float,
        help="encoder: weight of a loss on the change of the estimate between consecutive states (default: %(default)s)",
    )
    p.add_argument(
        "--noop-siblings",
        type=int,
        help="encoder, expert targets, envs with a planner: at every 3rd state of each training trajectory, try N commands "
        "that do nothing (look, inventory, examine, help) in branches and train the meter to rank them against the step "
        "taken (0: none; default: %(default)s)",
    )
    p.add_argument(
        "--best-siblings",
        action="store_true",
        help="with --noop-siblings: also try the planner's next command from each such state, and train the meter to rank "
        "every no-op sibling against it",
    )
    p.add_argument(
        "--gold-siblings",
        type=int,
        help="encoder, --targets gold (BFCL, tau2): at every state of each training trajectory still on gold's path, try "
        "gold's move and N departures from it (the move skipped, a call dropped, added or given a wrong argument) in "
        "branches and train the meter to rank each departure against gold's move (0: none; default: %(default)s)",
    )
    p.add_argument(
        "--sibling-weight",
        type=float,
        help="encoder: weight of the loss on a no-op sibling's estimate against the step taken (default: %(default)s)",
    )
    p.add_argument(
        "--sibling-rank-weight",
        type=float,
        help="encoder: weight of a logistic loss on the order of a no-op sibling's estimate and the step taken's (default: %(default)s)",
    )
    p.add_argument(
        "--step-rank-weight",
        type=float,
        help="encoder: weight of a logistic loss on the order of consecutive states' estimates, wherever their "
        "targets differ (the sign of each step's predicted change) (default: %(default)s)",
    )
    p.add_argument(
        "--turn-limit",
        type=int,
        help="encoder: make the meter budget-aware, reading the turns left of episodes with this limit (0: blind; default: %(default)s)",
    )
    p.add_argument(
        "--ensemble",
        type=int,
        help="encoder: train N meters alike on the same examples, member k from seed SEED + k, and save them as one "
        "meter whose estimate is made from their mean outputs (1: a single meter; default: %(default)s)",
    )
    p.add_argument("--batch-size", type=int)
    p.add_argument("--max-examples", type=int, help="causal: subsample SFT prefixes")
    p.add_argument("--max-prompt-tokens", type=int, help="causal: meter prompt budget (default 384 tiny, 6144 otherwise)")
    p.add_argument("--sft-epochs", type=float)
    p.add_argument("--sft-lr", type=float, help="causal: SFT learning rate (default 1e-5; 2e-3 for tiny)")
    p.add_argument("--grpo-steps", type=int, help="causal: GRPO steps after SFT (default: %(default)s)")
    p.add_argument("--grpo-lr", type=float, help="causal: GRPO learning rate (default 3e-6; 2e-4 for tiny)")
    p.add_argument("--group-size", type=int)
    add_report_to(p, MeterTrainConfig)
    add_lora(p, MeterTrainConfig)
    add_out(p, "", help="output folder; the meter goes to OUT/meter")
    # splits and policies follow --env unless given (None here; see _following_the_env)
    p.set_defaults(**pipeline.TRAIN_DEFAULTS, func=_following_the_env(pipeline.train, "train-meter"))
    p.set_defaults(splits=None, policies=None)


def add_eval_meter(sub: argparse._SubParsersAction) -> None:
    """``ttg eval-meter``."""
    from ..training.meter import pipeline

    p = sub.add_parser(
        "eval-meter",
        help="measure a progress meter on unseen tasks",
        description=_EVAL_METER,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _common(p)
    p.add_argument("--meter", required=True, help="what load_meter accepts: a saved folder, hf:..., vllm:..., openai:URL#MODEL")
    add_splits(p, None, help="splits to record on")
    p.add_argument(
        "--labels",
        choices=["auto", "alfworld", "gold", "none"],
        help="step-quality labels. auto: those in the files (annotations, or ALFWorld plan lengths, which "
        "recording here adds), and for envs with a gold policy (BFCL, tau2) the gold path; alfworld: also "
        "replay unlabelled ALFWorld files with the planner (slow); gold: label unlabelled files from the "
        "gold path (a step that makes gold's move is good, the first that departs bad); none: no step quality",
    )
    p.add_argument(
        "--noop-every",
        type=int,
        help="envs with a planner: at every N-th recorded state, score every admissible command plus help and count "
        "how often a command that does nothing (help, look, inventory, examine, invalid) ranks above the planner's "
        "best (0: skip; default: %(default)s)",
    )
    p.add_argument(
        "--carry-noops",
        action="store_true",
        help="also report the step figures and the no-op check with the estimate carried across steps that leave the "
        "env's task state unchanged (ProgressMeterWrapper(carry_noops=True); envs that declare task_state_key only)",
    )
    p.add_argument("--failure-cost", type=float, help="C of eq. 7 (default: paper table 4 for --env)")
    add_out(p, "")
    p.set_defaults(**pipeline.EVAL_DEFAULTS, func=_following_the_env(pipeline.evaluate, "eval-meter"))
    p.set_defaults(splits=None, policies=None)
