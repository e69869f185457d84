"""Checks of a command line's specs before any model, game or progress bar loads.

Each check reads only the registry, the file system and (for a hub id) the local hub cache, and
fails with a ``ValueError`` whose one line names the flag and the choices; ``ttg`` prints it as
``ttg: error: ...`` with exit code 2. :func:`resolve_selection` also fills the defaults that follow
the env: its evaluation splits, its shipped meter and its scripted actor.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from typing import Any

from ..registry import ENV_SPECS, EnvRecord, default_actor, parse_policy


class FlagError(ValueError):
    """A flag's value is wrong; the message starts with ``argument --flag:``."""

    def __init__(self, flag: str, message: str):
        super().__init__(f"argument {flag}: {message}")
        self.flag = flag


def json_flag(text: str, flag: str) -> dict[str, Any]:
    """The JSON object a ``--*-kwargs`` flag holds; a ``FlagError`` names the flag when it is not one."""
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise FlagError(flag, f"not valid JSON ({exc.msg} at character {exc.pos}): {text!r}") from None
    if not isinstance(value, dict):
        raise FlagError(flag, f'expected a JSON object such as \'{{"split": "train"}}\', got {text!r}')
    return value


def check_env(env_id: str) -> EnvRecord | None:
    """The record of ``env_id`` (None for an id registered with gymnasium but not by this project)."""
    if env_id in ENV_SPECS:
        return ENV_SPECS[env_id]
    import gymnasium as gym

    import ttg_envs  # noqa: F401  (registers the ids)

    if env_id in gym.registry:
        return None
    raise FlagError("--env", f"unknown env id {env_id!r} (choices: {', '.join(sorted(ENV_SPECS))})")


def check_splits(env_id: str, splits: Sequence[str], env_kwargs: dict[str, Any], flag: str = "--splits") -> None:
    """Every split in ``splits`` is one the env serves: a split its record names, or one a probe env accepts
    (BFCL takes any category name, tau2 a domain's own task sets)."""
    spec = ENV_SPECS.get(env_id)
    for split in splits:
        if spec is not None and split in spec.splits:
            continue
        from ..runner import num_tasks

        try:
            num_tasks(env_id, {**env_kwargs, "split": split})
        except (ValueError, KeyError, FileNotFoundError) as exc:
            choices = f" (choices: {', '.join(spec.splits)})" if spec else ""
            detail = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise FlagError(flag, f"{env_id} has no split {split!r}{choices}: {detail}") from None


def check_policy(env_id: str, policy: str, flag: str) -> None:
    """``policy`` (``name[:eps]``) names one of the env's scripted policies."""
    try:
        name = parse_policy(policy).name
    except ValueError as exc:
        raise FlagError(flag, str(exc)) from None
    spec = ENV_SPECS.get(env_id)
    if spec is not None and name not in spec.policy_names:
        raise FlagError(flag, f"{env_id} has no scripted policy {name!r} (choices: {', '.join(spec.policy_names)})")


def check_gold(env_id: str, flag: str, value: str) -> None:
    """``flag value`` (``train-meter --targets gold``, ``eval-meter --labels gold``) needs the env's
    ``gold`` policy, whose replays give the targets or labels; an env without one is refused here,
    before anything is recorded."""
    spec = ENV_SPECS.get(env_id)
    if spec is not None and "gold" not in spec.policy_names:
        raise FlagError(flag, f"{value} needs a gold policy and {env_id} has none (choices: {', '.join(spec.policy_names)})")


def check_actor(env_id: str, actor: str) -> None:
    """``actor`` is a ``load_actor`` spec whose scheme exists, whose scripted policy the env has, and whose
    model path (``hf:``) exists; nothing is loaded."""
    from ..agents.loading import SCHEMES

    scheme, sep, rest = actor.partition(":")
    if not sep or scheme not in SCHEMES or not rest:
        raise FlagError("--actor", f"expected one of {', '.join(s + ':...' for s in SCHEMES)}; got {actor!r}")
    if scheme == "scripted":
        check_policy(env_id, rest, "--actor")
    elif scheme in ("hf", "transformers"):
        _check_model("--actor", rest)
    elif scheme == "openai":
        base_url, hash_sign, model = rest.rpartition("#")
        if not (hash_sign and base_url and model):
            raise FlagError("--actor", f"expected openai:<base-url>#<model>, got {actor!r}")


