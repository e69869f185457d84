"""``ttg demo``: record trajectories, train a meter, and compare natural, random-4 and guided-4 rollouts
(and, on envs with a planner, planner-4: the same candidates chosen by a perfect meter).

Offline and on a CPU by default: the bundled ALFWorld games, a small encoder meter trained on
scripted policies of different quality, and the scripted noisy expert at eps 0.75 as the actor (an
honest stand-in for a sampled LLM, not an LLM). :class:`DemoConfig` and :func:`run_demo` say
what each default is; flags swap in real actors and meters.
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, Sequence

from ..cli_args import DEFAULT_ENV

#: Scripted policies of different quality that the demo's meter learns from (``ttg train-meter`` syntax).
METER_POLICIES = ("expert", "noisy_expert:0.25", "noisy_expert:0.5", "noisy_expert:0.75", "noisy_expert:1")

#: Evaluation panels. ``development``: the tasks and seeds on which the demo's meter settings
#: (window, segment length, data size) were chosen; ``heldout`` (the default): other tasks of the
#: same splits and other seeds, never looked at while choosing, so its table is the honest one.
PANELS = {"development": {"tasks": 10, "seeds": (0, 1, 2)}, "heldout": {"tasks": 20, "seeds": (3, 4, 5)}}


@dataclass(frozen=True, kw_only=True)
class DemoConfig:
    """``ttg demo``'s settings (the flags of the same names); None takes the env's or the panel's default.

    Attributes:
        splits: evaluated splits (None: the env's evaluation splits).
        conditions: selection conditions (None: ``default_conditions``, planner-4 too where the env plans).
        actor: the actor spec (None: the env's default scripted actor).
        seeds, tasks: seeds and evaluated tasks per split (None: the panel's, :data:`PANELS`).
        meter: a meter to guide with instead of training one.
        meter_split, meter_tasks, epochs, meter_policies: the trained meter's split (None: the env's
            train split), tasks, epochs and scripted policies (None: :data:`METER_POLICIES`).
        meter_note: what the report says about a given meter (None: "meter given with --meter").

    >>> DemoConfig(env="ttg/PaperSearchQA-v0", tasks=4).panel
    'heldout'
    """

    env: str = DEFAULT_ENV
    env_kwargs: dict[str, Any] = field(default_factory=dict)
    splits: Sequence[str] | None = None
    conditions: Sequence[str] | None = None
    actor: str | None = None
    seeds: Sequence[int] | None = None
    workers: int = 2
    threads: int | None = None
    out: str = "runs/demo"
    meter: str | None = None
    tasks: int | None = None
    panel: str = "heldout"
    meter_split: str | None = None
    meter_tasks: int = 90
    epochs: int = 10
    meter_policies: Sequence[str] | None = None
    meter_note: str | None = None

    def resolved(self) -> DemoConfig:
        """A copy with the env's and the panel's defaults filled in."""
        from ..agents.conditions import default_conditions
        from ..registry import ENV_SPECS, default_actor, train_split

        spec = ENV_SPECS.get(self.env)
        panel = PANELS[self.panel]
        return replace(
            self,
            splits=list(self.splits or (spec.eval_splits if spec else ())),
            conditions=list(self.conditions) if self.conditions is not None else default_conditions(self.env),
            actor=self.actor or default_actor(self.env),
            seeds=list(self.seeds or panel["seeds"]),
            tasks=self.tasks or panel["tasks"],
            meter_split=(self.meter_split or train_split(self.env)) if self.meter is None else self.meter_split,
        )


def plan_tasks(
    env_id: str,
    env_kwargs: dict[str, Any],
    splits: Sequence[str],
    meter_split: str | None,
    eval_tasks: int,
    meter_tasks: int,
    panel: str = "development",
) -> tuple[str, tuple[int, ...], dict[str, tuple[int, ...]], str]:
    """(meter split, meter task indices, evaluated task indices per split, note).

    The meter trains on ``meter_tasks`` tasks spread over ``meter_split`` and each split evaluates
    ``eval_tasks`` tasks spread over it, so every task type appears in both (task lists are sorted
    by id, which groups types); with ``meter_split=None`` (a given meter) none is kept out for it.
    If ``meter_split`` is missing the meter trains on ``valid_seen``
    tasks, and the valid_seen evaluation spreads over the tasks the meter never saw. With
    ``panel="heldout"`` the tasks of the development panel (:data:`PANELS`) are left out too.
    """
    if panel not in PANELS:
        raise ValueError(f"unknown panel {panel!r}; expected one of {', '.join(PANELS)}")
    from ..runner import num_tasks, spread_indices

    def count(split: str) -> int:
        return num_tasks(env_id, {**env_kwargs, "split": split})

    if meter_split is None:  # a given meter: no task is kept out for training
        meter_indices: tuple[int, ...] = ()
        note = "no meter is trained"
    else:
        try:
            count(meter_split)
            note = f"the meter trains on {meter_tasks} tasks spread over {meter_split}"
        except (FileNotFoundError, ValueError) as exc:
            note = (
                f"split {meter_split!r} is unavailable ({exc}); the meter trains on {meter_tasks} valid_seen tasks, "
                "and the valid_seen evaluation uses other tasks"
            )
            meter_split = "valid_seen"
        meter_indices = spread_indices(count(meter_split), meter_tasks)
    trained = set(meter_indices)
    tasks = {}
    for split in splits:
        free = [i for i in range(count(split)) if split != meter_split or i not in trained]
        if panel == "heldout":
            development = {free[i] for i in spread_indices(len(free), PANELS["development"]["tasks"])}
            free = [i for i in free if i not in development]
        tasks[split] = tuple(free[i] for i in spread_indices(len(free), eval_tasks))
    return meter_split, meter_indices, tasks, note


def train_demo_meter(
    env_id: str,
    env_kwargs: dict[str, Any],
    split: str,
    meter_indices: Sequence[int],
    out: Path,
    *,
    seed: int,
    workers: int,
    epochs: int,
    policies: Sequence[str] = METER_POLICIES,
) -> Path:
    """``ttg train-meter``'s pipeline: record ``policies`` on ``split`` (TokenCounter counts), train an encoder meter.

    On envs with a planner the labels are the expert roll-out's from every state, the meter is
    budget-aware (it reads the turns left of the env's turn limit), it marks the task's words in
    action segments, it learns from two no-op siblings at every third state (commands that change
    nothing, tried in branches) and it learns the sign of each step's change (``step_rank_weight``):
    the shipped ALFWorld meter's recipe, chosen on a development panel of train tasks, see the README.
    One torch thread (the training default), so reruns give one meter.
    """
    from ..registry import ENV_SPECS, turn_limit
    from ..training.meter.pipeline import train_meter

    planner = env_id in ENV_SPECS and ENV_SPECS[env_id].planner
    limit = env_kwargs.get("max_steps") or turn_limit(env_id)

    return train_meter(
        out,
        env=env_id,
        env_kwargs=env_kwargs,
        split=split,
        tasks=meter_indices,
        policies=policies,
        backbone="encoder:tiny",
        epochs=epochs,
        seed=seed,
        workers=workers,
        targets="expert" if planner else "recorded",
        turn_limit=int(limit) if planner else 0,
        mark_task_words=planner,
        noop_siblings=2 if planner else 0,
        step_rank_weight=1.0 if planner else 0.0,
    )


def run_demo(config: DemoConfig) -> int:
    """The ``ttg demo`` pipeline: train a meter (unless ``config.meter``), evaluate, write demo.json/md/png.

    Offline and on a CPU by default:

    - tasks: the bundled ALFWorld games; the meter trains on 90 tasks spread over ``train`` and each
      valid split evaluates 20 tasks spread over it with seeds 3-5 (every task type appears), none of
      them the 10 tasks x seeds 0-2 on which the demo's settings were chosen (``--panel development``);
    - meter: a small encoder meter (``encoder:tiny``, full history) trained on trajectories of
      scripted policies of different quality, recorded through ``TokenCounter``; on envs with a
      planner its labels come from the expert's roll-out from every recorded state
      (``targets="expert"``), it reads the turns left (budget-aware) and the task's words are marked
      in its action segments;
    - actor: the scripted noisy expert at eps 0.75, an honest stand-in for a sampled LLM, not an LLM
      (the scripted expert's action with probability 0.25, a random admissible command otherwise).

    Flags swap in real actors and meters. If the meter split is missing the meter trains on
    ``valid_seen`` tasks that the evaluation does not use (said so on the console and in the report).
    """
    from .evaluate import evaluate
    from .report import guidance_wins, seed_summary, write_outputs

    start = time.perf_counter()
    config = config.resolved()
    out = Path(config.out)
    env_kwargs = config.env_kwargs
    timings: dict[str, float] = {}
    meter_split, meter_indices, tasks, note = plan_tasks(
        config.env, env_kwargs, config.splits, config.meter_split, config.tasks, config.meter_tasks, config.panel
    )
    print(f"evaluation panel: {config.panel} ({config.tasks} tasks per split, seeds {' '.join(map(str, config.seeds))})")
    meter = config.meter
    if meter is None:
        print(note)
        meter = str(
            train_demo_meter(
                config.env,
                env_kwargs,
                meter_split,
                meter_indices,
                out / "meter-train",
                seed=config.seeds[0],
                workers=config.workers,
                epochs=config.epochs,
                policies=config.meter_policies or METER_POLICIES,
            )
        )
        timings["meter_s"] = time.perf_counter() - start
    else:
        note = config.meter_note or "meter given with --meter"
    t0 = time.perf_counter()
    results = evaluate(
        config.env,
        config.splits,
        config.conditions,
        config.actor,
        seeds=config.seeds,
        meter=meter,
        workers=config.workers,
        env_kwargs=env_kwargs,
        tasks=tasks,
    )
    timings["evaluate_s"] = time.perf_counter() - t0
    rows = seed_summary(results, actor=config.actor)
    return write_outputs(
        out,
        "demo",
        results,
        rows,
        {**_report_config(config), "meter": meter, "meter_note": note},
        timings,
        per_type=False,
        checks=guidance_wins(rows),
        start=start,
        env_id=config.env,
    )


def _report_config(config: DemoConfig) -> dict[str, Any]:
    """The settings as demo.json records them: the command, then each setting (``env_kwargs`` as JSON text)."""
    settings = {k: v for k, v in asdict(config).items() if k != "meter_note"}
    return {"command": "demo", **settings, "env_kwargs": json.dumps(config.env_kwargs)}
