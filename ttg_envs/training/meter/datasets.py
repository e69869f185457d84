"""Token-to-Go supervision from recorded trajectories (paper eq. 1-2).

Trajectory files are the JSONL that ``TrajectoryRecorder`` writes (one episode per line, with
``messages``, ``success`` and ``ttg_labels``/``assistant_tokens`` from a ``TokenCounter``).
Annotated JSONL of the AgentProcessBench kind (``messages``, ``final_label``, ``step_labels``
keyed by the index of the labelled assistant message) reads too; its token counts come from a
tokenizer. Each trajectory of T actions gives the prefixes h_0..h_{T-1} (the history before each
action) and, optionally, the final state h_T, each labelled b = success and v = TTG (None when
the trajectory failed).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ...meters.answer import format_answer
from ...meters.prompt import message_text
from ...wrappers.recorder import read_trajectories
from ...wrappers.token_counter import token_to_go


@dataclass(frozen=True)
class Sibling:
    """Another action tried in a branch from state h_t of a trajectory (:mod:`.siblings`).

    Attributes:
        step: t, the trajectory's state the branch left from (before its action t).
        messages: h_t, the sibling's assistant message and what the env answered.
        expert_ttg: the expert roll-out's TTG from the sibling's new state (None where it would
            not finish in the turns left).
        kind: ``noop`` (a command that changes nothing), ``best`` (the planner's next command, or
            gold's next move in a tool env) or ``departure`` (a departure from gold's next move).
    """

    step: int
    messages: list[dict[str, Any]]
    expert_ttg: int | None
    kind: str = "noop"


@dataclass
class Trajectory:
    """One recorded episode, reduced to what meter training and evaluation read.

    Attributes:
        id: ``<file>:<line number>``, unique across the files loaded together.
        messages: the full transcript.
        actions: index in ``messages`` of each assistant message (one per decision).
        success: whether the episode succeeded (b of eq. 2).
        ttg: recorded Token-to-Go before each action and after the last (T+1 values, the last 0)
            for a successful episode; None for a failed one.
        policy: who acted (the recorder's ``metadata["policy"]``, else the file stem).
        task: the ``task`` dict (id, type, split) when recorded.
        step_labels: per-action step-quality labels (+1 good, -1 bad, 0 neutral) when annotated
            or when the record carries planner plan lengths (``plan_length`` in its infos).
        expert_ttg: per prefix h_0..h_T, the TTG of the expert's roll-out from that state (None
            where it would not finish in the turns left), when the record carries ``expert_ttg``
            in its infos (:class:`~ttg_envs.wrappers.PlanLength`); None otherwise.
        plan_lengths: per prefix h_0..h_T, the planner's plan length (None where it timed out),
            when the record carries ``plan_length`` in its infos; None otherwise.
        siblings: other actions tried in branches from its states, with their targets (filled by
            :func:`~ttg_envs.training.meter.siblings.add_noop_siblings` or
            :func:`~ttg_envs.training.meter.siblings.add_gold_siblings`; empty otherwise).
        gold_positions: per prefix h_0..h_T, how many of gold's moves are done (None where gold's
            remaining moves no longer win), filled with the gold-path labels of a tool env
            (:func:`~ttg_envs.training.meter.evaluation.label_gold_path`); None otherwise.
        turn_limit: the turn limit the episode was played at (the recorder's
            ``metadata["turn_limit"]``), which a budget-aware meter counts this trajectory's turns
            left from; None: the meter's own limit.
    """

    id: str
    messages: list[dict[str, Any]]
    actions: list[int]
    success: bool
    ttg: list[int] | None
    policy: str = ""
    task: dict[str, Any] = field(default_factory=dict)
    step_labels: list[int] | None = None
    expert_ttg: list[int | None] | None = None
    plan_lengths: list[int | None] | None = None
    siblings: list[Sibling] = field(default_factory=list)
    gold_positions: list[int | None] | None = None
    turn_limit: int | None = None

    @property
    def num_steps(self) -> int:
        """T, the number of actions."""
        return len(self.actions)

    def prefix(self, t: int) -> list[dict[str, Any]]:
        """h_t: the history before action t (``t == T`` gives the whole transcript)."""
        end = self.actions[t] if t < self.num_steps else len(self.messages)
        return self.messages[:end]

    def prefixes(self) -> list[list[dict[str, Any]]]:
        """h_0..h_T."""
        return [self.prefix(t) for t in range(self.num_steps + 1)]


@dataclass(frozen=True)
class MeterExample:
    """One supervised prefix: history, completion label b and TTG target v (eq. 2)."""

    history: list[dict[str, Any]]
    can_complete: bool
    ttg: int | None
    trajectory_id: str
    step: int
    policy: str = ""

    @property
    def answer(self) -> str:
        """The target answer text in the meter's format."""
        return format_answer(self.can_complete, self.ttg if self.can_complete else None)


def step_labels_from_plan_lengths(plan_lengths: Sequence[int | None]) -> list[int]:
    """+1 where the plan got shorter, -1 where longer, 0 where equal (T labels from T+1 lengths).

    A length of None (the planner ran out of its time limit there) labels its steps 0 (unknown).
    """
    known = np.array([p is not None for p in plan_lengths])
    p = np.array([0 if x is None else x for x in plan_lengths])
    return np.where(known[:-1] & known[1:], np.sign(p[:-1] - p[1:]), 0).astype(int).tolist()


