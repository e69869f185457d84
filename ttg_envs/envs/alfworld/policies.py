"""Scripted ALFWorld policies: the expert (known plans and the fast domain expert), an epsilon-noisy expert, and an
epsilon-idle expert that wastes turns on commands that do nothing for the task.

A policy is called with an env (any wrapper stack over ``ALFWorldEnv``) and returns the assistant
text for the next step, in the ReAct format the env parses. The reasoning text is the same for
planned and random actions, so a transcript does not reveal which policy wrote a step.
"""

from __future__ import annotations

from ..noisy import EXPERT_POLICY_NAMES, NoisyPolicy, make_expert_policy
from .env import ALFWorldEnv


def react(command: str) -> str:
    """Wrap a command as a short ReAct response."""
    return f"<think>Next I will {command}.</think><action>{command}</action>"


def _alfworld(env) -> ALFWorldEnv:
    base = env.unwrapped
    if not isinstance(base, ALFWorldEnv):
        raise TypeError(f"ALFWorld policies need an ALFWorldEnv, got {type(base).__name__}")
    return base


class ExpertPolicy:
    """Takes the first command of the scripted expert's plan from the current state
    (:meth:`ALFWorldEnv.policy_plan`: the known exact plan of the state, else the fast domain
    expert's; it never waits on a planner search); ``look`` when there is none."""

    name = "expert"

    @staticmethod
    def respond(command: str) -> str:
        """The response this policy writes for a planned ``command`` (``PlanLength`` counts its tokens)."""
        return react(command)

    def __call__(self, env) -> str:
        """The next response for ``env``."""
        base = _alfworld(env)
        plan = base.policy_plan()
        return self.respond(plan[0] if plan else "look")


class NoisyExpertPolicy(NoisyPolicy):
    """The expert with probability ``1 - eps``, a uniformly random admissible command otherwise."""

    expert = ExpertPolicy()

    def noise(self, env) -> str:
        """A uniformly random admissible command."""
        commands = _alfworld(env).admissible_commands
        return react(commands[int(self.rng.integers(len(commands)))])


class IdleExpertPolicy(NoisyPolicy):
    """The expert with probability ``1 - eps``, otherwise a command that does nothing for the task:
    ``help``, ``look``, ``inventory`` or an admissible ``examine`` (uniformly). Meter training data
    with many such steps teaches that they leave the remaining work unchanged."""

    expert = ExpertPolicy()

    def __init__(self, eps: float = 0.3, seed: int | None = None):
        super().__init__(eps, seed)
        self.name = f"idle_expert_{eps:g}"

    def noise(self, env) -> str:
        """A uniformly random command among help, look, inventory and the admissible examines."""
        commands = ["help", "look", "inventory"] + [c for c in _alfworld(env).admissible_commands if c.startswith("examine ")]
        return react(commands[int(self.rng.integers(len(commands)))])


#: Scripted policies by name, as ``ttg rollout --policies`` and ``scripted:<name>`` actors name them.
POLICY_NAMES = (*EXPERT_POLICY_NAMES, "idle_expert")


def make_policy(name: str, *, seed: int | None = None, eps: float = 0.3):
    """Build a scripted ALFWorld policy by name (``expert``, ``noisy_expert`` or ``idle_expert``)."""
    if name == "idle_expert":
        return IdleExpertPolicy(eps=eps, seed=seed)
    if name not in POLICY_NAMES:
        raise ValueError(f"unknown ALFWorld policy {name!r}; choose from {POLICY_NAMES}")
    return make_expert_policy(name, ExpertPolicy, NoisyExpertPolicy, "ALFWorld", seed=seed, eps=eps)
