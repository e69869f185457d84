"""The ``ttg`` command.

``ttg rollout``: success rate and average steps of scripted policies on an env's splits.
``ttg generate-alfworld``: regenerate the bundled offline ALFWorld task set from its seed.
``ttg train-meter`` / ``ttg eval-meter``: train a progress meter on recorded trajectories / measure it.
``ttg train``: DeltaTTG (or baseline) actor training on one node, table 4 settings per env.
``ttg eval``: an actor under natural, random-of-k and meter-guided best-of-k selection, over seeds.
``ttg demo``: offline on a CPU: train a meter on scripted trajectories, then natural vs random-4 vs guided-4.
``ttg serve``: an env as an OpenEnv server (one env stack per session; forks for branching).
``ttg plot``: training curves of runs against the step and against actor tokens (paper figure 3).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Sequence

from ..cli_args import add_env, add_limit, add_out, add_seed, add_seeds, add_splits, add_tasks, add_workers, positive_int
from ..registry import ENV_SPECS, train_split


def _rollout(args: argparse.Namespace) -> int:
    from ..eval.rollout import rollout, rollout_table, summarize, write_report
    from ..runner import count_phrases, count_totals
    from .checks import resolve_selection

    resolve_selection(args)
    start = time.perf_counter()
    results = rollout(
        args.env,
        args.splits,
        args.policies,
        workers=args.workers,
        seed=args.seed,
        limit=args.limit,
        env_kwargs=json.loads(args.env_kwargs),
        eps=args.eps,
        record_dir=args.out if args.record else None,
    )
    elapsed = time.perf_counter() - start
    rows = summarize(results)
    table = rollout_table(rows, per_type=args.per_type)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    config = {k: v for k, v in vars(args).items() if k != "func"}
    write_report(out / "rollout.json", results, rows, {**config, "seconds": elapsed})
    (out / "rollout.md").write_text(table + "\n")
    print(table)
    totals = count_totals(results, args.env)
    limit = f" ({count_phrases(totals)})" if totals else ""
    print(f"\n{len(results)} episodes in {elapsed:.1f} s{limit}; report in {out}/rollout.json and rollout.md")
    return 0


def _eval(args: argparse.Namespace) -> int:
    from ..eval.evaluate import evaluate
    from ..eval.report import guidance_wins, seed_summary, write_outputs
    from .checks import FlagError, resolve_selection

    resolve_selection(args)
    if args.tasks is not None and args.limit is not None:
        raise FlagError("--tasks", "names the tasks itself; give --tasks or --limit, not both")
    env_id, env_kwargs = args.env, json.loads(args.env_kwargs)
    if args.tasks is not None and not args.env_url:  # an index past a split fails here, before any worker starts
        from ..runner import split_tasks

        for split in args.splits:
            try:
                split_tasks(env_id, {**env_kwargs, "split": split}, tasks=args.tasks)
            except ValueError as exc:
                raise FlagError("--tasks", str(exc)) from None
    apply_threads(args.threads)
    start = time.perf_counter()
    if args.env_url:  # the env runs on a `ttg serve` server; its --env-kwargs were set there
        env_id, env_kwargs = "ttg/Remote-v0", {**env_kwargs, "url": args.env_url, "env_id": args.env}
    results = evaluate(
        env_id,
        args.splits,
        args.conditions,
        args.actor,
        seeds=args.seeds,
        meter=args.meter,
        workers=args.workers,
        env_kwargs=env_kwargs,
        actor_kwargs=json.loads(args.actor_kwargs),
        meter_kwargs=json.loads(args.meter_kwargs),
        limit=args.limit,
        tasks=None if args.tasks is None else {split: args.tasks for split in args.splits},
        carry_noops=args.carry_noops,
    )
    rows = seed_summary(results, actor=args.actor)
    config = {k: v for k, v in vars(args).items() if k != "func"}
    if args.tasks is not None:  # played, so within the splits: a list the report can hold
        config["tasks"] = [int(i) for i in args.tasks]
    return write_outputs(
        Path(args.out),
        "eval",
        results,
        rows,
        config,
        {"evaluate_s": time.perf_counter() - start},
        per_type=args.per_type,
        checks=guidance_wins(rows),
        start=start,
        env_id=args.env,
    )


def _demo(args: argparse.Namespace) -> int:
    from ..eval.demo import DemoConfig, run_demo
    from .checks import check_policy, check_splits, json_flag, resolve_selection
    from .configs import from_args

    spec = ENV_SPECS.get(args.env)
    # The demo trains its own meter unless --meter is given, or the env has no split to train on.
    given = args.meter
    resolve_selection(args, meter_default=spec is not None and spec.train_split is None)
    if args.meter is not None and given is None:
        args.meter_note = f"{args.env} has no train split: guided by its shipped meter"
        print(args.meter_note)
    if args.meter is None:
        if args.meter_split is None:
            args.meter_split = train_split(args.env)
        check_splits(args.env, [args.meter_split], json_flag(args.env_kwargs, "--env-kwargs"), flag="--meter-split")
        if args.meter_policies is None and spec is not None and "noisy_expert" not in spec.policy_names:
            args.meter_policies = list(spec.policy_names)
        for policy in args.meter_policies or ():
            check_policy(args.env, policy, "--meter-policies")
    apply_threads(args.threads)
    return run_demo(from_args(DemoConfig, args, env_kwargs=json_flag(args.env_kwargs, "--env-kwargs")))


def apply_threads(threads: int | None) -> None:
    """Give torch ``threads`` CPU threads here and in the workers this process spawns (they inherit
    ``OMP_NUM_THREADS``, which torch reads at import); None changes nothing."""
    if not threads:
        return
    import os

    os.environ["OMP_NUM_THREADS"] = str(threads)
    if "torch" in sys.modules:
        sys.modules["torch"].set_num_threads(threads)


def _selection_args(p: argparse.ArgumentParser, *, out: str) -> None:
    add_env(p)
    add_splits(p, None)
    p.add_argument(
        "--conditions",
        nargs="+",
        default=["natural", "random-4", "guided-4"],
        help="natural, random-<k>, guided-<k>, planner-<k> (the same k candidates chosen by the planner's plan "
        "length: guided-k's ceiling; envs with a planner), gold-<k> (chosen by the gold tokens that still win: "
        "the ceiling on envs with a gold policy, BFCL and tau2) (default: %(default)s)",
    )
    p.add_argument(
        "--actor",
        default=None,
        help="scripted:<policy>[:<eps>] | hf:<name-or-path> | vllm:<name-or-path> | openai:<base-url>#<model> "
        "(default: the env's noisy expert at eps 0.75, scripted:noisy_expert:0.75; BFCL and tau2: scripted:gold)",
    )
    add_seeds(p, [0, 1, 2])
    add_workers(p)
    p.add_argument(
        "--threads",
        type=positive_int,
        default=None,
        help="torch CPU threads in each worker, for model actors and meters (default: torch's, one per core; "
        "on a busy shared machine 1 can be several times faster)",
    )
    add_out(p, out)


def _generate_alfworld(argv: Sequence[str]) -> int:
    from ..datagen.alfworld import main

    return main(list(argv)) or 0


#: What ``ttg --help`` says: plain text for a terminal (the module docstring is for the library's readers).
DESCRIPTION = """Gymnasium text environments for LLM agents, with a Token-to-Go progress meter (DeltaTTG).