def parse_trajectory(record: Mapping[str, Any], trajectory_id: str, *, policy: str = "", tokenizer: Any = None) -> Trajectory:
    """A :class:`Trajectory` from a recorder record or an annotated (AgentProcessBench) record."""
    messages = [dict(m) for m in record["messages"]]
    actions = [i for i, m in enumerate(messages) if m.get("role") == "assistant"]
    steps = record.get("num_steps")
    if steps is not None and len(actions) > int(steps):
        # The env's opening transcript holds assistant messages of its own (tau2's greeting, BFCL
        # live entries' earlier turns): the decisions are the last num_steps.
        actions = actions[len(actions) - int(steps) :]
    if "success" in record:
        success = bool(record["success"])
    elif "final_label" in record:
        success = float(record["final_label"]) > 0
    else:
        raise ValueError(f"{trajectory_id}: record has neither 'success' nor 'final_label'")
    ttg = None
    if success:
        counts = record.get("assistant_tokens")
        if record.get("ttg_labels") is not None:
            ttg = [int(v) for v in record["ttg_labels"]]
        elif counts is not None and None not in counts:
            ttg = token_to_go(counts)
        else:
            from ...tokenization import load_tokenizer

            tok = load_tokenizer(tokenizer)
            ttg = token_to_go([tok.count(message_text(messages[i])) for i in actions])
        if len(ttg) != len(actions):
            raise ValueError(f"{trajectory_id}: {len(ttg)} TTG labels for {len(actions)} assistant messages")
        ttg = ttg + [0]
    labels = record.get("step_labels")
    plan = None
    if "plan_length" in (record.get("reset_info") or {}) and all("plan_length" in s["info"] for s in record.get("steps", [])):
        plan = [record["reset_info"]["plan_length"]] + [s["info"]["plan_length"] for s in record["steps"]]
    if isinstance(labels, Mapping):  # AgentProcessBench: {message index: label}
        by_index = {int(k): int(np.sign(float(v))) for k, v in labels.items()}
        labels = [by_index.get(i, 0) for i in actions]
    elif labels is not None:
        labels = [int(np.sign(float(v))) for v in labels]
    elif plan is not None:
        # Recorded through PlanLength: good when the optimal plan got shorter.
        labels = step_labels_from_plan_lengths(plan)
    expert_ttg = None
    infos = [record.get("reset_info") or {}] + [s["info"] for s in record.get("steps", [])]
    if len(infos) == len(actions) + 1 and all("expert_ttg" in i for i in infos):
        expert_ttg = [None if i["expert_ttg"] is None else int(i["expert_ttg"]) for i in infos]
    meta = record.get("metadata") or {}
    return Trajectory(
        id=trajectory_id,
        messages=messages,
        actions=actions,
        success=success,
        ttg=ttg,
        policy=str(meta.get("policy") or record.get("data_source") or policy),
        task=dict(record.get("task") or {}),
        step_labels=labels,
        expert_ttg=expert_ttg,
        plan_lengths=None if plan is None or len(plan) != len(actions) + 1 else plan,
        turn_limit=None if meta.get("turn_limit") is None else int(meta["turn_limit"]),
    )


def load_trajectories(paths: Iterable[str | os.PathLike], *, tokenizer: Any = None) -> list[Trajectory]:
    """Every episode of the given trajectory files (one or more policies), in file order."""
    out = []
    for path in paths:
        path = Path(path)
        for n, record in enumerate(read_trajectories(path), 1):
            if not record.get("messages"):
                continue
            out.append(parse_trajectory(record, f"{path}:{n}", policy=path.stem, tokenizer=tokenizer))
    return out


def trajectory_examples(trajectory: Trajectory, *, include_terminal: bool = False) -> list[MeterExample]:
    """The supervised prefixes of one trajectory: h_0..h_{T-1}, and h_T if ``include_terminal``."""
    last = trajectory.num_steps + (1 if include_terminal else 0)
    return [
        MeterExample(
            history=trajectory.prefix(t),
            can_complete=trajectory.success,
            ttg=trajectory.ttg[t] if trajectory.ttg is not None else None,
            trajectory_id=trajectory.id,
            step=t,
            policy=trajectory.policy,
        )
        for t in range(last)
    ]


def build_examples(trajectories: Iterable[Trajectory], *, include_terminal: bool = False) -> list[MeterExample]:
    """All supervised prefixes of ``trajectories``, pooled."""
    return [e for traj in trajectories for e in trajectory_examples(traj, include_terminal=include_terminal)]


def split_trajectories(
    trajectories: Sequence[Trajectory], test_fraction: float, *, seed: int = 0, by: str = "trajectory"
) -> tuple[list[Trajectory], list[Trajectory]]:
    """A (train, test) split of whole trajectories, so no prefix of a test trajectory trains.

    ``by="task"`` keeps every trajectory of one task id on the same side (no task seen in both).
    """
    if not 0.0 <= test_fraction < 1.0:
        raise ValueError(f"test_fraction must be in [0, 1), got {test_fraction}")
    if by not in ("trajectory", "task"):
        raise ValueError(f"by must be 'trajectory' or 'task', got {by!r}")
    keys = [t.id if by == "trajectory" else str(t.task.get("id", t.id)) for t in trajectories]
    unique = sorted(set(keys))
    rng = np.random.default_rng(seed)
    n_test = round(test_fraction * len(unique))
    test_keys = set(rng.permutation(len(unique))[:n_test].tolist())
    test_ids = {unique[i] for i in test_keys}
    train = [t for t, k in zip(trajectories, keys) if k not in test_ids]
    test = [t for t, k in zip(trajectories, keys) if k in test_ids]
    return train, test
