"""Scripted tau2 policies: the gold agent, whole, without the task's last gold action, or with departures.

Pair them with the scripted user of the same name (``user="gold"`` / ``user="gold_drop_last"``;
``perturbed`` with ``user="gold"``): step ``i`` of the gold policy is move ``i`` of
:func:`~.gold.gold_plan`. ``perturbed:eps`` departs at a tool-call move with probability ``eps``:
it skips the call (the next move instead), makes an extra call (another of the task's gold calls)
first, or makes the call with a wrong argument (:mod:`ttg_envs.envs.perturb`); its text moves stay
gold, so the scripted user keeps its order.
"""

from __future__ import annotations

from ...tools import ToolCall, format_tool_calls
from ...tools.gold import GoldReplay
from ..perturb import Perturber
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


class PerturbedGoldPolicy(GoldReplay):
    """The gold agent with departures (see the module docstring); it keeps its place in the gold
    moves itself (a skip or a wrong call moves past a move, an extra call does not)."""

    def __init__(self, eps: float = 0.3, seed: int | None = None, style: str = "hermes"):
        super().__init__(style=style)
        self.perturber = Perturber(eps, seed)
        self.name = f"perturbed_{eps:g}"
        self.position = 0

    def __call__(self, env) -> str:
        """The next response for ``env``."""
        base = env.unwrapped
        if not isinstance(base, Tau2Env):
            raise TypeError(f"tau2 policies need a Tau2Env, got {type(base).__name__}")
        if base.elapsed_steps == 0:
            self.position = 0
        moves, _ = gold_plan(base.task_object)
        move = moves[min(self.position, len(moves) - 1)]
        kind = self.perturber.draw() if isinstance(move, ToolCall) else None
        if kind is None:
            self.position += 1
            return self._write(move)
        others = [m for m in moves if isinstance(m, ToolCall)]
        calls = self.perturber.depart(kind, [move], others)
        if not calls:  # skipped: the next move instead (the last move is text, so there is one)
            self.position += 2
            return self._write(moves[self.position - 1])
        if len(calls) > 1:  # an extra call before the gold one, which stays next
            return self._write(calls[1])
        self.position += 1
        return self._write(calls[0])

    def _write(self, move) -> str:
        return format_tool_calls([move], self.style) if isinstance(move, ToolCall) else move


#: Scripted policies by name, as ``ttg rollout --policies`` names them.
POLICY_NAMES = ("gold", "gold_drop_last", "perturbed")


def make_policy(name: str, *, seed: int | None = None, style: str = "hermes", eps: float = 0.3):
    """Build a scripted tau2 policy by name (``gold``, ``gold_drop_last``, or ``perturbed`` with ``eps``,
    seeded by ``seed``; the first two are deterministic)."""
    if name not in POLICY_NAMES:
        raise ValueError(f"unknown tau2 policy {name!r}; choose from {POLICY_NAMES}")
    if name == "perturbed":
        return PerturbedGoldPolicy(eps=eps, seed=seed, style=style)
    return GoldPolicy(style=style, drop_last=name == "gold_drop_last")
