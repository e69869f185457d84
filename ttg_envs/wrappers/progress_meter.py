"""``ProgressMeterWrapper``: the meter's estimate, the step cost (eq. 7) and its change (eq. 8) in ``info``.

Every reset and step, the wrapper asks its meter about the new history (``env.unwrapped.messages``)
and writes ``ttg``, ``ttg_can_complete``, ``ttg_valid`` and ``ttg_cost``; every step also gets
``ttg_delta = c_t - c_{t+1}``. The state reached by the last action is never scored: its cost is
anchored to 0 on success and to C on failure or truncation (eq. 7), and ``ttg`` is then 0 or None.
An invalid meter answer counts as a failure prediction (cost C, ``ttg_valid`` False), so a
selector never prefers an unreadable branch; trainers check ``ttg_valid`` (paper Algorithm 1).
``carry_noops`` carries the estimate over steps that leave the task state unchanged (see the class).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from contextlib import closing
from typing import Any

import gymnasium as gym
import numpy as np

from .. import registry
from ..core import Generation
from ..credit import step_costs
from ..meters.base import Estimate, ProgressMeter, meter_history
from .branching import BranchableWrapper, Trial, find_wrapper, trial_branches, try_actions


def estimate_costs(estimates: Sequence[Estimate], failure_cost: float) -> np.ndarray:
    """c of eq. 7 for each estimate, through ``credit.step_costs`` (invalid answers cost C)."""
    can = [e.completable for e in estimates]
    remaining = [float(e.remaining_tokens) if e.completable else np.nan for e in estimates]
    return step_costs(can, remaining, False, failure_cost)[:-1]


def estimate_idle(meter: ProgressMeter, histories: Sequence[Any], idle: Sequence[int]) -> list[Estimate]:
    """The meter's estimates for ``histories`` as if ``idle[b]`` more turns had been spent after each:
    the same task state with fewer turns left (``meter.estimate_at_turns`` where the meter reads the
    turn limit, its plain estimates otherwise). What ``carry_noops`` carries."""
    fn = getattr(meter, "estimate_at_turns", None)
    if fn is not None and getattr(meter, "budget_aware", False):
        return fn(list(histories), list(idle))
    return meter.estimate(list(histories))


def _reads_turns(meter: ProgressMeter) -> bool:
    return getattr(meter, "budget_aware", False) and hasattr(meter, "estimate_at_turns")


def _score_pending(meter: ProgressMeter, pending: Sequence[dict[str, Any]]) -> list[Estimate]:
    """Estimates for deferred steps: new histories, and carried ones at their idle turns, one call each."""
    out: list[Any] = [None] * len(pending)
    for carried in (False, True):
        index = [i for i, p in enumerate(pending) if bool(p.get("idle")) == carried]
        if not index:
            continue
        histories = [pending[i]["history"] for i in index]
        found = estimate_idle(meter, histories, [pending[i]["idle"] for i in index]) if carried else meter.estimate(histories)
        for i, estimate in zip(index, found):
            out[i] = estimate
    return out


def anchored_cost(success: bool, failure_cost: float) -> float:
    """c_T of eq. 7: 0 after a success, C after a failure or truncation."""
    return float(step_costs([], [], success, failure_cost)[-1])


def default_failure_cost(env: gym.Env) -> float:
    """C for ``env`` from paper table 4, by its registered id (a remote env's: the served one; 16384 when unknown)."""
    served = getattr(getattr(env, "unwrapped", None), "served_env_id", None)
    spec = getattr(env, "spec", None) or getattr(env.unwrapped, "spec", None)
    return registry.failure_cost(served or getattr(spec, "id", None))


class ProgressMeterWrapper(BranchableWrapper):
    """Adds the meter's estimate and the DeltaTTG cost signal to ``info``.

    Args:
        env: the env (any stack over a ``TextEnv``); usually over a ``TokenCounter``.
        meter: a :class:`~ttg_envs.meters.base.ProgressMeter` (see ``load_meter``).
        failure_cost: C of eq. 7 (default: paper table 4 for the env, from its ``EnvRecord``).
        carry_noops: carry the estimate across steps that leave the env's ``task_state_key()``
            unchanged instead of asking the meter (see the module docstring); needs an env that
            declares its task state (``declares_task_state``; ALFWorld), else ``ValueError``.

    A budget-aware meter (one with ``budget_aware`` True, such as an encoder meter trained with a
    turn limit) is set to count turns left from this env's ``max_steps``. A meter that reads the task
    note (``reads_task_note`` True: an encoder meter trained with ``requests_ahead``) gets each
    history opened by the note of the task the env announced at reset (``info["task"]``: BFCL's
    request count, :func:`~ttg_envs.meters.base.with_task_note`); the env's transcript is unchanged.

    With ``carry_noops`` (off by default), on an env that declares its task state
    (``TextEnv.declares_task_state``, ALFWorld), a step that leaves ``task_state_key()`` unchanged is
    not read by the meter: the remaining work after it is the remaining work before it, so the
    estimate of the last history that changed the task state is carried (``ttg_carried`` True). A
    meter blind to the turn limit carries it as it was (v_{t+1} = v_t, ``ttg_delta`` 0, the meter not
    asked); a budget-aware one is asked about that history with the turns spent since taken off
    (:func:`estimate_idle`), so ``ttg_delta`` is only its price of one turn fewer and a no-op is
    compared with moves at the same turns left. This is the one place meter outputs become ``ttg`` /
    ``ttg_delta``, so the guided selector, the trainer's credit and ``ttg eval-meter`` all see it.

    Attributes:
        costs: c_0..c_t of the episode so far (the last one anchored once the episode ended).
        estimates: the meter's :class:`Estimate` for h_0..h_t (None for the anchored final state).

    Info: at reset ``ttg``, ``ttg_can_complete``, ``ttg_valid``, ``ttg_cost`` (c_0); every step
    the same for the new state plus ``ttg_delta``; with ``carry_noops`` also ``ttg_carried``.
    """

    def __init__(self, env: gym.Env, meter: ProgressMeter, failure_cost: float | None = None, carry_noops: bool = False):
        super().__init__(env)
        if carry_noops and not getattr(env.unwrapped, "declares_task_state", False):
            raise ValueError(
                f"carry_noops needs an env that declares its task state (task_state_key); {type(env.unwrapped).__name__} declares none"
            )
        self.meter = meter
        self.carry_noops = bool(carry_noops)
        self.failure_cost = float(failure_cost) if failure_cost is not None else default_failure_cost(env)
        # A budget-aware meter counts turns left from this env's limit.
        limit = getattr(env.unwrapped, "max_steps", None)
        if getattr(meter, "budget_aware", False) and limit is not None and meter.turn_limit != limit:
            meter.turn_limit = int(limit)
        self.costs: list[float] = []
        self.estimates: list[Estimate | None] = []
        #: The env's ``info["task"]`` of this episode (what a task note is made of).
        self.task: dict[str, Any] | None = None
        #: ``task_state_key()`` of h_0..h_t (kept with ``carry_noops`` only).
        self.task_keys: list[str | None] = []
        #: With ``carry_noops``: the last history that changed the task state, and the turns spent since.
        self._anchor: tuple[list[dict[str, Any]], int] = ([], 0)
        self._defer = False
        self._pending: dict[str, Any] | None = None

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        """Reset the env and score the first history (c_0)."""
        obs, info = self.env.reset(seed=seed, options=options)
        self.task = info.get("task")
        estimate = self.meter.estimate([self.history])[0]
        self.costs = [float(estimate_costs([estimate], self.failure_cost)[0])]
        self.estimates = [estimate]
        self.task_keys = [self._task_key()]
        self._anchor = (list(self.history), 0) if self.carry_noops else ([], 0)
        info.update(self._fields(estimate, self.costs[0]))
        return obs, info

    def step(self, action: str | Generation):
        """Step the env, then score the new history (or anchor it if the episode ended)."""
        obs, reward, terminated, truncated, info = self.env.step(action)
        key = self._task_key()
        if terminated or truncated:
            success = bool(info.get("success", False))
            self._record(None, anchored_cost(success, self.failure_cost), info, can_complete=success, key=key)
        elif self.carry_noops and key == self.task_keys[-1] and self.estimates[-1] is not None:
            anchor, idle = self._anchor[0], self._anchor[1] + 1
            self._anchor = (anchor, idle)
            if not _reads_turns(self.meter):  # the turns left do not matter to it: the estimate itself carries
                self._record(self.estimates[-1], None, info, key=key, carried=True)
            elif self._defer:
                self._pending = {"history": anchor, "idle": idle, "info": info, "key": key}
            else:
                self._record(estimate_idle(self.meter, [anchor], [idle])[0], None, info, key=key, carried=True)
        else:
            if self.carry_noops:
                self._anchor = (list(self.history), 0)
            if self._defer:
                # Messages are never changed once in the transcript: a copy of the list is a snapshot.
                self._pending = {"history": list(self.history), "info": info, "key": key}
            else:
                self._record(self.meter.estimate([self.history])[0], None, info, key=key)
        return obs, reward, terminated, truncated, info

    @property
    def history(self) -> list[dict[str, Any]]:
        """The current transcript h_t the meter reads (opened by the task note when the meter reads one)."""
        return meter_history(self.meter, self.env.unwrapped.messages, self.task)

    def try_actions(self, actions: Iterable[str | Generation], method: str = "auto") -> list[Trial]:
        """Each action stepped in its own branch, all new states scored in one meter call."""
        return score_actions(self, actions, method)

    def branch_onto(self, inner: gym.Env) -> ProgressMeterWrapper:
        """A copy around ``inner`` sharing the meter, with its own cost history."""
        clone = super().branch_onto(inner)
        clone.costs = list(self.costs)
        clone.estimates = list(self.estimates)
        clone.task_keys = list(self.task_keys)
        clone._defer = False
        clone._pending = None
        return clone

    # -------------------------------------------------------------- internals
    def _task_key(self) -> str | None:
        return self.env.unwrapped.task_state_key() if self.carry_noops else None

    def _record(
        self,
        estimate: Estimate | None,
        anchored: float | None,
        info: dict[str, Any],
        can_complete: bool = False,
        key: str | None = None,
        carried: bool = False,
    ) -> dict[str, Any]:
        cost = float(estimate_costs([estimate], self.failure_cost)[0]) if estimate is not None else float(anchored)
        fields = self._fields(estimate, cost, can_complete)
        fields["ttg_delta"] = self.costs[-1] - cost
        if self.carry_noops:
            fields["ttg_carried"] = carried
        self.costs.append(cost)
        self.estimates.append(estimate)
        self.task_keys.append(key)
        info.update(fields)
        return fields

    def _resolve(self, estimate: Estimate) -> dict[str, Any]:
        pending, self._pending = self._pending, None
        return self._record(estimate, None, pending["info"], key=pending.get("key"), carried=bool(pending.get("idle")))

    @staticmethod
    def _fields(estimate: Estimate | None, cost: float, can_complete: bool = False) -> dict[str, Any]:
        if estimate is None:  # the anchored final state
            return {"ttg": 0 if can_complete else None, "ttg_can_complete": can_complete, "ttg_valid": True, "ttg_cost": cost}
        return {
            "ttg": estimate.remaining_tokens if estimate.completable else None,
            "ttg_can_complete": estimate.completable,
            "ttg_valid": estimate.valid,
            "ttg_cost": cost,
        }


def find_meter_wrapper(env: gym.Env) -> ProgressMeterWrapper:
    """The outermost :class:`ProgressMeterWrapper` in a wrapper stack."""
    wrapper = find_wrapper(env, ProgressMeterWrapper)
    if wrapper is None:
        raise ValueError("the env stack has no ProgressMeterWrapper")
    return wrapper


def _has_meter_wrapper(env: gym.Env) -> bool:
    try:
        find_meter_wrapper(env)
    except ValueError:
        return False
    return True


def score_actions(env: gym.Env, actions: Iterable[str | Generation], method: str = "auto") -> list[Trial]:
    """Step each action in its own branch of ``env`` and score all new states in one meter call.

    ``env`` is any stack containing a :class:`ProgressMeterWrapper`; it is left untouched. Each
    returned :class:`Trial` holds the step's results, with the ``ttg_*`` fields in its ``info``,
    and its branch, which can be stepped on. Identical histories are scored once (the meter's
    in-batch dedup). A stack without the wrapper whose env writes the ``ttg_*`` fields itself (a
    ``RemoteEnv`` of a server with a meter) gets plain trials, each scored where it was stepped.
    """
    if not _has_meter_wrapper(env) and getattr(env.unwrapped, "served_env_id", None):
        trials = try_actions(env, actions, method)
        if all("ttg_delta" in t.info for t in trials):
            return trials
        raise ValueError("the env stack has no ProgressMeterWrapper and its server adds no meter fields (ttg serve --meter)")
    actions = list(actions)
    trials: list[Trial] = []
    waiting: list[tuple[ProgressMeterWrapper, Trial]] = []
    with closing(trial_branches(env, actions, method)) as children:
        for action, child in zip(actions, children):
            wrapper = find_meter_wrapper(child)
            wrapper._defer = True
            obs, reward, terminated, truncated, info = child.step(action)
            wrapper._defer = False
            trial = Trial(action, obs, reward, terminated, truncated, info, child)
            trials.append(trial)
            if wrapper._pending is not None:
                waiting.append((wrapper, trial))
    if waiting:
        meter = waiting[0][0].meter
        estimates = _score_pending(meter, [w._pending for w, _ in waiting])
        for (wrapper, trial), estimate in zip(waiting, estimates):
            # Outer wrappers may have copied the info dict: update the trial's too.
            trial.info.update(wrapper._resolve(estimate))
    return trials


def step_all(envs: Sequence[gym.Env], actions: Sequence[str | Generation]) -> list[tuple[Any, float, bool, bool, dict[str, Any]]]:
    """``env.step(action)`` for each pair, the new states of envs whose outermost wrapper is a
    :class:`ProgressMeterWrapper` scored in one meter call per meter (as :func:`score_actions` does).

    The results equal stepping one by one up to the meter's batching (padding may move its
    outputs by float rounding). A stack with wrappers above the meter wrapper is stepped as it is,
    since those wrappers may read the ``ttg_*`` fields of the step.
    """
    results: list[tuple[Any, float, bool, bool, dict[str, Any]]] = []
    waiting: dict[int, list[tuple[ProgressMeterWrapper, int]]] = {}
    for env, action in zip(envs, actions, strict=True):
        wrapper = env if isinstance(env, ProgressMeterWrapper) else None
        if wrapper is None:
            results.append(env.step(action))
            continue
        wrapper._defer = True
        try:
            results.append(env.step(action))
        finally:
            wrapper._defer = False
        if wrapper._pending is not None:
            waiting.setdefault(id(wrapper.meter), []).append((wrapper, len(results) - 1))
    for group in waiting.values():
        estimates = _score_pending(group[0][0].meter, [w._pending for w, _ in group])
        for (wrapper, index), estimate in zip(group, estimates):
            wrapper._resolve(estimate)
    return results
