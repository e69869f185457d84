"""Evaluating a meter: completion accuracy, token accuracy u, and step-quality accuracy (paper 5.1).

Step quality follows paper 5.1 / E.6: the meter scores the history before and after each action;
the action is judged beneficial when the cost (eq. 7, no terminal anchor) goes down, harmful when
it goes up, and compared with a step label (neutral steps excluded; an unchanged cost on a labelled
step counts as wrong, reported as a tie). Labels come from annotations (AgentProcessBench
``step_labels``); for ALFWorld from the planner (good when the optimal plan gets shorter, bad when
longer, neutral when equal); for the tool envs from the gold path (:func:`label_gold_path`,
:func:`gold_walk`), with gold's remaining moves as the plan: making gold's next move is good; a
departure is judged by replaying gold's remaining moves in branches: good when gold's moves after
the replaced one still win, neutral when gold's moves from it on still win or it was not needed,
bad when neither wins; steps after a bad one are neutral.
"""

from __future__ import annotations

import json
import re
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from ..._io import markdown_table
from ...meters.base import Estimate, ProgressMeter, meter_history
from ...tools import action_text
from ...wrappers.gold_path import gold_actions, gold_to_go, replay_wins
from ...wrappers.plan_length import plan_length
from ...wrappers.progress_meter import anchored_cost, estimate_costs, estimate_idle
from .datasets import Trajectory, step_labels_from_plan_lengths
from .grpo import token_accuracy