commands:
  rollout             success rate and average steps of scripted policies on an env's splits
  eval                an actor under natural, random-of-k and meter-guided best-of-k selection, over seeds
  demo                offline on a CPU: train a meter on scripted trajectories, then natural vs random-4 vs guided-4
  train-meter         record trajectories and train a progress meter on them
  eval-meter          measure a progress meter on tasks it never saw
  train               DeltaTTG (or baseline) actor training on one node, paper table 4 settings per env
  plot                training curves of runs vs step and vs actor tokens (paper figure 3)
  generate-alfworld   regenerate the bundled offline ALFWorld tasks from their seed

Every command takes --env (default ttg/ALFWorld-v0); splits, meter and scripted actor follow the env
unless given. "ttg COMMAND --help" lists a command's flags; --debug shows a traceback instead of the
one-line error."""

_EVAL_DESCRIPTION = """Play an actor under natural, random-of-k and meter-guided best-of-k selection on the env's
splits over several seeds, and write eval.json, eval.md and eval.png (natural -> guided arrows).

With no flags: ALFWorld's valid_seen and valid_unseen splits, the scripted noisy expert at eps 0.75,
the meter that ships for the env (--meter ttg/ALFWorld-v0), seeds 0 1 2. --limit N takes N tasks of
each split, spread evenly; --tasks names them (the same indices in every split)."""

_DEMO_DESCRIPTION = """Offline on a CPU: record scripted trajectories, train a small encoder meter on them, then
compare natural, random-4 and guided-4 rollouts on a held-out panel and write demo.json, demo.md and
demo.png. --meter skips the training; an env with no train split (BFCL) uses its shipped meter."""

_ROLLOUT_DESCRIPTION = """Success rate, average steps and tokens of the env's scripted policies on its splits (the check
that the engine and the bundled tasks work); --record also writes the trajectories."""


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of ``ttg``: every subcommand, its flags declared through :mod:`ttg_envs.cli_args`."""
    from .meter import add_eval_meter, add_train_meter
    from .plot import add_plot
    from .serve import add_serve
    from .train import add_train

    parser = argparse.ArgumentParser(prog="ttg", description=DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)

    raw = argparse.RawDescriptionHelpFormatter
    ro = sub.add_parser(
        "rollout", help="success rate and average steps of scripted policies", description=_ROLLOUT_DESCRIPTION, formatter_class=raw
    )
    add_env(ro)
    add_splits(ro, None)
    ro.add_argument(
        "--policies",
        nargs="+",
        default=None,
        help="scripted policies as name[:eps], e.g. noisy_expert:0.5 (default: the env's, expert and noisy_expert; "
        "BFCL and tau2: gold, gold_drop_last and perturbed)",
    )
    ro.add_argument("--eps", type=float, default=0.3, help="random-action probability of a bare noisy_expert (default: %(default)s)")
    add_seed(ro)
    add_limit(ro)
    add_workers(ro)
    ro.add_argument("--per-type", action="store_true", help="also print one row per task type")
    ro.add_argument("--record", action="store_true", help="write trajectories (JSONL) next to the report")
    add_out(ro, "runs/rollout")
    ro.set_defaults(func=_rollout)

    ev = sub.add_parser(
        "eval", help="an actor under natural, random-of-k and guided-of-k selection", description=_EVAL_DESCRIPTION, formatter_class=raw
    )
    _selection_args(ev, out="runs/eval")
    ev.add_argument(
        "--meter",
        default=None,
        help="meter for the guided conditions: an env id (its shipped meter), a folder saved by ttg train-meter, "
        "hf:<model>, vllm:<model>, openai:<base-url>#<model> (default: the shipped meter of --env)",
    )
    ev.add_argument(
        "--actor-kwargs",
        default="{}",
        help='JSON dict for the actor\'s constructor, e.g. \'{"device": "cuda", "threads": 1, "batch_size": 4}\'',
    )
    ev.add_argument("--meter-kwargs", default="{}", help='JSON dict for load_meter, e.g. \'{"device": "cuda", "threads": 1}\'')
    ev.add_argument(
        "--env-url",
        default=None,
        help="play the env served by `ttg serve` at this URL (its split must be the one --splits names; --env-kwargs go to RemoteEnv)",
    )
    add_limit(ev)
    add_tasks(ev, "these task indices of every split (N, A-B or A,B,C) instead of --limit")
    ev.add_argument("--per-type", action="store_true", help="also print one row per task type")
    ev.add_argument(
        "--carry-noops",
        action="store_true",
        help="carry the meter's estimate across steps that leave the env's task state unchanged (ALFWorld: help, look, inventory, examine, invalid commands): such a step gets ttg_delta 0 instead of the meter's answer (envs that declare task_state_key only; default off)",
    )
    ev.set_defaults(func=_eval)

    # The demo's defaults are DemoConfig's (tests/test_cli.py checks it); importing ttg_envs.eval here would slow every command.
    de = sub.add_parser(
        "demo",
        help="offline CPU demo: train a meter, compare natural, random-4 and guided-4",
        description=_DEMO_DESCRIPTION,
        formatter_class=raw,
    )
    _selection_args(de, out="runs/demo")
    de.set_defaults(seeds=None, conditions=None)  # the panel's seeds; the ceiling too (planner-4 or gold-4)
    de.add_argument(
        "--meter",
        default=None,
        help="use this meter instead of training one (as ttg eval --meter; default: train one, or the shipped "
        "meter for an env with no train split, BFCL)",
    )
    # --limit: evaluated tasks per split, as in rollout and eval (--tasks N, its old spelling, still parses).
    de.add_argument("--limit", dest="tasks", type=positive_int, default=None, help="evaluated tasks per split (default: the panel's)")
    de.add_argument("--tasks", dest="tasks", type=positive_int, help=argparse.SUPPRESS)
    de.add_argument(
        "--panel",
        default="heldout",
        choices=("heldout", "development"),
        help="heldout: 20 tasks per split and seeds 3-5 never used to choose the demo's settings "
        "(default); development: the 10 tasks and seeds 0-2 they were chosen on",
    )
    de.add_argument("--meter-split", default=None, help="split the meter trains on (default: the env's train split)")
    de.add_argument("--meter-tasks", type=positive_int, default=90, help="tasks the meter trains on (default: %(default)s)")
    de.add_argument("--epochs", type=positive_int, default=10, help="meter training epochs (default: %(default)s)")
    de.add_argument(
        "--meter-policies",
        nargs="+",
        default=None,
        help="scripted policies the meter learns from, as name[:eps] (default: expert, noisy_expert:0.25, "
        "noisy_expert:0.5, noisy_expert:0.75, noisy_expert:1; tau2: gold, gold_drop_last, perturbed)",
    )
    de.set_defaults(func=_demo)

    add_train_meter(sub)
    add_eval_meter(sub)
    add_train(sub)
    add_plot(sub)
    add_serve(sub)
    # A build tool with its own parser (python -m ttg_envs.datagen.alfworld): its arguments pass through.
    sub.add_parser("generate-alfworld", help="regenerate the bundled ALFWorld tasks (see --help)", add_help=False)
    return parser


