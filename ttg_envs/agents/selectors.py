"""Action selectors: natural rollout (k=1), random-of-k, progress-meter guided best-of-k, and the
planner-guided (ALFWorld) and gold-guided (BFCL, tau2) best-of-k that are guidance's ceilings.

A selector is called with an env and returns the response to step it with; it never steps the env
itself, so only the caller's ``env.step`` advances the main env. Selectors are rollout policies
(``selector(env)``), and ``act_batch(envs)`` samples the candidates of many envs in one actor call.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

import gymnasium as gym
import numpy as np

from ..core import BranchDivergenceError, Generation
from ..wrappers.branching import Trial, offer_trial, try_actions
from ..wrappers.plan_length import plan_cost
from ..wrappers.progress_meter import score_actions
from .base import Actor


@dataclass
class Selection:
    """What a guided selector saw at its last decision.

    Attributes:
        candidates: the k sampled responses; distinct: indices of the first copy of each distinct text;
        deltas: predicted decrease in remaining work (``ttg_delta``) per distinct candidate;
        chosen: index into ``candidates`` of the selected response; branch_error: why no candidate
        could be tried (a replay branch that diverged, with no snapshot to fall back on): then every
        candidate counts as invalid (``-inf``) and the first is chosen.
    """

    candidates: list[Generation]
    distinct: list[int] = field(default_factory=list)
    deltas: list[float] = field(default_factory=list)
    chosen: int = 0
    branch_error: str | None = None


class NaturalSelector:
    """Natural rollout: one sample per step, taken as is."""

    k = 1

    def __init__(self, actor: Actor):
        self.actor = actor

    def __call__(self, env: gym.Env) -> Generation:
        """The response for ``env``."""
        return self.act_batch([env])[0]

    def act_batch(self, envs: Sequence[gym.Env]) -> list[Generation]:
        """One response per env from one batched actor call."""
        return [c[0] for c in self.actor.sample(envs, 1)]


class RandomSelector(NaturalSelector):
    """The control with guidance's budget: sample ``k`` candidates, keep one uniformly at random."""

    def __init__(self, actor: Actor, k: int = 4, seed: int | None = None):
        super().__init__(actor)
        if k < 1:
            raise ValueError(f"k must be >= 1, got {k}")
        self.k = k
        self.rng = np.random.default_rng(seed)

    def act_batch(self, envs: Sequence[gym.Env]) -> list[Generation]:
        """One uniformly chosen candidate of ``k`` per env."""
        return [c[int(self.rng.integers(len(c)))] for c in self.actor.sample(envs, self.k)]


class GuidedSelector(NaturalSelector):
    """Best-of-k by the progress meter (paper appendix E.5).

    Samples ``k`` candidates, trial-executes each distinct text once in its own branch of the env,
    scores the resulting histories in one meter call (through the env's ``ProgressMeterWrapper``)
    and returns the candidate with the largest predicted decrease in remaining work, ``ttg_delta``
    (ties: the first sampled). The chosen candidate's branch is offered to the env
    (:func:`~ttg_envs.wrappers.branching.offer_trial`): the caller's ``env.step`` with it takes the
    branch's state over instead of running the engine again, with the same results. The other
    branches are closed.

    Args:
        actor: proposes candidates; k: candidates per step;
        method: branching method (``auto``, ``snapshot`` or ``replay``, see ``TextEnv.branch``).

    Attributes:
        last: the :class:`Selection` of the latest decision (for logs and tests).
    """

    def __init__(self, actor: Actor, k: int = 4, method: str = "auto"):
        super().__init__(actor)
        if k < 1:
            raise ValueError(f"k must be >= 1, got {k}")
        self.k = k
        self.method = method
        self.last: Selection | None = None

    def act_batch(self, envs: Sequence[gym.Env]) -> list[Generation]:
        """The best of ``k`` candidates per env; all candidates come from one actor call."""
        return [self.choose(env, candidates) for env, candidates in zip(envs, self.actor.sample(envs, self.k))]

    def choose(self, env: gym.Env, candidates: Sequence[Generation | str]) -> Generation:
        """Trial-execute ``candidates`` from ``env``'s state and return the one the meter ranks best.

        Plain strings are accepted as the other selectors accept them (they become
        :class:`~ttg_envs.core.Generation` objects without token ids).
        """
        candidates = [c if isinstance(c, Generation) else Generation(str(c)) for c in candidates]
        selection = Selection(list(candidates))
        first: dict[str, int] = {}
        for i, candidate in enumerate(candidates):
            first.setdefault(candidate.text, i)
        selection.distinct = list(first.values())
        if len(selection.distinct) > 1:
            try:
                trials = self.trials(env, [candidates[i] for i in selection.distinct])
                selection.deltas = self.trial_scores(trials)
            except BranchDivergenceError as exc:
                selection.branch_error = str(exc)
                trials, selection.deltas = [], [float("-inf")] * len(selection.distinct)
            # np.argmax returns the first maximum: ties go to the earliest sampled candidate.
            best = int(np.argmax(selection.deltas))
            selection.chosen = selection.distinct[best]
            for i, trial in enumerate(trials):
                if i != best or not offer_trial(env, trial):
                    trial.env.close()
        self.last = selection
        return candidates[selection.chosen]

    def scores(self, env: gym.Env, candidates: Sequence[Generation]) -> list[float]:
        """How good each distinct candidate is (higher is better): the meter's ``ttg_delta`` after it."""
        trials = self.trials(env, candidates)
        scores = self.trial_scores(trials)
        for trial in trials:
            trial.env.close()
        return scores

    def trials(self, env: gym.Env, candidates: Sequence[Generation]) -> list[Trial]:
        """Each candidate stepped in its own branch of ``env``, the new states scored in one meter call."""
        return score_actions(env, candidates, self.method)

    def trial_scores(self, trials: Sequence[Trial]) -> list[float]:
        """The score of each trial (higher is better): the meter's ``ttg_delta``."""
        return [float(t.info["ttg_delta"]) for t in trials]


