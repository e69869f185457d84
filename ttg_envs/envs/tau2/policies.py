"""Scripted tau2 policies: the gold agent, whole or without the task's last gold action.

Pair them with the scripted user of the same name (``user="gold"`` / ``user="gold_drop_last"``):
step ``i`` of the policy is move ``i`` of :func:`~.gold.gold_plan`.
"""

from __future__ import annotations

from ...tools import ToolCall, format_tool_calls
from ...tools.gold import GoldReplay
from .env import Tau2Env
from .gold import gold_plan


class GoldPolicy(GoldReplay):
    """Plays the task's gold actions one tool call per step, then states the information to communicate."""

    def __call__(self, env) -> str:
        """The next response for ``env``."""
        base = env.unwrapped
        if not isinstance(base, Tau2Env):
            raise TypeError(f"tau2 policies need a Tau2Env, got {type(base).__name__}")
        moves, _ = gold_plan(base.task_object, self.drop_last)
        move = moves[min(base.elapsed_steps, len(moves) - 1)]
        return format_tool_calls([move], self.style) if isinstance(move, ToolCall) else move


#: Scripted policies by name, as ``ttg rollout --policies`` names them.
POLICY_NAMES = ("gold", "gold_drop_last")


def make_policy(name: str, *, seed: int | None = None, style: str = "hermes"):
    """Build a scripted tau2 policy by name; ``seed`` is unused (the policies are deterministic)."""
    if name not in POLICY_NAMES:
        raise ValueError(f"unknown tau2 policy {name!r}; choose from {POLICY_NAMES}")
    return GoldPolicy(style=style, drop_last=name == "gold_drop_last")
