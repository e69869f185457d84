"""The env registry: one frozen :class:`EnvRecord` per benchmark, the only place that lists them.

Each record holds what the library knows about one env, as keywords of its registration: its
entry point, splits, scripted policies, turn limit, paper table 4 settings (failure cost C, ...),
the meter's task pattern and the shipped meter. ``import ttg_envs`` registers every id with
gymnasium; every consumer (``ttg eval``, ``ttg train``, the verl loop, the env classes' own
defaults) resolves a per-env fact here, through :func:`turn_limit` and :func:`failure_cost`.
Plain data: importing this module imports no env.

>>> turn_limit("ttg/ALFWorld-v0"), failure_cost("ttg/PaperSearchQA-v0")
(50, 6144.0)
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

__all__ = [
    "DEFAULT_MAX_TURNS",
    "DEFAULT_SETTINGS",
    "ENV_SPECS",
    "EnvRecord",
    "EnvSettings",
    "PolicySpec",
    "default_actor",
    "env_settings",
    "env_spec",
    "failure_cost",
    "make_policy",
    "parse_policy",
    "policy_draws",
    "policy_factory",
    "train_split",
    "turn_limit",
]


@dataclass(frozen=True, kw_only=True)
class EnvSettings:
    """Paper table 4's common and DeltaTTG settings for one environment (Qwen3-4B column).

    ``batch_size`` counts tasks per update; each task gets ``group_size`` rollouts. Table 4's max
    turns is the record's own ``max_turns`` (the env's turn limit, which every consumer plays); its
    rho and M, the same for every env, are ``credit.RHO`` and ``credit.CAP``.
    """

    lr: float
    batch_size: int
    group_size: int
    max_tokens_per_turn: int
    kl_coef: float
    entropy_coef: float
    failure_cost: float
    temperature: float = 1.0
    top_p: float = 1.0
    ppo_epochs: int = 1


@dataclass(frozen=True, kw_only=True)
class EnvRecord:
    """One registered env.

    Attributes:
        id: the gymnasium id (``ttg/ALFWorld-v0``).
        entry_point: ``module:Class`` that ``gym.make`` imports.
        policies: ``module:function`` building the env's scripted policies by name
            (``factory(name, seed=..., **kwargs) -> policy``).
        splits: the named splits its ``split`` argument takes.
        max_turns: the turn limit of an episode: the env's default ``max_steps``, and what ``ttg eval``,
            ``ttg train`` and the verl loop play (table 4's max turns where table 4 has a column).
        settings: paper table 4's training settings (C, learning rate, ...).
        task_pattern: a regex whose group 1 is the task statement in the first observation
            (the encoder meter pairs it with every turn); None when the env has none.
        meter: the folder under ``meters/shipped`` of the meter ``load_meter(id)`` loads; None: none ships.
        eval_splits: the splits ``ttg eval``, ``ttg rollout`` and ``ttg demo`` run on by default.
        train_split: the split meters and actors train on by default; None: the env has none
            (``ttg demo`` then guides with the shipped meter instead of training one).
        policy_names: the names its scripted policies take (``name[:eps]``; the factory checks them too).
        planner: whether its env plans (``expert_plan()``: ALFWorld), so ``planner-<k>``, plan-length
            labels and expert roll-out targets apply.
        counted_info: the step info flags of :data:`~ttg_envs.info_fields.EPISODE_COUNTS` its env
            writes, which reports count (ALFWorld: ``planner_timeout``).
        task_state: whether its env declares its task state (``TextEnv.declares_task_state``,
            ``task_state_key()``): a step that leaves it unchanged leaves the remaining work
            unchanged, so ``ProgressMeterWrapper(carry_noops=True)`` (``--carry-noops``) carries the
            estimate over it. ALFWorld only; off for the tool envs, where a read-only call can be progress.
    """

    id: str
    entry_point: str
    policies: str
    splits: tuple[str, ...]
    max_turns: int
    settings: EnvSettings
    task_pattern: str | None = None
    meter: str | None = None
    eval_splits: tuple[str, ...] = ()
    train_split: str | None = "train"
    policy_names: tuple[str, ...] = ("expert", "noisy_expert")
    planner: bool = False
    counted_info: tuple[str, ...] = ()
    task_state: bool = False

    @property
    def meter_spec(self) -> str | None:
        """The ``load_meter`` spec of the shipped meter (the env id), or None when none ships."""
        return self.id if self.meter else None

    @property
    def default_actor(self) -> str:
        """The scripted actor evaluations use by default: the noisy expert at eps 0.75 where the env has
        one (a stand-in for a sampled LLM), else its first scripted policy."""
        if "noisy_expert" in self.policy_names:
            return "scripted:noisy_expert:0.75"
        return f"scripted:{self.policy_names[0]}"

    @property
    def failure_cost(self) -> float:
        """C of eq. 7 (table 4)."""
        return float(self.settings.failure_cost)

    @property
    def max_steps(self) -> int:
        """The turn limit per episode (``max_turns``), by the name the envs take it under."""
        return self.max_turns

    def policy_factory(self) -> Callable[..., Any]:
        """The scripted-policy factory (imports the env's policy module)."""
        module, func = self.policies.split(":")
        return getattr(importlib.import_module(module), func)


_ALFWORLD = EnvSettings(
    lr=1e-6, batch_size=16, group_size=8, max_tokens_per_turn=1024, kl_coef=0.01, entropy_coef=0.001, failure_cost=16384
)
_PAPERSEARCHQA = EnvSettings(
    lr=1e-6, batch_size=512, group_size=5, max_tokens_per_turn=1024, kl_coef=0.001, entropy_coef=0.0, failure_cost=6144
)
# Table 4 has no BFCL or tau2 column: those tool-use envs take the AgentWorldModel settings, the
# paper's complex-engineering domain (their meters are their own: scripts/build_meters.sh bfcl tau2).
_AWM = EnvSettings(lr=1e-6, batch_size=16, group_size=16, max_tokens_per_turn=2048, kl_coef=0.001, entropy_coef=0.0, failure_cost=16384)

#: Table 4's settings for an env that has no record (ALFWorld's; C = 16384).
DEFAULT_SETTINGS = _ALFWORLD
#: The turn limit of an env that has no record (ALFWorld's).
DEFAULT_MAX_TURNS = 50

_SPECS = (
    EnvRecord(
        id="ttg/ALFWorld-v0",
        entry_point="ttg_envs.envs.alfworld.env:ALFWorldEnv",
        policies="ttg_envs.envs.alfworld.policies:make_policy",
        splits=("train", "valid_seen", "valid_unseen"),
        max_turns=50,
        settings=_ALFWORLD,
        task_pattern=r"Your task is to: ([^\n]*)",
        meter="alfworld",
        eval_splits=("valid_seen", "valid_unseen"),
        policy_names=("expert", "noisy_expert", "idle_expert"),
        planner=True,
        counted_info=("planner_timeout",),
        task_state=True,
    ),
    EnvRecord(
        id="ttg/PaperSearchQA-v0",
        entry_point="ttg_envs.envs.papersearchqa.env:PaperSearchQAEnv",
        policies="ttg_envs.envs.papersearchqa.policies:make_policy",
        splits=("train", "test"),
        max_turns=6,
        settings=_PAPERSEARCHQA,
        meter="papersearchqa",
        eval_splits=("test",),
    ),
    # AWM ships one split: evaluation runs on it too (the shipped meter holds out 8 of its 42 tasks).
    EnvRecord(
        id="ttg/AWM-v0",
        entry_point="ttg_envs.envs.awm.env:AWMEnv",
        policies="ttg_envs.envs.awm.policies:make_policy",
        splits=("train",),
        max_turns=20,
        settings=_AWM,
        meter="awm",
        eval_splits=("train",),
    ),
    # BFCL's split is a category group (or one category); tau2's a shipped task split of a domain.
    # Their turn limits are the ones their evaluations have always played (BFCL: 20 steps per user
    # turn over a whole episode of up to 100; tau2: 50 agent responses), not AWM's 20.
    EnvRecord(
        id="ttg/BFCL-v0",
        entry_point="ttg_envs.envs.bfcl.env:BFCLEnv",
        policies="ttg_envs.envs.bfcl.policies:make_policy",
        splits=("all", "non_live", "live", "multi_turn", "hallucination"),
        max_turns=100,
        settings=_AWM,
        meter="bfcl",
        eval_splits=("all",),
        train_split=None,
        policy_names=("gold", "gold_drop_last", "perturbed"),
    ),
    EnvRecord(
        id="ttg/Tau2-v0",
        entry_point="ttg_envs.envs.tau2.env:Tau2Env",
        policies="ttg_envs.envs.tau2.policies:make_policy",
        splits=("base", "train", "test"),
        max_turns=50,
        settings=_AWM,
        meter="tau2",
        eval_splits=("test",),
        policy_names=("gold", "gold_drop_last", "perturbed"),
    ),
)

#: Registered env id -> its record.
ENV_SPECS: dict[str, EnvRecord] = {spec.id: spec for spec in _SPECS}


def env_spec(env_id: str) -> EnvRecord:
    """The record of ``env_id``; a ``ValueError`` names the known ids when there is none."""
    try:
        return ENV_SPECS[env_id]
    except KeyError:
        raise ValueError(f"unknown env id {env_id!r}; registered: {', '.join(sorted(ENV_SPECS))}") from None


def env_settings(env_id: str | None) -> EnvSettings:
    """Table 4's settings for ``env_id`` (:data:`DEFAULT_SETTINGS` for an env with no record)."""
    spec = ENV_SPECS.get(env_id) if env_id else None
    return spec.settings if spec else DEFAULT_SETTINGS


def turn_limit(env_id: str | None) -> int:
    """The turn limit of ``env_id`` (:data:`DEFAULT_MAX_TURNS` for an env with no record)."""
    spec = ENV_SPECS.get(env_id) if env_id else None
    return spec.max_turns if spec else DEFAULT_MAX_TURNS


def has_planner(env_id: str) -> bool:
    """Whether ``env_id`` plans (``EnvRecord.planner``; False for an env with no record)."""
    spec = ENV_SPECS.get(env_id)
    return bool(spec and spec.planner)


def declares_task_state(env_id: str) -> bool:
    """Whether ``env_id``'s env declares its task state (``EnvRecord.task_state``; False for an env with no record)."""
    spec = ENV_SPECS.get(env_id)
    return bool(spec and spec.task_state)


def counted_info(env_id: str) -> tuple[str, ...]:
    """The step info flags reports count for ``env_id`` (``EnvRecord.counted_info``; none for an env with no record)."""
    spec = ENV_SPECS.get(env_id)
    return spec.counted_info if spec else ()


def default_actor(env_id: str) -> str:
    """The scripted actor evaluations of ``env_id`` use by default (``EnvRecord.default_actor``; the
    noisy expert at eps 0.75 for an env with no record)."""
    spec = ENV_SPECS.get(env_id)
    return spec.default_actor if spec else "scripted:noisy_expert:0.75"


def train_split(env_id: str) -> str | None:
    """The split meters and actors of ``env_id`` train on by default (``train`` for an env with no record)."""
    spec = ENV_SPECS.get(env_id)
    return spec.train_split if spec else "train"


def failure_cost(env_id: str | None) -> float:
    """C of eq. 7 for ``env_id`` (table 4; :data:`DEFAULT_SETTINGS`' 16384 for an env with no record)."""
    return float(env_settings(env_id).failure_cost)


def policy_factory(env_id: str):
    """The scripted-policy factory of ``env_id`` (``factory(name, seed=..., **kwargs) -> policy``)."""
    if env_id not in ENV_SPECS:
        raise ValueError(f"unknown env id {env_id!r}; scripted policies exist for: {', '.join(sorted(ENV_SPECS))}")
    return ENV_SPECS[env_id].policy_factory()


@dataclass(frozen=True)
class PolicySpec:
    """A scripted policy named as ``name[:eps]`` (``noisy_expert:0.5``): its name, factory kwargs
    and the label trajectory files use (``noisy_expert-0.5``)."""

    name: str
    kwargs: dict[str, Any]
    file_label: str


def parse_policy(spec: str) -> PolicySpec:
    """``name[:eps]`` -> :class:`PolicySpec`; the one parser of the scripted-policy grammar
    (``ttg rollout``, ``train-meter`` and ``scripted:`` actors all take it).

    >>> parse_policy("noisy_expert:0.5")
    PolicySpec(name='noisy_expert', kwargs={'eps': 0.5}, file_label='noisy_expert-0.5')
    """
    name, sep, eps = spec.partition(":")
    if not name:
        raise ValueError(f"a scripted policy is name[:eps], got {spec!r}")
    if not sep:
        return PolicySpec(name, {}, name)
    try:
        value = float(eps)
    except ValueError:
        raise ValueError(f"a scripted policy is name[:eps] with a number eps, got {spec!r}") from None
    return PolicySpec(name, {"eps": value}, f"{name}-{value:g}")


def policy_draws(env_id: str, spec: str) -> bool:
    """Whether the scripted policy ``spec`` of ``env_id`` draws, so that its episodes depend on the seed:
    a noisy or perturbed policy whose eps (given, or its factory's default) is above 0. The expert
    and gold (with or without an eps in the spec) repeat themselves exactly."""
    policy = make_policy(env_id, spec)
    return bool(getattr(getattr(policy, "perturber", policy), "draws", False))


def make_policy(env_id: str, spec: str, *, seed: int | None = None, **kwargs: Any) -> Callable[..., Any]:
    """The scripted policy ``spec`` (``name[:eps]``) of ``env_id``, seeded with ``seed``."""
    policy = parse_policy(spec)
    return policy_factory(env_id)(policy.name, seed=seed, **{**policy.kwargs, **kwargs})
