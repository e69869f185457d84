"""Branching a whole wrapper stack, and trying several candidate actions from one state.

``branch(env)`` branches the innermost :class:`~ttg_envs.core.TextEnv` (engine snapshot, or
replay checked with ``state_key``) and copies every wrapper above it onto the branch, so the
branch has the same wrappers and the same future as the original.
"""

from __future__ import annotations

import copy
from contextlib import closing
from dataclasses import dataclass
from typing import Any, Iterable, Iterator, Sequence

import gymnasium as gym

from ..core import Generation, TextEnv


def branch(env: gym.Env, method: str = "auto", base: TextEnv | None = None) -> gym.Env:
    """An independent copy of ``env`` (with all its wrappers) in the same state.

    Wrappers that keep per-episode state define ``branch_onto(inner)``; any other gymnasium
    wrapper is shallow-copied onto the branched inner env. ``base``: a branch of the innermost env
    made already (:meth:`TextEnv.start_trials`), to put the wrappers' copies around.
    """
    if isinstance(env, gym.Wrapper):
        inner = branch(env.env, method, base)
        hook = getattr(env, "branch_onto", None)
        if hook is not None:
            return hook(inner)
        clone = copy.copy(env)
        clone.env = inner
        return clone
    if base is not None:
        return base
    if isinstance(env, TextEnv) or callable(getattr(env, "branch", None)):  # a TextEnv, or a RemoteEnv (forks its session)
        return env.branch(method)
    raise TypeError(f"cannot branch {type(env).__name__}: the innermost env must be a ttg_envs TextEnv or RemoteEnv")


class BranchableWrapper(gym.Wrapper):
    """Base of ttg wrappers: ``branch()`` on the wrapper branches the whole stack below it."""

    def branch(self, method: str = "auto") -> gym.Env:
        """See :func:`branch`."""
        return branch(self, method)

    def branch_onto(self, inner: gym.Env) -> BranchableWrapper:
        """A copy of this wrapper around ``inner``; subclasses copy their per-episode state here."""
        clone = copy.copy(self)
        clone.env = inner
        return clone


def find_wrapper(env: gym.Env, kind: type) -> Any:
    """The outermost wrapper of type ``kind`` in ``env``'s wrapper stack, or None."""
    current = env
    while isinstance(current, gym.Wrapper):
        if isinstance(current, kind):
            return current
        current = current.env
    return None


@dataclass
class Trial:
    """One candidate action tried in its own branch: the step's 5-tuple and the branch itself."""

    action: str | Generation
    observation: str
    reward: float
    terminated: bool
    truncated: bool
    info: dict[str, Any]
    env: gym.Env


def offer_trial(env: gym.Env, trial: Trial) -> bool:
    """Let ``env``'s next ``step`` with ``trial.action`` take over ``trial.env`` (a branch of ``env``
    that took that one step) instead of running the engine again (:meth:`TextEnv.offer_step`).

    Every wrapper still runs its own ``step`` over the adopted results, so the whole stack ends as
    if the action had been stepped. False (nothing kept) when the innermost env cannot adopt (it
    has no ``_adopt`` hook, or it is a ``RemoteEnv``); then the caller should close the branch.
    """
    base, branched = env.unwrapped, trial.env.unwrapped
    if not isinstance(base, TextEnv) or not isinstance(branched, TextEnv) or branched is base:
        return False
    return base.offer_step(branched)


def trial_branches(env: gym.Env, actions: Sequence[str | Generation], method: str = "auto") -> Iterator[gym.Env]:
    """A branch of ``env`` (its whole stack) for each of ``actions``, in order, to step that action in.

    Where the innermost env offers :meth:`TextEnv.start_trials`, every branch comes from it at once
    (the engine's work of all the trials under way together); else each is made when asked for, after
    the previous one was stepped. Branches made but not handed out (the caller stopped early) are closed.
    """
    base = env.unwrapped
    made = base.start_trials(actions, method) if isinstance(base, TextEnv) else None
    if made is None:
        for _ in actions:
            yield branch(env, method)
        return
    given = 0
    try:
        for inner in made:
            given += 1
            yield branch(env, method, inner)
    finally:
        for inner in made[given:]:
            inner.close()


def try_actions(env: gym.Env, actions: Iterable[str | Generation], method: str = "auto") -> list[Trial]:
    """Step each action in a fresh branch of ``env``; ``env`` itself is left untouched."""
    actions = list(actions)
    trials = []
    with closing(trial_branches(env, actions, method)) as children:
        for action, child in zip(actions, children):
            obs, reward, terminated, truncated, info = child.step(action)
            trials.append(Trial(action, obs, reward, terminated, truncated, info, child))
    return trials