def check_meter(meter: str) -> None:
    """``meter`` is a ``load_meter`` spec that can load: a registered env id with a shipped meter, an
    existing folder, a scheme it knows, a hub id in the local cache; nothing is loaded."""
    from ..meters.loading import check_meter_spec

    try:
        check_meter_spec(meter, hub=True)
    except (LookupError, ValueError, FileNotFoundError, ImportError) as exc:
        raise FlagError("--meter", str(exc).strip().splitlines()[0]) from None


def check_conditions(conditions: Sequence[str]) -> None:
    """Every condition parses (``natural``, ``random-<k>``, ``guided-<k>``)."""
    from ..agents.conditions import parse_condition

    for condition in conditions:
        try:
            parse_condition(condition)
        except ValueError as exc:
            raise FlagError("--conditions", str(exc)) from None


def _check_model(flag: str, model: str) -> None:
    from ..model_spec import resolve_model

    try:
        resolve_model(model)
    except (ValueError, FileNotFoundError, ImportError) as exc:
        raise FlagError(flag, str(exc).strip().splitlines()[0]) from None


def tau2_user(actor: str) -> str:
    """The tau2 user an actor gets when ``--env-kwargs`` names none: the gold replay of the same name for
    the scripted gold policies (``perturbed`` gets ``gold``), tau2's LLM user when its endpoint is set (``$TTG_USER_BASE_URL``); for
    any other actor a ``FlagError`` names the offline choice, since the gold replay cannot converse."""
    import os

    name = actor.partition(":")[2]
    if actor.startswith("scripted:") and name in ("gold", "gold_drop_last"):
        return name
    if actor.startswith("scripted:") and name.partition(":")[0] == "perturbed":  # its text moves stay gold's
        return "gold"
    if os.environ.get("TTG_USER_BASE_URL") and os.environ.get("TTG_USER_MODEL"):
        return "llm"
    raise FlagError(
        "--env-kwargs",
        'ttg/Tau2-v0 needs a user for this actor: \'{"user": "scenario"}\' (an offline user that converses), '
        'or tau2\'s LLM user on an endpoint (\'{"user_base_url": ..., "user_model": ...}\' or $TTG_USER_BASE_URL '
        "and $TTG_USER_MODEL)",
    )


def resolve_selection(args: argparse.Namespace, *, meter_default: bool = True) -> argparse.Namespace:
    """Check ``ttg eval`` / ``ttg demo`` / ``ttg rollout`` arguments in place and fill the env's defaults.

    ``--splits`` defaults to the env's evaluation splits, ``--actor`` and ``--policies`` to its scripted
    policies, tau2's user to :func:`tau2_user` and, when a guided condition is asked for and
    ``meter_default`` holds, ``--meter`` to its shipped meter. The checks run in the order a user
    reads the line: env, kwargs, splits, policies, actor, conditions, meter.
    """
    spec = check_env(args.env)
    env_kwargs = json_flag(args.env_kwargs, "--env-kwargs")
    if getattr(args, "actor_kwargs", None) is not None:
        json_flag(args.actor_kwargs, "--actor-kwargs")
    if not args.splits:
        if spec is None or not spec.eval_splits:
            raise FlagError("--splits", f"{args.env} has no default evaluation splits; name them")
        args.splits = list(spec.eval_splits)
    check_splits(args.env, args.splits, env_kwargs)
    if hasattr(args, "policies"):
        if args.policies is None:
            args.policies = list(spec.policy_names) if spec else ["expert", "noisy_expert"]
        for policy in args.policies:
            check_policy(args.env, policy, "--policies")
    if hasattr(args, "actor"):
        if args.actor is None:
            args.actor = default_actor(args.env)
        check_actor(args.env, args.actor)
        if args.env == "ttg/Tau2-v0" and "user" not in env_kwargs:
            env_kwargs["user"] = tau2_user(args.actor)
            args.env_kwargs = json.dumps(env_kwargs)
    if hasattr(args, "conditions"):
        from ..agents.conditions import default_conditions, needs_meter

        if args.conditions is None:  # ttg demo: the ceiling too (planner-4 or gold-4)
            args.conditions = default_conditions(args.env)
        check_conditions(args.conditions)
        guided = any(needs_meter(c) for c in args.conditions)
        if getattr(args, "meter", None) is None and guided and meter_default:
            if spec is None or spec.meter_spec is None:
                raise FlagError("--meter", f"the guided conditions need a meter and none ships for {args.env}; give --meter")
            args.meter = spec.meter_spec
        if getattr(args, "meter", None) is not None:
            check_meter(args.meter)
    if getattr(args, "carry_noops", False) and not (spec and spec.task_state):
        raise FlagError("--carry-noops", f"{args.env} declares no task state (task_state_key), so no step is a known no-op there")
    return args
