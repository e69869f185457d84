"""``PlanLength``: the planner's plan length from every state in ``info`` (envs with ``expert_plan()``, ALFWorld)."""

from __future__ import annotations

from typing import Any

from .branching import BranchableWrapper

__all__ = ["PlanLength", "plan_length"]


def plan_length(base: Any) -> int | None:
    """The planner's plan length from ``base``'s state (an env with ``expert_plan()``); None after a planner timeout."""
    plan = base.expert_plan()
    return None if getattr(base, "last_plan_timed_out", False) else len(plan)


class PlanLength(BranchableWrapper):
    """Adds ``plan_length`` (the planner's plan length from the new state, 0 once won, None when
    the planner ran out of its time limit) to ``info``.

    For envs whose base has ``expert_plan()`` (ALFWorld). Recording it with the trajectory gives
    exact step-quality labels without replaying the episode later.
    """

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        """Reset and add the first state's plan length."""
        obs, info = self.env.reset(seed=seed, options=options)
        info["plan_length"] = plan_length(self.env.unwrapped)
        return obs, info

    def step(self, action: Any):
        """Step and add the new state's plan length."""
        obs, reward, terminated, truncated, info = self.env.step(action)
        info["plan_length"] = 0 if info.get("success") else plan_length(self.env.unwrapped)
        return obs, reward, terminated, truncated, info
