"""Scripted tau2 policies: the gold agent, whole, without the task's last gold action, or with departures.

Pair them with the scripted user of the same name (``user="gold"`` / ``user="gold_drop_last"``;
``perturbed`` with ``user="gold"``): step ``i`` of the gold policy is move ``i`` of
:func:`~.gold.gold_plan`. ``perturbed:eps`` departs at a tool-call move with probability ``eps``:
it skips the call (the next move instead), makes an extra call (another of the task's gold calls)
first, or makes the call with a wrong argument (:mod:`ttg_envs.envs.perturb`); its text moves stay
gold, so the scripted user keeps its order.
"""

from __future__ import annotations

from ...tools import ToolCall, action_text, format_tool_calls
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
    moves itself (a skip or a wrong call moves past a move, an extra call does not).

    :meth:`sample` draws several candidates from the same place, as best-of-k selection needs, and
    the next call takes up the place after whichever of them the env made (read from its last
    assistant message); one call is a sample of one.
    """

    def __init__(self, eps: float = 0.3, seed: int | None = None, style: str = "hermes"):
        super().__init__(style=style)
        self.perturber = Perturber(eps, seed)
        self.name = f"perturbed_{eps:g}"
        self.position = 0
        #: (elapsed steps when drawn, candidate text -> the place after it) of the last sample of several.
        self._drawn: tuple[int, dict[str, int]] | None = None

    def __call__(self, env) -> str:
        """The next response for ``env``."""
        return self.sample(env, 1)[0]

    def sample(self, env, n: int = 1) -> list[str]:
        """``n`` responses for ``env``, each drawn from the same place in the gold moves."""
        base = env.unwrapped
        if not isinstance(base, Tau2Env):
            raise TypeError(f"tau2 policies need a Tau2Env, got {type(base).__name__}")
        self._take_up(base)
        moves, _ = gold_plan(base.task_object)
        start, texts, after = self.position, [], {}
        for _ in range(n):
            self.position = start
            texts.append(self._draw(moves))
            after.setdefault(texts[-1], self.position)
        self.position = after[texts[0]]  # what one call leaves
        self._drawn = (base.elapsed_steps, after) if len(after) > 1 else None
        return texts

    def _take_up(self, base: Tau2Env) -> None:
        """The place after the move the env made, when it was one of several drawn candidates."""
        if base.elapsed_steps == 0:
            self.position, self._drawn = 0, None
            return
        if self._drawn is None or self._drawn[0] != base.elapsed_steps - 1:
            return
        last = next((m for m in reversed(base.messages) if m.get("role") == "assistant"), None)
        made = action_text(last, self.style) if last is not None else None
        if made in self._drawn[1]:
            self.position = self._drawn[1][made]
        self._drawn = None

    def _draw(self, moves: list) -> str:
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
