"""Scripted PaperSearchQA policies: an oracle expert and an epsilon-noisy expert.

The expert is privileged (it reads the task's accepted answers), as ALFWorld's planner reads the
PDDL state: it searches the question once, then answers. The noisy expert replaces a step, with
probability ``eps``, by an off-topic search (another task's question) or, a quarter of the time, a
wrong answer (another task's answer), which gives trajectories of varied length and outcome.
"""

from __future__ import annotations

from ..noisy import EXPERT_POLICY_NAMES, NoisyPolicy, make_expert_policy
from .env import PaperSearchQAEnv


def _papersearchqa(env) -> PaperSearchQAEnv:
    base = env.unwrapped
    if not isinstance(base, PaperSearchQAEnv):
        raise TypeError(f"PaperSearchQA policies need a PaperSearchQAEnv, got {type(base).__name__}")
    return base


def search(query: str) -> str:
    """A short Search-R1 response that searches ``query``."""
    return f"<think>I need to look this up.</think>\n<search> {query} </search>"


def answer(text: str) -> str:
    """A short Search-R1 response that answers ``text``."""
    return f"<think>The passages answer the question.</think>\n<answer> {text} </answer>"


class ExpertPolicy:
    """Searches the question, then answers with the first accepted answer."""

    name = "expert"

    def __call__(self, env) -> str:
        """The next response for ``env``."""
        base = _papersearchqa(env)
        if not base._retrieved:
            return search(base.current_task.question)
        return answer(base.current_task.answers[0])


class NoisyExpertPolicy(NoisyPolicy):
    """The expert with probability ``1 - eps``; otherwise an off-topic search or a wrong answer."""

    expert = ExpertPolicy()

    def noise(self, env) -> str:
        """A search for another task's question, or (one time in four) another task's answer."""
        base = _papersearchqa(env)
        other = base.tasks[int(self.rng.integers(len(base.tasks)))]
        if self.rng.random() < 0.25:
            return answer(other.answers[0])
        return search(other.question)


#: Scripted policies by name, as ``ttg rollout --policies`` and ``scripted:<name>`` actors name them.
POLICY_NAMES = EXPERT_POLICY_NAMES


def make_policy(name: str, *, seed: int | None = None, eps: float = 0.3):
    """Build a scripted PaperSearchQA policy by name (``expert`` or ``noisy_expert``)."""
    return make_expert_policy(name, ExpertPolicy, NoisyExpertPolicy, "PaperSearchQA", seed=seed, eps=eps)
