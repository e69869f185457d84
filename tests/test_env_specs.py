"""The per-env records agree with the env modules they describe, and every per-env fact reads them."""

from __future__ import annotations

import gymnasium as gym
import pytest

import ttg_envs
from ttg_envs.registry import DEFAULT_SETTINGS, ENV_SPECS, env_settings, env_spec, policy_factory


def test_every_record_is_registered_and_its_policies_import():
    for spec in ENV_SPECS.values():
        assert gym.spec(spec.id).entry_point == spec.entry_point
        assert callable(policy_factory(spec.id))
    assert set(ttg_envs.ENV_SPECS) == set(ENV_SPECS)


def test_splits_match_the_env_modules():
    from ttg_envs.envs.alfworld.tasks import SPLITS as ALFWORLD_SPLITS
    from ttg_envs.envs.papersearchqa.data import SPLITS as QA_SPLITS

    assert env_spec("ttg/ALFWorld-v0").splits == ALFWORLD_SPLITS
    assert env_spec("ttg/PaperSearchQA-v0").splits == QA_SPLITS
    bfcl = pytest.importorskip("ttg_envs.envs.bfcl.data")
    assert set(env_spec("ttg/BFCL-v0").splits) == {"all", *bfcl.GROUPS}
    tau2 = pytest.importorskip("ttg_envs.envs.tau2.data")
    assert all(set(env_spec("ttg/Tau2-v0").splits) <= set(s) for s in tau2.DOMAINS.values() if len(s) > 1)


def test_table_4_values():
    assert env_spec("ttg/PaperSearchQA-v0").failure_cost == 6144 and env_spec("ttg/PaperSearchQA-v0").max_steps == 6
    assert env_spec("ttg/ALFWorld-v0").settings.kl_coef == 0.01 and env_spec("ttg/ALFWorld-v0").max_steps == 50
    assert env_settings("ttg/BFCL-v0") == env_settings("ttg/AWM-v0")
    assert env_settings("ttg/Unknown-v0") == DEFAULT_SETTINGS and DEFAULT_SETTINGS.failure_cost == 16384


def test_an_unknown_id_names_the_known_ones():
    with pytest.raises(ValueError, match="unknown env id 'ttg/Nope-v0'; registered: ttg/ALFWorld-v0"):
        env_spec("ttg/Nope-v0")


def test_bundled_alfworld_tasks_load_and_play_without_the_generator():
    import subprocess
    import sys

    pytest.importorskip("alfworld")
    code = (
        "import sys, gymnasium as gym, ttg_envs; env = gym.make('ttg/ALFWorld-v0', split='valid_seen'); "
        "env.reset(seed=0, options={'task_index': 0}); "
        "print('ttg_envs.datagen.alfworld' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert out.stdout.split()[-1] == "False"


def test_the_generator_orders_the_same_task_types():
    gen = pytest.importorskip("ttg_envs.datagen.alfworld")
    from ttg_envs.envs.alfworld.tasks import TASK_TYPES

    assert sorted(gen.GENERATION_ORDER) == sorted(TASK_TYPES) and gen.SPLITS == env_spec("ttg/ALFWorld-v0").splits


@pytest.mark.parametrize("env_id", sorted(ENV_SPECS))
def test_eval_train_and_the_verl_loop_resolve_the_same_turn_limit_and_c(env_id):
    import importlib
    from types import SimpleNamespace

    from ttg_envs.registry import failure_cost, turn_limit
    from ttg_envs.training.actor.trainer import TrainConfig
    from ttg_envs.training.actor.verl_plugin.fields import task_limits
    from ttg_envs.wrappers.progress_meter import default_failure_cost

    spec = env_spec(env_id)
    train = TrainConfig(env_id=env_id).resolved()
    verl = task_limits({"env_id": env_id})
    assert train.max_turns == verl.max_turns == turn_limit(env_id) == spec.max_steps
    # ttg eval builds the env with no max_steps (the class default) and ProgressMeterWrapper's default C.
    evaluated = SimpleNamespace(spec=gym.spec(env_id), unwrapped=SimpleNamespace())
    assert train.failure_cost == verl.failure_cost == default_failure_cost(evaluated) == failure_cost(env_id)
    module, name = spec.entry_point.split(":")
    try:
        env_class = getattr(importlib.import_module(module), name)
    except ImportError as exc:
        pytest.skip(f"{env_id}'s engine is not installed: {exc}")
    assert env_class.default_max_steps == turn_limit(env_id)


def test_bfcl_official_scoring_plays_the_same_limit_whoever_builds_it():
    pytest.importorskip("bfcl_eval")
    from ttg_envs.envs.bfcl.env import BFCLEnv

    evaluated = BFCLEnv(categories="multi_turn_base")  # ttg eval: no max_steps
    trained = BFCLEnv(categories="multi_turn_base", max_steps=env_spec("ttg/BFCL-v0").max_steps)  # ttg train, verl
    assert evaluated.max_steps == trained.max_steps > env_spec("ttg/BFCL-v0").max_steps