class PlannerSelector(GuidedSelector):
    """Best-of-k by the planner: the ceiling of guided best-of-k (a perfect meter's choice).

    Samples ``k`` candidates like :class:`GuidedSelector`, trial-executes each distinct text in
    its own branch and keeps the one after which the planner's plan is shortest (a won step
    first; ties: the first sampled). Needs an env whose base has ``expert_plan()`` (ALFWorld).
    ``last.deltas`` holds the negated plan lengths (higher is better), a won step ``+inf`` and a
    state with no plan ``-inf``.
    """

    def trials(self, env: gym.Env, candidates: Sequence[Generation]) -> list[Trial]:
        """Each candidate stepped in its own branch of ``env`` (no meter)."""
        if not hasattr(env.unwrapped, "expert_plan"):
            raise TypeError(f"planner-guided selection needs an env with expert_plan(), got {type(env.unwrapped).__name__}")
        return try_actions(env, candidates, self.method)

    def trial_scores(self, trials: Sequence[Trial]) -> list[float]:
        """Minus the planner's plan length after each trial (``+inf`` when it wins)."""
        return [-plan_cost(trial) for trial in trials]


class GoldSelector(GuidedSelector):
    """Best-of-k by the task's gold actions: the ceiling of guided best-of-k on envs with a gold
    policy (BFCL, tau2), where no planner exists.

    Samples ``k`` candidates like :class:`GuidedSelector`, trial-executes each distinct text in its
    own branch and keeps the one from which the fewest of gold's tokens still win: per trial, the
    cheapest suffix ``gold[j:]`` of the gold episode's moves whose replay in a branch of the trial's
    state wins (Qwen3 tokens, as ``TokenCounter`` counts them; a won step first, a lost one or one
    from which no suffix wins last; ties: the first sampled). That is the quantity the tool-env
    meters learn (``train-meter --targets gold``), known exactly, so it is a perfect such meter's
    choice. The gold episode is played once per task on a fresh env of the same spec.
    ``last.deltas`` holds minus those token counts, ``+inf`` for a won step, ``-inf`` for none.
    """

    def __init__(self, actor: Actor, k: int = 4, method: str = "auto"):
        super().__init__(actor, k, method)
        self._golds: dict[tuple, tuple[list[dict], list[int]] | None] = {}
        self._fresh: dict[tuple, gym.Env] = {}
        self._current: tuple[list[dict], list[int]] | None = None

    def trials(self, env: gym.Env, candidates: Sequence[Generation]) -> list[Trial]:
        """Each candidate stepped in its own branch of ``env`` (no meter), after the task's gold moves are known."""
        self._current = self._gold(env)
        return try_actions(env, candidates, self.method)

    def trial_scores(self, trials: Sequence[Trial]) -> list[float]:
        """Minus the tokens of the cheapest winning suffix of gold's moves after each trial (``+inf`` when it wins)."""
        from ..wrappers.gold_path import replay_wins

        scores = []
        for trial in trials:
            if trial.terminated or trial.truncated:
                scores.append(float("inf") if trial.info.get("success") else float("-inf"))
            elif self._current is None:  # gold does not win this task: no suffix can
                scores.append(float("-inf"))
            else:
                moves, to_go = self._current
                # Shortest suffix first: the first that wins is the cheapest.
                found = next((j for j in range(len(moves) - 1, -1, -1) if replay_wins(trial.env.unwrapped, moves[j:])), None)
                scores.append(float("-inf") if found is None else -float(to_go[found]))
        return scores

    def _gold(self, env: gym.Env) -> tuple[list[dict], list[int]] | None:
        """(gold's assistant messages, tokens to go before each) for ``env``'s task; None where gold does not win it."""
        from ..registry import ENV_SPECS
        from ..wrappers.gold_path import gold_actions, gold_to_go

        base = env.unwrapped
        spec = base.spec
        if spec is None or spec.id not in ENV_SPECS or "gold" not in ENV_SPECS[spec.id].policy_names:
            raise TypeError(f"gold-guided selection needs a registered env with a gold policy, got {getattr(spec, 'id', None)!r}")
        made = (spec.id, repr(sorted(spec.kwargs.items())))
        key = (*made, base.task["id"])
        if key not in self._golds:
            if made not in self._fresh:
                self._fresh[made] = gym.make(spec.id, **spec.kwargs)
            moves = gold_actions(self._fresh[made], base.task["id"], spec.id)
            self._golds[key] = None if moves is None else (moves, gold_to_go(moves))
        return self._golds[key]

    def close(self) -> None:
        """Close the fresh envs the gold episodes were played on."""
        for fresh in self._fresh.values():
            fresh.close()
        self._fresh.clear()
