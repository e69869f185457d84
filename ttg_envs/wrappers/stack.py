"""``make_env``: the one way the library builds an env stack (gym.make + TokenCounter (+ meter) (+ recorder))."""

from __future__ import annotations

import json
import os
from typing import Any

import gymnasium as gym

from .progress_meter import ProgressMeterWrapper
from .recorder import TrajectoryRecorder
from .token_counter import TokenCounter

__all__ = ["cached_meter", "make_env", "wrap_env"]

# Meters loaded from a spec, once per process (episode workers see the same spec many times).
_METERS: dict[tuple, Any] = {}


def cached_meter(meter: Any, **kwargs: Any) -> Any:
    """``meter`` itself, or for a ``load_meter`` spec the meter loaded once per process (``kwargs``, such
    as ``device`` or ``threads``, go to ``load_meter``).

    A saved folder is keyed by its ``meter.json`` modification time too, so a meter retrained at
    the same path is loaded again.
    """
    if not isinstance(meter, (str, os.PathLike)):
        return meter
    from ..meters import load_meter

    spec = os.fspath(meter)
    config = os.path.join(spec, "meter.json")
    key = (spec, os.path.getmtime(config) if os.path.exists(config) else None, json.dumps(kwargs, sort_keys=True, default=repr))
    if key not in _METERS:
        _METERS[key] = load_meter(spec, **kwargs)
    return _METERS[key]


def make_env(
    env_id: str,
    /,
    *,
    tokenizer: Any = None,
    meter: Any = None,
    failure_cost: float | None = None,
    recorder: str | os.PathLike | None = None,
    record_metadata: dict[str, Any] | None = None,
    carry_noops: bool = False,
    **env_kwargs: Any,
) -> gym.Env:
    """``gym.make(env_id, **env_kwargs)`` wrapped in ``TokenCounter(tokenizer)``, then
    ``ProgressMeterWrapper(meter, failure_cost)`` when ``meter`` is given (a meter or a
    ``load_meter`` spec, loaded once per process), then a ``TrajectoryRecorder`` appending to
    ``recorder`` (with ``record_metadata``) when that is given. ``carry_noops`` goes to the meter
    wrapper (it carries the estimate across steps that leave the task state unchanged).

    >>> from ttg_envs.meters import ScriptedMeter
    >>> env = make_env("ttg/PaperSearchQA-v0", meter=ScriptedMeter(lambda history: (True, 120)))
    >>> _, info = env.reset(seed=0, options={"task_index": 0})
    >>> info["ttg"], info["ttg_cost"], env.unwrapped.max_steps
    (120, 120.0, 6)
    >>> _, _, _, _, info = env.step("<think>hm</think><search>kinase</search>")
    >>> info["assistant_tokens"] > 0, info["ttg_delta"]
    (True, 0.0)
    """
    import ttg_envs  # noqa: F401  (registers the ids)

    env = TokenCounter(gym.make(env_id, **env_kwargs), tokenizer=tokenizer)
    return wrap_env(
        env, meter=meter, failure_cost=failure_cost, recorder=recorder, record_metadata=record_metadata, carry_noops=carry_noops
    )


def wrap_env(
    env: gym.Env,
    *,
    meter: Any = None,
    failure_cost: float | None = None,
    recorder: str | os.PathLike | None = None,
    record_metadata: dict[str, Any] | None = None,
    meter_kwargs: dict[str, Any] | None = None,
    carry_noops: bool = False,
) -> gym.Env:
    """The upper part of :func:`make_env`'s stack around ``env`` (a token-counted env): the meter
    wrapper when ``meter`` is given (``meter_kwargs`` go to ``load_meter`` for a spec), then the recorder.
    The runner puts several of these over one shared env."""
    if meter is not None:
        env = ProgressMeterWrapper(env, cached_meter(meter, **(meter_kwargs or {})), failure_cost=failure_cost, carry_noops=carry_noops)
    if recorder is not None:
        env = TrajectoryRecorder(env, recorder, metadata=record_metadata)
    return env
