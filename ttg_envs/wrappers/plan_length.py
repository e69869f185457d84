"""``PlanLength``: the planner's plan length from every state in ``info`` (envs with ``expert_plan()``, ALFWorld),
and optionally the Token-to-Go of the expert's roll-out from there."""

from __future__ import annotations

import math
from typing import Any, Callable

from .branching import BranchableWrapper, Trial, find_wrapper
from .token_counter import TokenCounter

__all__ = ["PlanLength", "plan_cost", "plan_length"]


def _plan(base: Any) -> list[str] | None:
    """The expert's plan from ``base``'s state; None after a planner timeout."""
    plan = base.expert_plan()
    return None if getattr(base, "last_plan_timed_out", False) else plan


def plan_length(base: Any) -> int | None:
    """The planner's plan length from ``base``'s state (an env with ``expert_plan()``); None after a planner timeout."""
    plan = _plan(base)
    return None if plan is None else len(plan)


def plan_cost(trial: Trial) -> float:
    """How far a trial step left the goal, lower is better: ``-inf`` when it won, the plan length
    after it, ``+inf`` when the planner found no plan or ran out of its time limit."""
    if trial.info.get("success"):
        return -math.inf
    length = plan_length(trial.env.unwrapped)
    return math.inf if not length else float(length)


class PlanLength(BranchableWrapper):
    """Adds ``plan_length`` (the planner's plan length from the new state, 0 once won, None when
    the planner ran out of its time limit) to ``info``.

    For envs whose base has ``expert_plan()`` (ALFWorld: the exact path, the planner with plan
    repair, cached by state; never the fast expert that the scripted policies use). Recording it
    with the trajectory gives exact step-quality labels without replaying the episode later.

    With ``respond`` (the expert's response text for a planned command, e.g. ALFWorld's
    ``react``), it also adds ``expert_ttg``: the assistant tokens the expert would generate from the
    new state to the goal if it took over (its plan's responses counted by the stack's
    ``TokenCounter``), 0 once won, None when the plan does not fit in the turns left (the expert's
    roll-out would be truncated) or the planner timed out. The scripted expert follows a state's
    exact plan once it is known (it is here: this wrapper asks at every state), command by
    command, so this equals the TTG a ``TokenCounter`` records when the expert plays on from that
    state (``tests/test_meter_targets.py`` checks it against real roll-outs): a roll-in by the
    recorded policy, a roll-out by the expert, without playing the roll-out.
    """

    def __init__(self, env: Any, respond: Callable[[str], str] | None = None):
        super().__init__(env)
        self.respond = respond
        self._counter = find_wrapper(env, TokenCounter) if respond is not None else None
        if respond is not None and self._counter is None:
            raise ValueError("PlanLength(respond=...) needs a TokenCounter below it to count the expert's tokens")

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        """Reset and add the first state's plan length."""
        obs, info = self.env.reset(seed=seed, options=options)
        self._annotate(info)
        return obs, info

    def step(self, action: Any):
        """Step and add the new state's plan length."""
        obs, reward, terminated, truncated, info = self.env.step(action)
        self._annotate(info)
        return obs, reward, terminated, truncated, info

    def branch_onto(self, inner: Any) -> PlanLength:
        """This wrapper over ``inner`` (a branch of the stack below)."""
        return PlanLength(inner, self.respond)

    def _annotate(self, info: dict[str, Any]) -> None:
        base = self.env.unwrapped
        if info.get("success"):
            info["plan_length"] = 0
            if self.respond is not None:
                info["expert_ttg"] = 0
            return
        plan = _plan(base)
        info["plan_length"] = None if plan is None else len(plan)
        if self.respond is not None:
            left = base.max_steps - base.elapsed_steps
            fits = bool(plan) and len(plan) <= left and not getattr(base, "done", False)
            info["expert_ttg"] = sum(self._counter.count(self.respond(c)) for c in plan) if fits else None
