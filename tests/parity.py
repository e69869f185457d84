"""A toy text env for trainer tests: a response wins when its length is a multiple of 3."""

from __future__ import annotations

import gymnasium as gym

from ttg_envs.core import ParsedAction, StepOutcome, TextEnv


class ParityEnv(TextEnv):
    """Succeeds when the response length is a multiple of 3: mixed outcomes and lengths from a random policy."""

    default_max_steps = 3
    tasks = 4
    opening = "Task {index}: say anything."

    @property
    def num_tasks(self) -> int:
        return self.tasks

    def _task_info(self, index):
        return {"id": f"parity-{index}", "type": "parity", "split": "train"}

    def _start(self, index):
        return self.opening.format(index=index), {}

    def parse_action(self, text):
        return ParsedAction(command=text)

    def _apply(self, command):
        won = len(command) % 3 == 0
        return StepOutcome(observation="again", reward=float(won), terminated=won, success=won)

    def _state_key(self):
        return f"{self.task_index}:{self.elapsed_steps}"


def register_parity(env_id: str, **overrides) -> None:
    """Register ``env_id`` as a :class:`ParityEnv` with class attributes ``overrides`` (once per process)."""
    if env_id not in gym.registry:
        gym.register(env_id, entry_point=type("ParityEnv", (ParityEnv,), overrides))
