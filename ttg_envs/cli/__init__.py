"""The ``ttg`` command.

``ttg rollout``: success rate and average steps of scripted policies on an env's splits.
``ttg generate-alfworld``: regenerate the bundled offline ALFWorld task set from its seed.
``ttg train-meter`` / ``ttg eval-meter``: train a progress meter on recorded trajectories / measure it.
``ttg train``: DeltaTTG (or baseline) actor training on one node, table 4 settings per env.
``ttg eval``: an actor under natural, random-of-k and meter-guided best-of-k selection, over seeds.
``ttg demo``: offline on a CPU: train a meter on scripted trajectories, then natural vs random-4 vs guided-4.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Sequence

from ..cli_args import add_env, add_limit, add_out, add_seed, add_seeds, add_splits, add_workers, positive_int


def _rollout(args: argparse.Namespace) -> int:
    from ..eval.rollout import rollout, rollout_table, summarize, write_report

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
    timeouts = sum(r.planner_timeouts for r in results)
    print(
        f"\n{len(results)} episodes in {elapsed:.1f} s (planner time limit hit {timeouts} times); "
        f"report in {out}/rollout.json and rollout.md"
    )
    return 0


def _eval(args: argparse.Namespace) -> int:
    from ..eval.evaluate import evaluate
    from ..eval.report import guidance_wins, seed_summary, write_outputs

    start = time.perf_counter()
    results = evaluate(
        args.env,
        args.splits,
        args.conditions,
        args.actor,
        seeds=args.seeds,
        meter=args.meter,
        workers=args.workers,
        env_kwargs=json.loads(args.env_kwargs),
        actor_kwargs=json.loads(args.actor_kwargs),
        limit=args.limit,
    )
    rows = seed_summary(results, actor=args.actor)
    config = {k: v for k, v in vars(args).items() if k != "func"}
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
    )


def _demo(args: argparse.Namespace) -> int:
    from ..eval.demo import run_demo

    return run_demo(args)


def _selection_args(p: argparse.ArgumentParser, *, actor: str, out: str) -> None:
    add_env(p)
    add_splits(p, ["valid_seen", "valid_unseen"])
    p.add_argument(
        "--conditions",
        nargs="+",
        default=["natural", "random-4", "guided-4"],
        help="natural, random-<k>, guided-<k> (default: %(default)s)",
    )
    p.add_argument(
        "--actor",
        default=actor,
        help="scripted:<policy>[:<eps>] | hf:<name-or-path> | vllm:<name-or-path> | openai:<base-url>#<model> (default: %(default)s)",
    )
    add_seeds(p, [0, 1, 2])
    add_workers(p)
    add_out(p, out)


def _generate_alfworld(argv: Sequence[str]) -> int:
    from ..envs.alfworld.generator import main

    return main(list(argv)) or 0


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of ``ttg``: every subcommand, its flags declared through :mod:`ttg_envs.cli_args`."""
    from .meter import add_eval_meter, add_train_meter
    from .train import add_train

    parser = argparse.ArgumentParser(prog="ttg", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)

    ro = sub.add_parser("rollout", help="success rate and average steps of scripted policies")
    add_env(ro)
    add_splits(ro, ["valid_seen", "valid_unseen"])
    ro.add_argument(
        "--policies",
        nargs="+",
        default=["expert", "noisy_expert"],
        help="scripted policies as name[:eps], e.g. noisy_expert:0.5 (default: %(default)s)",
    )
    ro.add_argument("--eps", type=float, default=0.3, help="random-action probability of a bare noisy_expert (default: %(default)s)")
    add_seed(ro)
    add_limit(ro)
    add_workers(ro)
    ro.add_argument("--per-type", action="store_true", help="also print one row per task type")
    ro.add_argument("--record", action="store_true", help="write trajectories (JSONL) next to the report")
    add_out(ro, "runs/rollout")
    ro.set_defaults(func=_rollout)

    ev = sub.add_parser("eval", help="an actor under natural, random-of-k and guided-of-k selection")
    _selection_args(ev, actor="scripted:noisy_expert:0.75", out="runs/eval")
    ev.add_argument("--meter", default=None, help="meter spec for guided conditions (see load_meter)")
    ev.add_argument("--actor-kwargs", default="{}", help="JSON dict for the actor's constructor (e.g. device, batch_size)")
    add_limit(ev)
    ev.add_argument("--per-type", action="store_true", help="also print one row per task type")
    ev.set_defaults(func=_eval)

    de = sub.add_parser("demo", help="offline CPU demo: train a meter, compare natural, random-4 and guided-4")
    _selection_args(de, actor="scripted:noisy_expert:0.75", out="runs/demo")
    de.set_defaults(seeds=None)  # the panel's seeds unless given
    de.add_argument("--meter", default=None, help="use this meter instead of training one")
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
    de.add_argument("--meter-split", default="train", help="split the meter trains on (default: %(default)s)")
    de.add_argument("--meter-tasks", type=positive_int, default=90, help="tasks the meter trains on (default: %(default)s)")
    de.add_argument("--epochs", type=positive_int, default=10, help="meter training epochs (default: %(default)s)")
    de.add_argument(
        "--meter-policies",
        nargs="+",
        default=None,
        help="scripted policies the meter learns from, as name[:eps] (default: expert, noisy_expert:0.25, "
        "noisy_expert:0.5, noisy_expert:1)",
    )
    de.set_defaults(func=_demo)

    add_train_meter(sub)
    add_eval_meter(sub)
    add_train(sub)
    # A build tool with its own parser (python -m ttg_envs.envs.alfworld.generator): its arguments pass through.
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
    return args.func(args)
