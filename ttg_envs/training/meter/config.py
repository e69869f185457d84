"""The settings of ``ttg train-meter`` and ``ttg eval-meter``: typed configs with their defaults, in one place."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, fields
from typing import Any

from ...cli_args import DEFAULT_ENV
from .record import DEFAULT_POLICIES, EVAL_POLICIES
from .regression import RegressionConfig

__all__ = ["EVAL_DEFAULTS", "TRAIN_DEFAULTS", "MeterEvalConfig", "MeterRunConfig", "MeterTrainConfig", "report_config"]


@dataclass(frozen=True, kw_only=True)
class MeterRunConfig:
    """Settings both commands share: the env, the trajectories (recorded or given) and the machine.

    ``episodes_per_task`` N > 1 records N episodes of every policy that draws on each task, seeds
    ``seed`` to ``seed + N - 1`` (:func:`~ttg_envs.training.meter.record.collect_trajectories`)."""

    env: str = DEFAULT_ENV
    env_kwargs: dict[str, Any] = field(default_factory=dict)
    policies: Sequence[str] = DEFAULT_POLICIES
    trajectories: Sequence[str] | None = None
    limit: int | None = None
    tasks: Sequence[int] | None = None
    workers: int = 2
    seed: int = 0
    episodes_per_task: int = 1
    threads: int | None = 1
    device: str = "auto"


@dataclass(frozen=True, kw_only=True)
class MeterTrainConfig(MeterRunConfig):
    """``ttg train-meter``'s settings (the flags of the same names; encoder and causal backbones).

    ``report_to`` names the experiment trackers (:mod:`ttg_envs.training.tracking`); ``lora_r`` > 0
    trains a LoRA adapter on a causal meter (:mod:`ttg_envs.training.lora`; ``lora_targets``: a comma
    list or a sequence of module names). ``ensemble`` > 1 trains that many encoder meters, member k
    from seed ``seed + k`` (initial weights and example order; the held-out split stays ``seed``'s),
    saved as one :class:`~ttg_envs.meters.ensemble.EnsembleMeter`.

    >>> MeterTrainConfig(epochs=10).backbone, MeterTrainConfig().splits
    ('encoder:tiny', ('train',))
    """

    splits: Sequence[str] = ("train",)
    backbone: str = "encoder:tiny"
    val_fraction: float = 0.1
    epochs: int = 6
    lr: float = 1e-3
    backbone_lr: float | None = None
    hidden: int = 64
    window: int = 0
    segment_tokens: int = 48
    task_tokens: int = 32
    keep_reasoning: bool = False
    targets: str = "recorded"
    turn_limit: int = 0
    delta_weight: float = 0.0
    mark_task_words: bool = False
    carry_gate: bool = False
    task_from_user: bool = False
    request_per_turn: bool = False
    requests_ahead: bool = False
    compact_calls: bool = False
    call_tally: int = 0
    noop_siblings: int = 0
    best_siblings: bool = False
    gold_siblings: int = 0
    sibling_weight: float = RegressionConfig.sibling_weight
    sibling_rank_weight: float = RegressionConfig.sibling_rank_weight
    step_rank_weight: float = RegressionConfig.step_rank_weight
    ensemble: int = 1
    batch_size: int = 16
    max_examples: int | None = None
    max_prompt_tokens: int | None = None
    sft_epochs: float = 1.0
    sft_lr: float | None = None
    grpo_steps: int = 0
    grpo_lr: float | None = None
    group_size: int = 8
    report_to: str = "none"
    lora_r: int = 0
    lora_alpha: float | None = None
    lora_targets: str | Sequence[str] | None = None
    out: str = "runs/meter"


@dataclass(frozen=True, kw_only=True)
class MeterEvalConfig(MeterRunConfig):
    """``ttg eval-meter``'s settings; ``meter`` (what ``load_meter`` takes) is required."""

    meter: str
    policies: Sequence[str] = EVAL_POLICIES
    splits: Sequence[str] = ("valid_seen", "valid_unseen")
    labels: str = "auto"
    noop_every: int = 3
    carry_noops: bool = False
    failure_cost: float | None = None
    out: str = "runs/meter-eval"


def _defaults(cls: type) -> dict[str, Any]:
    return {f.name: f.default_factory() if callable(f.default_factory) else f.default for f in fields(cls) if f.name != "meter"}


#: ``ttg train-meter``'s defaults by setting name (a view of :class:`MeterTrainConfig`, for the flags).
TRAIN_DEFAULTS: dict[str, Any] = _defaults(MeterTrainConfig)
#: ``ttg eval-meter``'s defaults by setting name (a view of :class:`MeterEvalConfig`; ``meter`` has none).
EVAL_DEFAULTS: dict[str, Any] = _defaults(MeterEvalConfig)


def report_config(config: MeterRunConfig) -> dict[str, Any]:
    """The settings as a report records them (``env_kwargs`` as the JSON text the flag takes, task
    indices as a list: ``--tasks`` ranges are a lazy sequence, whose text would be its repr)."""
    tasks = config.tasks
    if tasks is not None and not isinstance(tasks, (list, tuple)):
        tasks = list(tasks) if len(tasks) <= 1 << 16 else repr(tasks)
    return {**asdict(config), "env_kwargs": json.dumps(config.env_kwargs), "tasks": tasks}