#: Exceptions that mean "the input was wrong": reported in one line with exit code 2 (``--debug``: traceback).
#: Path errors (a folder where a file goes, no permission...) and out-of-range task indices included.
USER_ERRORS: tuple[type[BaseException], ...] = (
    ValueError,
    FileNotFoundError,
    NotADirectoryError,
    IsADirectoryError,
    FileExistsError,
    PermissionError,
    IndexError,
    ImportError,
)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``ttg`` console script.

    ``ttg --version`` prints the version. An input error (a bad value, a path or model that is not
    found, a missing extra, an unknown env id) prints one ``ttg: error: ...`` line and returns 2;
    ``--debug`` anywhere on the line shows the traceback instead.
    """
    argv = list(sys.argv[1:] if argv is None else argv)
    debug = "--debug" in argv
    argv = [a for a in argv if a != "--debug"]
    if argv[:1] in (["--version"], ["-V"]):
        from importlib.metadata import PackageNotFoundError, version

        try:
            print(f"ttg-envs {version('ttg-envs')}")
        except PackageNotFoundError:
            print("ttg-envs (not installed as a package)")
        return 0
    if debug:
        return _dispatch(argv)
    try:
        return _dispatch(argv)
    except USER_ERRORS as exc:
        print(f"ttg: error: {_one_line(exc)}", file=sys.stderr)
        return 2
    except Exception as exc:  # gymnasium's unknown-id errors are not ValueErrors
        if type(exc).__module__.startswith("gymnasium"):
            print(f"ttg: error: {_one_line(exc)}", file=sys.stderr)
            return 2
        raise


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return (text[0] if text else type(exc).__name__) + ("  (run with --debug for the traceback)" if len(text) > 1 else "")


def _dispatch(argv: list[str]) -> int:
    if argv and argv[0] == "generate-alfworld":
        return _generate_alfworld(argv[1:])
    args = build_parser().parse_args(argv)
    from .checks import json_flag

    for flag in ("env_kwargs", "actor_kwargs", "meter_kwargs"):
        if isinstance(getattr(args, flag, None), str):
            json_flag(getattr(args, flag), "--" + flag.replace("_", "-"))
    return args.func(args)
