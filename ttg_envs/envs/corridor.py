"""``ttg-toy/Corridor-v0``: a three-cell corridor, the smallest multi-turn task a trainer can be seen to learn.

Each turn the observation lists ``forward``, ``back`` and ``wait``; ``forward`` moves one cell on,
``back`` one cell back (not past the start), ``wait`` stays. Reaching cell 3 within 5 turns wins.
A uniformly random policy wins about one episode in six, an optimal one always, so a few trainer
steps on a CPU move success by far more than its seed noise (``tests/test_training_learns.py``,
``benchmarks/train_compare.py --env corridor``). Task ids only change the first observation's
text; ``corridor_meter`` is a scripted progress meter (remaining tokens fall with the distance).
Importing this module registers the id; the package itself does not (it is not a benchmark).
"""

from __future__ import annotations

import gymnasium as gym

from ..core import ParsedAction, StepOutcome, TextEnv

ENV_ID = "ttg-toy/Corridor-v0"
LENGTH = 3
TURNS = 5
COMMANDS = ("forward", "back", "wait")

__all__ = ["COMMANDS", "ENV_ID", "CorridorEnv", "corridor_meter", "corridor_texts"]


class CorridorEnv(TextEnv):
    """Reach cell 3 within 5 turns; tasks 0-99 are the train split, 100-199 held out."""

    default_max_steps = TURNS

    def __init__(self, *, max_steps: int | None = None, render_mode: str | None = None):
        super().__init__(max_steps=max_steps, render_mode=render_mode)
        self.position = 0

    @property
    def num_tasks(self) -> int:
        """200 corridors (ids 0-199)."""
        return 200

    def _task_info(self, index):
        return {"id": f"corridor-{index}", "type": "corridor", "split": "train" if index < 100 else "held_out"}

    def _start(self, index):
        self.position = 0
        return self._obs(f"You are at the start of corridor {index}. Reach its end."), {}

    @staticmethod
    def _obs(text: str) -> str:
        return f"{text}\n\nAdmissible actions: {', '.join(COMMANDS)}"

    def parse_action(self, text):
        """One of :data:`COMMANDS`, surrounding spaces ignored."""
        command = text.strip()
        if command in COMMANDS:
            return ParsedAction(command)
        return ParsedAction(None, error=f"unknown command {command[:40]!r}; answer one of {', '.join(COMMANDS)}")

    def _apply(self, command):
        self.position = max(0, self.position + {"forward": 1, "back": -1, "wait": 0}[command])
        won = self.position >= LENGTH
        return StepOutcome(observation=self._obs(f"You are at cell {self.position}."), reward=float(won), terminated=won, success=won)

    def _state_key(self):
        return str(self.position)

    def _snapshot(self):
        return self.position

    def _restore(self, snapshot):
        self.position = snapshot

    def _adopt(self, branch):
        self.position = branch.position
        return True


def corridor_meter(tokens_per_step: int = 2, *, budget_aware: bool = False):
    """A scripted meter: ``tokens_per_step`` x the cells left (read from the last observation).

    With ``budget_aware`` it also predicts failure (``can_complete`` False) once fewer turns are
    left than cells, as a meter that has seen truncated episodes would; without it the state
    before a truncation still looks completable and eq. 7's anchor C falls on the last action.
    """
    from ..meters import ScriptedMeter

    def estimate(history):
        text = history[-1]["content"] if history else ""
        cell = int(text.split("cell ")[1].split(".")[0]) if "cell " in text else 0
        if budget_aware:
            turns_left = TURNS - sum(1 for m in history if m.get("role") == "assistant")
            if LENGTH - cell > turns_left:
                return False, None
        return True, tokens_per_step * (LENGTH - cell)

    return ScriptedMeter(estimate)


def corridor_texts() -> list[str]:
    """Texts to train a tokenizer on (the observation forms and the commands)."""
    return [CorridorEnv._obs(f"You are at the start of corridor {i}. Reach its end. You are at cell {i % 4}.") for i in range(50)] + list(
        COMMANDS
    )


if ENV_ID not in gym.registry:
    gym.register(ENV_ID, entry_point=CorridorEnv)
