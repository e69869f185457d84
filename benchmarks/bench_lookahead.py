"""Lookahead cost on every env: plain step, branch + first step, warm reset and a guided-4 step, in one run.

Per env, along the first steps of its scripted policy's episode (the expert; gold for BFCL and tau2,
with tau2's gold user), at each state:

- plain step: ``env.step(action)`` of the bare env;
- branch + first step: ``env.branch()`` and the same action stepped in the branch (its close apart);
- natural step: the action stepped through ``make_env``'s stack with a ``ProgressMeterWrapper``
  (a stack of its own on the same path, so its meter call meets no cache the trials filled);
- guided-4 step: ``GuidedSelector(k=4).choose`` over 4 distinct texts of that action (4 branch
  trials and one meter call over their histories; the branches are dropped, which closes them),
  then the chosen one stepped through a second such stack;
- reset (warm): ``reset`` of the same task again; reset + first step: that and the policy's first step.

Actions are what an LLM actor passes (``--actions generation``, the default): a
:class:`~ttg_envs.core.Generation` with the text's token ids, encoded before the clock starts (the
actor made them while generating), so ``TokenCounter`` counts ``len(token_ids)`` in every stack;
``--actions text`` passes plain strings, which each stack (and each trial) tokenises again.

The meter is ``ScriptedMeter`` (a constant answer, about free), so the guided-4 ratio is the env's
own cost of lookahead; ``--meter shipped`` uses the env's shipped meter instead (the tool envs get
AWM's, as ``registry`` says), whose call then weighs in both the natural and the guided step.
The last two columns are the time spent in the meter's ``estimate`` calls within the natural and
the guided-4 step (the guided step scores its four trials in one call). Ratios are to the natural
step, medians over the states and ``--rounds``. Each figure is printed
twice: one sample per state (one stack), and the least of ``--copies`` stacks that play the same
actions in lockstep (see :func:`measure`: on a loaded machine the longer steps wait for the CPU
more often than the short ones, and the least of a few equal steps leaves most of that out).

``--before TREE`` measures another checkout (e.g. ``/work/main``) too: this script runs in child
processes, one per tree and round, alternating, with ``PYTHONPATH`` set to the tree, so both sets of
figures come from one run on the same (loaded) machine.

Every sample is taken on two clocks at once: the wall, and this process's CPU time (no wait for a
busy CPU in it; none of AWM's app, which runs in its sandbox, so AWM's CPU figures leave most of its
step out). ``--clock wall`` or ``--clock cpu`` prints one clock's tables only (default: both).

Run: ``python benchmarks/bench_lookahead.py [--rounds 3] [--steps 4] [--copies 3] [--clock cpu] [--actions text] [--before /work/main] [--envs AWM tau2]``.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

#: name -> (env id, env kwargs, reset options, scripted policy)
ENVS = {
    "ALFWorld": ("ttg/ALFWorld-v0", {"split": "valid_seen"}, {"task_index": 0}, "expert"),
    "PaperSearchQA": ("ttg/PaperSearchQA-v0", {}, {"task_index": 0}, "expert"),
    "BFCL multi-turn": ("ttg/BFCL-v0", {"split": "multi_turn"}, {"task_index": 0}, "gold"),
    "AWM": ("ttg/AWM-v0", {}, {"task_id": "crm_1/0"}, "expert"),
    "tau2 (gold user)": ("ttg/Tau2-v0", {"domain": "retail", "user": "gold"}, {"task_index": 0}, "gold"),
}
FIELDS = (
    "plain step",
    "branch + first step",
    "branch close",
    "natural step",
    "guided-4 step",
    "natural: meter",
    "guided-4: meter",
    "reset (warm)",
    "reset + first step",
)


#: Every figure is taken on both clocks at once: wall time, and this process's CPU time (no wait
#: for a busy CPU in it, and none of another process's work: AWM's app runs in its sandbox).
CLOCKS = ("wall", "cpu")


class _Ms(tuple):
    """One sample (ms) on each of :data:`CLOCKS`; samples add clock by clock."""

    def __add__(self, other: tuple) -> _Ms:  # type: ignore[override]
        return _Ms(a + b for a, b in zip(self, other))


def _ms(fn) -> tuple[_Ms, object]:
    wall, cpu = time.perf_counter(), time.process_time()
    out = fn()
    return _Ms((1e3 * (time.perf_counter() - wall), 1e3 * (time.process_time() - cpu))), out


def _next_task(options: dict, i: int) -> dict:
    if "task_index" in options:
        return {"task_index": options["task_index"] + i}
    return options


class _TimedMeter:
    """A meter whose ``estimate`` calls add up their time in :attr:`spent` (the meter's share of a step)."""

    def __init__(self, meter) -> None:
        self.meter, self.spent = meter, _Ms((0.0, 0.0))

    def estimate(self, histories):
        ms, out = _ms(lambda: self.meter.estimate(histories))
        self.spent += ms
        return out

    def __getattr__(self, name: str):
        return getattr(self.meter, name)


def _meter(env_id: str, kind: str) -> _TimedMeter:
    if kind == "shipped":
        from ttg_envs.meters import load_meter

        return _TimedMeter(load_meter(env_id))
    from ttg_envs.meters.scripted import ScriptedMeter

    return _TimedMeter(ScriptedMeter(lambda history: (True, 100)))


def _with_meter(stack, step) -> tuple[_Ms, _Ms]:
    """``step()``'s time, and that of the meter calls in it.

    The meter first forgets what it cached and then scores the current history untimed, as the
    step before would have in an episode: a state is measured twice (the warm-up pass plays the
    first task again), and a shipped meter would otherwise meet the new histories in its cache.
    """
    from ttg_envs.wrappers.progress_meter import find_meter_wrapper

    meter = find_meter_wrapper(stack).meter
    if hasattr(meter.meter, "clear_cache"):
        meter.meter.clear_cache()
    meter.meter.estimate([stack.unwrapped.messages])
    meter.spent = _Ms((0.0, 0.0))
    return step(), meter.spent


def _actor_output(kind: str):
    """``text -> action``: the text itself, or a ``Generation`` with its token ids (what an LLM actor passes)."""
    if kind == "text":
        return lambda text: text
    from ttg_envs.core import Generation
    from ttg_envs.tokenization import load_tokenizer

    tokenizer = load_tokenizer(None)
    return lambda text: Generation(text, tuple(tokenizer.encode(text)))


def measure(
    name: str, steps: int, meter_kind: str, copies: int = 3, actions: str = "generation"
) -> dict[str, dict[str, dict[str, list[float]]]]:
    """One env's samples (ms, per clock of :data:`CLOCKS`) along the first ``steps`` non-final states of its policy's episode.

    Every timed step is a second visit of its transition: an untimed step in a branch goes first.
    ALFWorld caches successors per game, so a first visit costs more than any later one, whoever
    makes it; this way the plain step, the branch's step and the trials all meet warm caches, and the
    ratios show what branching adds.

    Each figure is taken on ``copies`` stacks that play the same actions in lockstep (the branch
    figures: that many branches): ``first`` holds the first copy's sample of each state (one sample,
    as a single stack gives it), ``best`` the least of the copies. On a loaded machine a step that
    runs longer than a scheduler slice waits for the CPU more often than a short one, which
    inflates the longer figure's median; the least of a few equal steps leaves most of that out.
    """
    import gymnasium as gym

    import ttg_envs  # noqa: F401
    from ttg_envs.agents import GuidedSelector
    from ttg_envs.registry import make_policy
    from ttg_envs.wrappers import make_env

    env_id, kwargs, options, policy_name = ENVS[name]
    plains = [gym.make(env_id, **kwargs).unwrapped for _ in range(copies)]
    plain = plains[0]
    metereds = [make_env(env_id, meter=_meter(env_id, meter_kind), **kwargs) for _ in range(copies)]
    # The natural condition's stacks, on the same path: their steps meet no meter cache the trials filled.
    naturals = [make_env(env_id, meter=_meter(env_id, meter_kind), **kwargs) for _ in range(copies)]
    policy = make_policy(env_id, policy_name, seed=0)
    selector = GuidedSelector(None, k=4)
    as_action = _actor_output(actions)
    out = {clock: {f: {"first": [], "best": []} for f in FIELDS} for clock in CLOCKS}
    done = out["wall"]["plain step"]["first"]  # the states measured so far

    def add(samples: dict[str, list[_Ms]]) -> None:
        for c, clock in enumerate(CLOCKS):
            for field, values in samples.items():
                out[clock][field]["first"].append(values[0][c])
                out[clock][field]["best"].append(min(v[c] for v in values))

    def guided(metered, text: str) -> _Ms:
        # Four distinct texts, each tried in its own branch (their token ids made before the clock starts).
        candidates = [as_action(text + " " * i) for i in range(4)]
        choose, chosen = _ms(lambda: selector.choose(metered, candidates))
        return choose + _ms(lambda: metered.step(chosen))[0]

    # The first pass loads and warms what every later call reuses; episodes that end before
    # ``steps`` states (PaperSearchQA's: a search, then the answer) go on with the next task.
    passes = [(True, options)] + [(False, _next_task(options, i)) for i in range(steps)]
    for warm_up, options in passes:
        if not warm_up and len(done) >= steps:
            break
        for env in (*plains, *metereds):
            env.reset(options=options)
        if not warm_up:
            resets, firsts = [], []
            for _ in range(copies):
                resets.append(_ms(lambda: plain.reset(options=options))[0])
                # An env may defer work to its first step (AWM before: the app's start): both together.
                first = policy(plain)
                first = as_action(getattr(first, "text", first))
                ms = _ms(lambda: plain.reset(options=options))[0]
                firsts.append(ms + _ms(lambda: plain.step(first))[0])
            add({"reset (warm)": resets, "reset + first step": firsts})
            plain.reset(options=options)
        for env in naturals:
            env.reset(options=options)
        for _ in range(1 if warm_up else steps - len(done)):
            action = policy(plain)
            text = getattr(action, "text", action)
            act = as_action(text)
            visit = plain.branch()  # the untimed first visit
            result = visit.step(text)
            visit.close()
            if result[2] or result[3]:
                break  # the final step (a verifier, tau2's evaluator) is not a step like the others
            samples: dict[str, list[_Ms]] = {f: [] for f in FIELDS if not f.startswith("reset")}
            for _ in range(copies):
                twin = plain.branch()
                ms, child = _ms(twin.branch)
                samples["branch + first step"].append(ms + _ms(lambda: child.step(act))[0])
                samples["branch close"].append(_ms(child.close)[0])
                twin.close()
            for env in plains:
                samples["plain step"].append(_ms(lambda: env.step(act))[0])
            for env in naturals:
                ms, meter_ms = _with_meter(env, lambda: _ms(lambda: env.step(act))[0])
                samples["natural step"].append(ms)
                samples["natural: meter"].append(meter_ms)
            for env in metereds:
                ms, meter_ms = _with_meter(env, lambda: guided(env, text))
                samples["guided-4 step"].append(ms)
                samples["guided-4: meter"].append(meter_ms)
            gc.collect()
            if not warm_up:
                add(samples)
    for env in (*plains, *metereds, *naturals):
        env.close()
    return out


def run_here(names: list[str], steps: int, meter_kind: str, copies: int, actions: str = "generation") -> dict:
    """Every env's samples in this process."""
    return {name: measure(name, steps, meter_kind, copies, actions) for name in names}


def _child(tree: str, names: list[str], steps: int, meter_kind: str, copies: int, actions: str) -> dict:
    env = {**os.environ, "PYTHONPATH": tree}
    argv = [sys.executable, __file__, "--json", "--steps", str(steps), "--meter", meter_kind, "--copies", str(copies)]
    argv += ["--actions", actions]
    argv += ["--envs", *names]
    done = subprocess.run(argv, env=env, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"{tree}: {done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def _merge(rounds: list[dict], kind: str, clock: str) -> dict[str, dict[str, float]]:
    merged: dict[str, dict[str, float]] = {}
    for name in rounds[0]:
        merged[name] = {}
        for field in FIELDS:
            samples = [x for r in rounds for x in r[name][clock][field][kind]]
            merged[name][field] = statistics.median(samples) if samples else float("nan")
    return merged


def _table(label: str, figures: dict[str, dict[str, float]]) -> None:
    print(f"\n{label}: ms (median), ratios to the natural step")
    print(
        f"{'env':18s} {'plain':>8s} {'br+1st':>8s} {'close':>7s} {'natural':>8s} {'guided-4':>9s} {'reset':>8s} {'rst+1st':>8s} | "
        f"{'br+1st/plain':>12s} {'guided/nat':>10s} | {'meter: nat':>10s} {'guided-4':>9s}"
    )
    for name, f in figures.items():
        print(
            f"{name:18s} {f['plain step']:8.2f} {f['branch + first step']:8.2f} {f['branch close']:7.2f} {f['natural step']:8.2f} "
            f"{f['guided-4 step']:9.1f} {f['reset (warm)']:8.1f} {f['reset + first step']:8.1f} | {f['branch + first step'] / f['plain step']:12.2f} "
            f"{f['guided-4 step'] / f['natural step']:10.2f} | {f['natural: meter']:10.2f} {f['guided-4: meter']:9.2f}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--envs", nargs="+", default=list(ENVS), choices=list(ENVS), metavar="ENV")
    parser.add_argument("--steps", type=int, default=4, help="states measured per env and round")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--meter", choices=("scripted", "shipped"), default="scripted")
    parser.add_argument("--before", metavar="TREE", help="also measure this checkout (interleaved child processes)")
    parser.add_argument("--copies", type=int, default=3, help="lockstep stacks (and branches) per figure; the table of the least of them")
    parser.add_argument(
        "--clock",
        choices=(*CLOCKS, "both"),
        default="both",
        help="the tables to print: wall time, this process's CPU time, or both (each taken in the same run)",
    )
    parser.add_argument(
        "--actions",
        choices=("generation", "text"),
        default="generation",
        help="what the stacks are stepped with: a Generation with token ids (an LLM actor's output) or plain text",
    )
    parser.add_argument("--json", action="store_true", help="print this process's samples as JSON (one round)")
    args = parser.parse_args()
    if args.json:
        print(json.dumps(run_here(args.envs, args.steps, args.meter, args.copies, args.actions)))
        return
    here = str(Path(__file__).resolve().parent.parent)
    trees = {"now": here, **({"before": args.before} if args.before else {})}
    rounds: dict[str, list[dict]] = {label: [] for label in trees}
    for _ in range(args.rounds):
        for label, tree in trees.items():
            rounds[label].append(_child(tree, args.envs, args.steps, args.meter, args.copies, args.actions))
    clocks = CLOCKS if args.clock == "both" else (args.clock,)
    for clock, kind in ((clock, kind) for clock in clocks for kind in ("first", "best")):
        what = "one sample per state" if kind == "first" else f"least of {args.copies} lockstep copies per state"
        figures = {label: _merge(r, kind, clock) for label, r in rounds.items()}
        print(f"\n=== {clock} clock, {what}")
        for label, f in figures.items():
            _table(f"{label} ({trees[label]})", f)
        if args.before:
            print("\nbefore / now (time ratios)")
            for name in args.envs:
                b, n = figures["before"][name], figures["now"][name]
                print(
                    f"{name:18s} "
                    + "  ".join(f"{k}: {b[k] / n[k]:.1f}x" for k in ("branch + first step", "guided-4 step", "reset + first step"))
                )


if __name__ == "__main__":
    main()
