"""Selection conditions: ``natural``, ``random-<k>``, ``guided-<k>``, ``planner-<k>`` and ``gold-<k>`` over an actor spec.

``planner-<k>`` picks among the same k candidates by the planner's plan length after each (envs
with ``expert_plan()``, ALFWorld): the ceiling that guided-k reaches with a perfect meter.
``gold-<k>`` is that ceiling on envs with a gold policy (BFCL, tau2): the candidate from which the
fewest of gold's tokens still win (:class:`~.selectors.GoldSelector`).
"""

from __future__ import annotations

import re
from dataclasses import replace
from typing import Any

from .loading import load_actor
from .selectors import GoldSelector, GuidedSelector, NaturalSelector, PlannerSelector, RandomSelector

__all__ = ["DEFAULT_CONDITIONS", "default_conditions", "make_agent", "needs_meter", "parse_condition"]

DEFAULT_CONDITIONS = ("natural", "random-4", "guided-4")
_CONDITION_RE = re.compile(r"^(natural|(random|guided|planner|gold)-(\d+))$")
# Model actors are loaded once per process and re-seeded per episode; scripted ones are rebuilt.
_LOADED: dict[tuple, Any] = {}


def parse_condition(condition: str) -> tuple[str, int]:
    """``natural`` -> ("natural", 1); ``random-4`` -> ("random", 4); ``guided-4`` -> ("guided", 4); ``planner-4`` -> ("planner", 4); ``gold-4`` -> ("gold", 4)."""
    match = _CONDITION_RE.match(condition)
    if not match or int(match.group(3) or 1) < 1:
        raise ValueError(f"condition must be natural, random-<k>, guided-<k>, planner-<k> or gold-<k>; got {condition!r}")
    return condition.split("-")[0], int(match.group(3) or 1)


def default_conditions(env_id: str) -> list[str]:
    """``ttg demo``'s conditions for ``env_id``: :data:`DEFAULT_CONDITIONS`, and the ceiling:
    ``planner-4`` where the env has a planner (``EnvRecord.planner``), else ``gold-4`` where it has
    a gold policy (BFCL, tau2)."""
    from ..registry import ENV_SPECS

    spec = ENV_SPECS.get(env_id)
    if spec is not None and spec.planner:
        return [*DEFAULT_CONDITIONS, "planner-4"]
    if spec is not None and "gold" in spec.policy_names:
        return [*DEFAULT_CONDITIONS, "gold-4"]
    return list(DEFAULT_CONDITIONS)


def needs_meter(condition: str) -> bool:
    """Whether ``condition`` selects by the progress meter (``guided-<k>``)."""
    return parse_condition(condition)[0] == "guided"


def make_agent(condition: str, *, seed: int, actor: str, actor_kwargs: dict[str, Any] | None = None) -> NaturalSelector:
    """The selector of ``condition`` over the actor ``actor`` (a ``load_actor`` spec), seeded with ``seed``."""
    kind, k = parse_condition(condition)
    agent = _actor(actor, seed, actor_kwargs or {})
    if kind == "natural":
        return NaturalSelector(agent)
    if kind == "random":
        return RandomSelector(agent, k, seed=seed)
    if kind == "planner":
        return PlannerSelector(agent, k)
    if kind == "gold":
        return GoldSelector(agent, k)
    return GuidedSelector(agent, k)


def _actor(spec: str, seed: int, kwargs: dict[str, Any]) -> Any:
    if spec.startswith("scripted:"):
        return load_actor(spec, seed=seed, **kwargs)
    key = (spec, tuple(sorted(kwargs.items())))
    if key not in _LOADED:
        _LOADED[key] = load_actor(spec, **kwargs)
    actor = _LOADED[key]
    actor.sampling = replace(actor.sampling, seed=seed)
    return actor