@dataclass
class MeterReport:
    """What :func:`evaluate_meter` measured (accuracies in [0, 1], None where nothing counted).

    ``step_quality_accuracy`` counts a tie (no predicted change, e.g. failure predicted before and
    after the step) as wrong; ``decided_step_accuracy`` is the accuracy over the other labelled steps.
    """

    prefixes: int = 0
    valid_rate: float | None = None
    completion_accuracy: float | None = None
    token_accuracy: float | None = None
    step_quality_accuracy: float | None = None
    decided_step_accuracy: float | None = None
    good_step_accuracy: float | None = None
    bad_step_accuracy: float | None = None
    balanced_step_accuracy: float | None = None
    steps: dict[str, int] = field(default_factory=dict)
    per_policy: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: :class:`NoOpReport` as a dict, when ``eval-meter`` ran the no-op check (envs with a planner).
    noop: dict[str, Any] | None = None
    #: Good / bad / balanced step accuracy with the last cost anchored by the outcome (eq. 7: 0
    #: after a win, C after a loss or truncation), as ``ProgressMeterWrapper`` writes it and the
    #: selector and DeltaTTG credit read it: the meter's estimate decides every step but the
    #: last, which the env's outcome decides. The fields above are the meter's own (paper 5.1, no anchor).
    anchored_good_step_accuracy: float | None = None
    anchored_bad_step_accuracy: float | None = None
    anchored_balanced_step_accuracy: float | None = None
    #: With ``eval-meter --carry-noops``: this report's step figures (its scalar fields and
    #: ``steps``) with the estimate carried across steps that left the task state unchanged.
    carried: dict[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        """A JSON-able dict."""
        return asdict(self)


def alfworld_plan_lengths(trajectory: Trajectory, env: Any) -> list[int]:
    """Length of the planner's plan before each action and after the last, by replaying the actions.

    ``env`` is an ALFWorld env (any wrapper stack) whose task list contains the trajectory's task.
    A won state has plan length 0; None where the planner ran out of its time limit.
    """
    base = env.unwrapped
    base.reset(seed=0, options={"task_id": trajectory.task["id"]})
    lengths = [plan_length(base)]
    for i in trajectory.actions:
        _, _, terminated, _, info = base.step(trajectory.messages[i]["content"])
        lengths.append(0 if info.get("success") else plan_length(base))
        if terminated:
            break
    if len(lengths) != trajectory.num_steps + 1:
        raise ValueError(f"{trajectory.id}: replay ended after {len(lengths) - 1} of {trajectory.num_steps} actions")
    return lengths


def label_alfworld(trajectories: Iterable[Trajectory], env_kwargs: dict[str, Any] | None = None, progress: bool = True) -> None:
    """Fill ``step_labels`` of ALFWorld trajectories by replaying them with the planner (one env per split).

    Slow (a planner call per state, a game load per task); trajectories recorded through
    :class:`PlanLength` already carry their labels.
    """
    import gymnasium as gym

    import ttg_envs  # noqa: F401  (registers the ids)

    from ...bars import progress_bar

    envs: dict[str, Any] = {}
    try:
        # Sorted by task so each game loads once (loading costs far more than replaying).
        ordered = sorted(trajectories, key=lambda t: (t.task.get("split", "train"), str(t.task.get("id"))))
        for traj in progress_bar(ordered, desc="plan labels", disable=not progress):
            split = traj.task.get("split", "train")
            if split not in envs:
                envs[split] = gym.make("ttg/ALFWorld-v0", **{"split": split, **(env_kwargs or {})})
            traj.step_labels = step_labels_from_plan_lengths(alfworld_plan_lengths(traj, envs[split]))
    finally:
        for env in envs.values():
            env.close()


_REASONING = re.compile(r"<think>.*?</think>", re.DOTALL)


def _move(message: dict[str, Any]) -> tuple[str, tuple[tuple[str, str], ...]]:
    """What an assistant message does, for comparing moves: its text without reasoning and its calls
    (name and arguments; the ids the env assigns left out)."""
    calls = tuple(
        (c["function"]["name"], json.dumps(json.loads(c["function"]["arguments"] or "{}"), sort_keys=True))
        for c in message.get("tool_calls") or ()
    )
    return _REASONING.sub("", str(message.get("content") or "")).strip(), calls


def gold_walk(
    trajectory: Trajectory, gold: Sequence[dict[str, Any]], wins_after: Callable[[int, int], bool] | None = None
) -> tuple[list[int | None], list[int]]:
    """Walk ``trajectory`` along ``gold`` (the gold policy's assistant messages on the same task):
    per prefix h_0..h_T the number ``k`` of gold's moves done (replaying ``gold[k:]`` from that state
    wins; None where gold's moves no longer win from it), and per action its step label.

    An action that makes gold's next move ``gold[k]`` goes to ``k + 1`` (the state that winning
    replay reaches) and is good. Another action (a departure) goes to ``k + 1`` when
    ``wins_after(t, k + 1)`` (it did gold's move ``k``, e.g. gold's calls plus a harmless extra one:
    good; or move ``k`` was not needed, when ``wins_after(t - 1, k + 1)``, from the state before:
    neutral), else stays at ``k`` when ``wins_after(t, k)`` (nothing gained, nothing lost: neutral),
    else goes to None (bad); None stays None and its steps are neutral. ``wins_after(t, k)``:
    whether replaying ``gold[k:]`` after action ``t`` (``t = -1``: from the reset state) wins
    (:func:`label_gold_path` replays it in a branch of the engine); without it every departure is bad.
    """
    positions: list[int | None] = [0]
    labels: list[int] = []
    for t, i in enumerate(trajectory.actions):
        k = positions[-1]
        if k is None:
            after, label = None, 0
        elif k < len(gold) and _move(trajectory.messages[i]) == _move(gold[k]):
            after, label = k + 1, 1
        elif wins_after is not None and k < len(gold) and wins_after(t - 1, k + 1) and wins_after(t, k + 1):
            after, label = k + 1, 0
        elif wins_after is not None and k < len(gold) and wins_after(t, k + 1):
            after, label = k + 1, 1
        elif wins_after is not None and wins_after(t, k):
            after, label = k, 0
        else:
            after, label = None, -1
        positions.append(after)
        labels.append(label)
    return positions, labels


def gold_path_labels(
    trajectory: Trajectory, gold: Sequence[dict[str, Any]], wins_after: Callable[[int, int], bool] | None = None
) -> list[int]:
    """Step labels of :func:`gold_walk`, the way ALFWorld's plan length labels a step: +1 for a step
    that does gold's next move (or its work), 0 for one that leaves as much to do, -1 for one after
    which gold's moves no longer win, and 0 once they do not. Without ``wins_after`` (no replays):
    +1 while each action makes the gold move, -1 at the first that departs, 0 after it.

    >>> call = lambda v: {"role": "assistant", "content": "", "tool_calls": [
    ...     {"id": "1", "function": {"name": "f", "arguments": json.dumps({"x": v})}}]}
    >>> gold = [call(1), call(2), {"role": "assistant", "content": "Done."}]
    >>> t = Trajectory("t", [call(1), call(3), call(2), gold[2]], [0, 1, 2, 3], False, None)
    >>> gold_path_labels(t, gold)
    [1, -1, 0, 0]
    >>> gold_path_labels(t, gold, wins_after=lambda t, k: k == 1)  # f(x=3) harmless: gold's f(x=2) still wins
    [1, 0, 1, 1]
    >>> gold_path_labels(t, gold, wins_after=lambda t, k: k == 2 and t == 1)  # f(x=3) did f(x=2)'s work
    [1, 1, -1, 0]
    >>> gold_path_labels(t, gold, wins_after=lambda t, k: False)  # f(x=3) broke the task
    [1, -1, 0, 0]
    """
    return gold_walk(trajectory, gold, wins_after)[1]


def _gold_targets(trajectory: Trajectory, gold: Sequence[dict[str, Any]] | None, positions: list[int | None]) -> list[int | None]:
    """``expert_ttg`` from :func:`gold_walk` (see :func:`label_gold_path`)."""
    to_go = gold_to_go(gold or ())
    own = trajectory.ttg if trajectory.success and trajectory.ttg is not None else [None] * len(positions)
    return [to_go[k] if k is not None else own[j] for j, k in enumerate(positions)]


class _Replays:
    """``wins_after`` of :func:`gold_walk` for one trajectory: an env that follows its actions (a
    branch of the task's reset state, which ``start()`` returns, made at the first question), and a
    branch of that per question."""

    def __init__(self, start: Callable[[], Any], trajectory: Trajectory, gold: Sequence[dict[str, Any]]):
        self.start, self.env, self.trajectory, self.gold, self.done = start, None, trajectory, gold, 0
        self.answers: dict[tuple[int, int], bool] = {}

    def __call__(self, t: int, k: int) -> bool:
        if (t, k) not in self.answers:
            if self.env is None:
                self.env = self.start().branch()
            if self.done > t + 1:
                raise ValueError(f"{self.trajectory.id}: asked about the state after action {t}, already past it")
            while self.done <= t and not self.env.done:  # the state after action t
                self.env.step(action_text(self.trajectory.messages[self.trajectory.actions[self.done]]))
                self.done += 1
            self.answers[(t, k)] = replay_wins(self.env, self.gold[k:])
        return self.answers[(t, k)]

    def close(self) -> None:
        """Close the env that follows the trajectory."""
        if self.env is not None:
            self.env.close()


def label_gold_path(
    trajectories: Iterable[Trajectory],
    env_id: str,
    env_kwargs: dict[str, Any] | None = None,
    progress: bool = True,
    targets: bool = False,
    replay: bool = True,
) -> None:
    """Fill ``step_labels`` of tool-env trajectories (BFCL, tau2: envs with a ``gold`` policy) from
    the gold path: one gold episode per task (:func:`gold_actions`), then :func:`gold_path_labels`,
    whose departures are judged by replaying gold's remaining moves in branches of the engine.
    A task where gold fails labels its steps 0.

    ``targets`` also fills ``expert_ttg`` (``train-meter --targets gold``): per prefix, the tokens
    of gold's moves still to do (:func:`gold_walk`; Qwen3 tokens, as ``TokenCounter`` counts
    them), else the trajectory's own TTG when it won, else None (failure). ``replay=False`` judges
    no departure (each is bad, the steps after it neutral; gold's tokens only up to it): no branches,
    for envs whose branches are slow (tau2, about a second each).
    """
    import gymnasium as gym

    import ttg_envs  # noqa: F401  (registers the ids)

    from ...bars import progress_bar

    envs: dict[str, Any] = {}
    golds: dict[tuple[str, str], list[dict[str, Any]] | None] = {}
    reset: set[tuple[str, str]] = set()  # the task whose reset state its split's env holds
    # Sorted by task, so each task's gold episode and reset state are made once, and the reset state
    # is branched for each of its trajectories' departures.
    ordered = sorted(trajectories, key=lambda t: (str(t.task.get("split", "train")), str(t.task["id"])))
    try:
        for traj in progress_bar(ordered, desc="gold labels", disable=not progress):
            split = str(traj.task.get("split", "train"))
            key = (split, str(traj.task["id"]))
            if split not in envs:
                envs[split] = gym.make(env_id, **{"split": split, **(env_kwargs or {})})
            if key not in golds:
                golds[key] = gold_actions(envs[split], traj.task["id"], env_id)
                reset.discard(key)
            gold = golds[key]
            if gold is None:
                traj.step_labels = [0] * traj.num_steps
                positions: list[int | None] = [None] * (traj.num_steps + 1)
            else:

                def start(env: Any = envs[split], key: tuple[str, str] = key, task_id: Any = traj.task["id"]) -> Any:
                    if key not in reset:
                        env.reset(seed=0, options={"task_id": task_id})
                        reset.add(key)
                    return env.unwrapped

                replays = _Replays(start, traj, gold) if replay else None
                try:
                    positions, traj.step_labels = gold_walk(traj, gold, replays)
                finally:
                    if replays is not None:
                        replays.close()
            traj.gold_positions = positions
            if targets:
                traj.expert_ttg = _gold_targets(traj, gold, positions)
    finally:
        for env in envs.values():
            env.close()


def task_state_unchanged(trajectory: Trajectory, env: Any) -> list[bool]:
    """For each action of ``trajectory``, whether it left ``env``'s ``task_state_key()`` as it was
    (by replaying it; ``env``: an env that declares its task state, whose tasks include the trajectory's)."""
    base = env.unwrapped
    base.reset(seed=0, options={"task_id": trajectory.task["id"]})
    keys = [base.task_state_key()]
    for i in trajectory.actions[: trajectory.num_steps]:
        _, _, terminated, truncated, _ = base.step(trajectory.messages[i]["content"])
        keys.append(base.task_state_key())
        if terminated or truncated:
            break
    return [a == b for a, b in zip(keys, keys[1:])]


def evaluate_meter(
    meter: ProgressMeter,
    trajectories: Sequence[Trajectory],
    *,
    failure_cost: float,
    batch_size: int = 64,
    progress: bool = True,
    carried: Sequence[Sequence[bool]] | None = None,
) -> MeterReport:
    """Score every prefix h_0..h_T of ``trajectories`` and measure the meter.

    - completion accuracy: predicted ``can_complete`` equals the trajectory's outcome, over the
      prefixes h_0..h_{T-1} (invalid answers count as wrong);
    - token accuracy: mean u over the prefixes of successful trajectories (0 when the meter
      predicts failure or answers invalidly);
    - step-quality accuracy: over trajectories with ``step_labels`` (see the module docstring).

    ``carried[i][t]`` True: action t of trajectory i left the task state unchanged, so the estimate
    after it is the carried one (:func:`~ttg_envs.wrappers.progress_meter.estimate_idle` of the last
    history that changed the task state: what ``ProgressMeterWrapper(carry_noops=True)`` writes).
    """
    from ...bars import progress_bar

    histories = [(ti, t, meter_history(meter, h, traj.task)) for ti, traj in enumerate(trajectories) for t, h in enumerate(traj.prefixes())]
    estimates: dict[tuple[int, int], Estimate] = {}
    for start in progress_bar(range(0, len(histories), batch_size), desc="meter eval", disable=not progress):
        chunk = histories[start : start + batch_size]
        for (ti, t, _), est in zip(chunk, meter.estimate([h for _, _, h in chunk])):
            estimates[(ti, t)] = est
    if carried is not None:  # carried states: the last history that changed the task state, turns spent since
        prefixes = {
            ti: [meter_history(meter, h, traj.task) for h in traj.prefixes()] for ti, traj in enumerate(trajectories) if any(carried[ti])
        }
        asks = []
        for ti in prefixes:
            anchor = 0
            for t, same in enumerate(carried[ti][: trajectories[ti].num_steps]):
                if same:
                    asks.append((ti, t + 1, anchor))
                else:
                    anchor = t + 1
        for start in range(0, len(asks), batch_size):
            chunk = asks[start : start + batch_size]
            found = estimate_idle(meter, [prefixes[ti][a] for ti, _, a in chunk], [t - a for _, t, a in chunk])
            for (ti, t, _), est in zip(chunk, found):
                estimates[(ti, t)] = est
    groups: dict[str, dict[str, list]] = defaultdict(lambda: defaultdict(list))
    for ti, traj in enumerate(trajectories):
        ests = [estimates[(ti, t)] for t in range(traj.num_steps + 1)]
        for key in ("all", traj.policy):
            g = groups[key]
            for t, est in enumerate(ests[:-1]):
                g["valid"].append(est.valid)
                g["completion"].append(est.valid and est.can_complete == traj.success)
                if traj.success:
                    u = token_accuracy(est.remaining_tokens, traj.ttg[t]) if est.completable else 0.0
                    g["u"].append(u)
            if traj.step_labels is not None:
                costs = np.asarray(estimate_costs(ests, failure_cost), dtype=float)
                anchored = costs.copy()  # the last cost the outcome's (eq. 7), as the wrapper writes it
                anchored[-1] = anchored_cost(traj.success, failure_cost)
                for label, d, a in zip(traj.step_labels, -np.diff(costs), -np.diff(anchored)):
                    if label != 0:
                        kind = "good" if label > 0 else "bad"
                        g[kind].append(bool(np.sign(d) == label))
                        g[f"{kind}_anchored"].append(bool(np.sign(a) == label))
                        g["ties"].append(bool(d == 0))
                        if d != 0:
                            g["decided"].append(bool(np.sign(d) == label))
                    else:
                        g["neutral"].append(True)
    summaries = {key: _summarize(g) for key, g in groups.items()}
    overall = summaries.pop("all", _summarize({}))
    report = MeterReport(**overall)
    report.per_policy = summaries
    return report


def _mean(values: list) -> float | None:
    return float(np.mean(values)) if values else None


def _balanced(good_acc: float | None, bad_acc: float | None) -> float | None:
    return (good_acc + bad_acc) / 2 if good_acc is not None and bad_acc is not None else None


def _summarize(g: dict[str, list]) -> dict[str, Any]:
    good, bad = g.get("good", []), g.get("bad", [])
    good_acc, bad_acc = _mean(good), _mean(bad)
    good_anchored, bad_anchored = _mean(g.get("good_anchored", [])), _mean(g.get("bad_anchored", []))
    return {
        "prefixes": len(g.get("valid", [])),
        "valid_rate": _mean(g.get("valid", [])),
        "completion_accuracy": _mean(g.get("completion", [])),
        "token_accuracy": _mean(g.get("u", [])),
        "step_quality_accuracy": _mean(good + bad),
        "decided_step_accuracy": _mean(g.get("decided", [])),
        "good_step_accuracy": good_acc,
        "bad_step_accuracy": bad_acc,
        "balanced_step_accuracy": _balanced(good_acc, bad_acc),
        "anchored_good_step_accuracy": good_anchored,
        "anchored_bad_step_accuracy": bad_anchored,
        "anchored_balanced_step_accuracy": _balanced(good_anchored, bad_anchored),
        "steps": {"good": len(good), "bad": len(bad), "neutral": len(g.get("neutral", [])), "ties": int(sum(g.get("ties", [])))},
    }


def markdown_report(reports: dict[str, MeterReport]) -> str:
    """A Markdown table with one row per named report (e.g. per split)."""

    def pct(v: float | None) -> str:
        return "-" if v is None else f"{100 * v:.1f}%"

    return markdown_table(
        (
            "set",
            "prefixes",
            "valid",
            "completion acc",
            "token acc u",
            "step-quality acc",
            "without ties",
            "good / bad acc",
            "balanced",
            "balanced, last step anchored",
            "steps good/bad/neutral (ties)",
            "no-op above best",
        ),
        (
            (
                name,
                r.prefixes,
                pct(r.valid_rate),
                pct(r.completion_accuracy),
                pct(r.token_accuracy),
                pct(r.step_quality_accuracy),
                pct(r.decided_step_accuracy),
                f"{pct(r.good_step_accuracy)} / {pct(r.bad_step_accuracy)}",
                pct(r.balanced_step_accuracy),
                pct(r.anchored_balanced_step_accuracy),
                f"{r.steps.get('good', 0)}/{r.steps.get('bad', 0)}/{r.steps.get('neutral', 0)} ({r.steps.get('ties', 0)})",
                "-"
                if not r.noop or r.noop["rate"] is None
                else f"{pct(r.noop['rate'])} of {r.noop['states']}"
                + (f" (carried {pct(r.noop['carried_rate'])})" if r.noop.get("carried_rate") is not None else ""),
            )
            for name, r in reports.items()
        ),
        right=11,
    )


#: Commands that do nothing for the task: the plan after them is the plan before them.
NOOP_VERBS = ("help", "look", "inventory", "examine")


@dataclass
class NoOpReport:
    """What :func:`noop_preference` measured over the states it scored.

    Attributes:
        states: states scored (each with every admissible command, plus ``help``).
        noop_above_best: states where some command that does nothing for the task (``help``,
            ``look``, ``inventory``, ``examine ...``, or one the env rejects) got a larger
            predicted progress ``ttg_delta`` than the best of the planner's best commands.
        noop_ties_best: states where the largest no-op delta equals the best command's.
        rate: ``noop_above_best / states``.
        by_command: how often each no-op verb was the one ranked above.
        carried_above_best, carried_ties_best, carried_rate: the same counts with the estimate
            carried across steps that leave the env's ``task_state_key()`` unchanged
            (``ProgressMeterWrapper(carry_noops=True)``: such a step's ``ttg_delta`` is 0, every
            other one's is the meter's); None where the env declares no task state.
        carried_by_best: of the carried failures, how many had each planner's best command, with
            its object numbers left out (``go to drawer``): which moves the carried meter reads as
            no progress.
    """

    states: int = 0
    noop_above_best: int = 0
    noop_ties_best: int = 0
    rate: float | None = None
    by_command: dict[str, int] = field(default_factory=dict)
    carried_above_best: int | None = None
    carried_ties_best: int | None = None
    carried_rate: float | None = None
    carried_by_best: dict[str, int] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-able dict."""
        return asdict(self)


def noop_preference(
    meter: ProgressMeter,
    env_id: str,
    trajectories: Sequence[Trajectory],
    *,
    respond: Any,
    failure_cost: float,
    env_kwargs: dict[str, Any] | None = None,
    every: int = 1,
    progress: bool = True,
    carry_noops: bool = False,
) -> NoOpReport:
    """How often guidance by ``meter`` would prefer doing nothing to the planner's best command.

    Walks each trajectory (ALFWorld: an env with ``expert_plan()``) and, at every ``every``-th
    state before its last action, trial-executes every admissible command plus ``help`` (each
    written as ``respond(command)``, the expert's format) in branches scored by ``meter``. The
    planner's best commands are those after which the plan is shortest (a won step first);
    no-ops are :data:`NOOP_VERBS` commands and invalid ones (ALFWorld's ``help`` and ``look`` set
    bookkeeping facts, so ``state_key`` changes even for them). With ``carry_noops`` (an env that
    declares its task state), the trials are also scored by ``ProgressMeterWrapper(carry_noops=True)``
    below the raw one, for the ``carried_*`` figures.
    """
    from collections import Counter

    from ...bars import progress_bar
    from ...wrappers import ProgressMeterWrapper, make_env

    report = NoOpReport()
    winners: Counter = Counter()
    by_split: dict[str, Any] = {}
    try:
        for traj in progress_bar(list(trajectories), desc="no-op check", disable=not progress):
            split = traj.task.get("split", "train")
            if split not in by_split:
                env = make_env(env_id, **{"split": split, **(env_kwargs or {})})
                if carry_noops:  # the carrying wrapper below the raw one: every trial is scored both ways
                    env = ProgressMeterWrapper(env, meter, failure_cost, carry_noops=True)
                by_split[split] = ProgressMeterWrapper(env, meter, failure_cost)
            env = by_split[split]
            _, info = env.reset(seed=0, options={"task_id": traj.task["id"]})
            for t, i in enumerate(traj.actions):
                if t % every == 0:
                    _noop_state(env, info, respond, report, winners)
                _, _, terminated, truncated, info = env.step(traj.messages[i]["content"])
                if terminated or truncated:
                    break
    finally:
        for env in by_split.values():
            env.close()
    report.rate = report.noop_above_best / report.states if report.states else None
    if report.carried_above_best is not None:
        report.carried_rate = report.carried_above_best / report.states if report.states else None
    report.by_command = dict(winners)
    return report


def _noop_state(env: Any, info: dict[str, Any], respond: Any, report: NoOpReport, winners: Any) -> None:
    """Score every admissible command plus ``help`` from ``env``'s state and count the result in
    ``report``; where a carrying meter wrapper is right below ``env``'s (raw) one, both ways."""
    from ...wrappers import ProgressMeterWrapper
    from ...wrappers.plan_length import plan_cost
    from ...wrappers.progress_meter import score_actions

    commands = list(dict.fromkeys([*info["admissible_commands"], "help"]))
    trials = score_actions(env, [respond(c) for c in commands])
    costs = [plan_cost(trial) for trial in trials]
    deltas = [float(trial.info["ttg_delta"]) for trial in trials]
    carrying = isinstance(env.env, ProgressMeterWrapper) and env.env.carry_noops
    best = min(costs)
    best_delta = max(d for d, c in zip(deltas, costs) if c == best)
    noop_deltas = [(d, command) for d, command, trial in zip(deltas, commands, trials) if _is_noop(command, trial)]
    if not noop_deltas:
        return
    top, command = max(noop_deltas)
    report.states += 1
    if top > best_delta:
        report.noop_above_best += 1
        winners[command.split()[0]] += 1
    elif top == best_delta:
        report.noop_ties_best += 1
    if carrying:  # the carrying wrapper's change (the raw one above it wrote the info's)
        carried = [trial.env.env.costs[-2] - trial.env.env.costs[-1] for trial in trials]
        best_carried = max(d for d, c in zip(carried, costs) if c == best)
        top_carried = max(d for d, command, trial in zip(carried, commands, trials) if _is_noop(command, trial))
        report.carried_above_best = (report.carried_above_best or 0) + (top_carried > best_carried)
        if top_carried > best_carried:
            move = next(c for c, d, cost in zip(commands, carried, costs) if cost == best and d == best_carried)
            kind = " ".join(word for word in move.split() if not word.isdigit())
            report.carried_by_best[kind] = report.carried_by_best.get(kind, 0) + 1
        report.carried_ties_best = (report.carried_ties_best or 0) + (top_carried == best_carried)


def _is_noop(command: str, trial: Any) -> bool:
    return command.split(" ")[0] in NOOP_VERBS or not trial.info.get("action_valid", True)
