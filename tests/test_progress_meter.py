"""ProgressMeterWrapper on a hand-built episode of the tiny ALFWorld game with a scripted meter."""

from __future__ import annotations

from types import SimpleNamespace

import gymnasium as gym
import numpy as np
import pytest

from ttg_envs.credit import step_costs
from ttg_envs.envs.alfworld.policies import react
from ttg_envs.meters import ScriptedMeter
from ttg_envs.wrappers import (
    ProgressMeterWrapper,
    TokenCounter,
    TrajectoryRecorder,
    read_trajectories,
    score_actions,
)
from ttg_envs.wrappers.progress_meter import default_failure_cost

PLAN = ["go to cabinet 1", "open cabinet 1", "take mug 1 from cabinet 1", "go to fridge 1", "open fridge 1", "move mug 1 to fridge 1"]
C = 1000.0
# What the scripted meter answers after k actions (after the 6th action of PLAN the game is won
# and that state is anchored, never scored).
ANSWERS = {0: (True, 120), 1: (True, 100), 2: "I am not sure", 3: (False, None), 4: (True, 40), 5: (True, 50), 6: (True, 60)}


def n_actions(history) -> int:
    return sum(m["role"] == "assistant" for m in history)


def script(history):
    k = n_actions(history)
    if k not in ANSWERS:
        raise AssertionError(f"the meter was asked about a state after {k} actions")
    return ANSWERS[k]


@pytest.fixture
def env(tiny_game):
    meter = ScriptedMeter(script, cache_size=0)
    e = ProgressMeterWrapper(TokenCounter(gym.make("ttg/ALFWorld-v0", game_files=str(tiny_game))), meter, failure_cost=C)
    yield e
    e.close()


def test_fields_on_a_hand_built_episode(env):
    _, info = env.reset(seed=0)
    assert {k: info[k] for k in ("ttg", "ttg_can_complete", "ttg_valid", "ttg_cost")} == {
        "ttg": 120,
        "ttg_can_complete": True,
        "ttg_valid": True,
        "ttg_cost": 120.0,
    }
    assert "ttg_delta" not in info
    rows = []
    for command in PLAN:
        _, _, terminated, truncated, info = env.step(react(command))
        rows.append(tuple(info[k] for k in ("ttg", "ttg_can_complete", "ttg_valid", "ttg_cost", "ttg_delta")))
    assert terminated and not truncated and info["success"]
    # Worked by hand: c = 120, 100, C (invalid), C (failure predicted), 40, 50, 0 (success anchor);
    # delta_t = c_t - c_{t+1}.
    assert rows == [
        (100, True, True, 100.0, 20.0),
        (None, False, False, C, 100.0 - C),
        (None, False, True, C, 0.0),
        (40, True, True, 40.0, C - 40.0),
        (50, True, True, 50.0, -10.0),
        (0, True, True, 0.0, 50.0),
    ]
    assert env.meter.calls == [1] * 6  # reset + 5 steps; the won state is anchored, not scored
    can = [True, True, False, False, True, True]
    remaining = [120, 100, np.nan, np.nan, 40, 50]
    np.testing.assert_array_equal(env.costs, step_costs(can, remaining, True, C))
    assert env.estimates[-1] is None and env.estimates[2].valid is False


def test_truncation_is_anchored_to_failure(tiny_game):
    meter = ScriptedMeter(script)
    env = ProgressMeterWrapper(gym.make("ttg/ALFWorld-v0", game_files=str(tiny_game), max_steps=2), meter, failure_cost=C)
    env.reset(seed=0)
    env.step(react("look"))
    _, _, terminated, truncated, info = env.step(react("look"))
    assert truncated and not terminated
    assert (info["ttg"], info["ttg_can_complete"], info["ttg_cost"], info["ttg_delta"]) == (None, False, C, 100.0 - C)


def test_default_failure_costs(tiny_game):
    env = ProgressMeterWrapper(gym.make("ttg/ALFWorld-v0", game_files=str(tiny_game)), ScriptedMeter(script))
    assert env.failure_cost == 16384
    stub = SimpleNamespace(spec=SimpleNamespace(id="ttg/PaperSearchQA-v0"))
    assert default_failure_cost(stub) == 6144
    assert default_failure_cost(SimpleNamespace(spec=None, unwrapped=SimpleNamespace(spec=None))) == 16384


def test_recorder_sees_the_fields(env, tmp_path):
    path = tmp_path / "t.jsonl"
    rec = TrajectoryRecorder(env, path)
    rec.reset(seed=0)
    for command in PLAN:
        rec.step(react(command))
    (record,) = list(read_trajectories(path))
    assert [s["info"]["ttg_cost"] for s in record["steps"]] == [100.0, C, C, 40.0, 50.0, 0.0]
    assert record["reset_info"]["ttg_cost"] == 120.0


def test_branch_has_its_own_costs(env):
    env.reset(seed=0)
    env.step(react(PLAN[0]))
    child = env.branch()
    assert isinstance(child, ProgressMeterWrapper) and child.meter is env.meter
    _, _, _, _, info = child.step(react(PLAN[1]))
    assert info["ttg_delta"] == 100.0 - C
    assert env.costs == [120.0, 100.0] and child.costs == [120.0, 100.0, C]
    _, _, _, _, info = env.step(react(PLAN[1]))
    assert info["ttg_cost"] == C


def test_score_actions_one_meter_call(env):
    env.reset(seed=0)
    for command in PLAN[:4]:
        env.step(react(command))
    before = (len(env.unwrapped.messages), list(env.costs), len(env.meter.calls))
    candidates = [react("open fridge 1"), react("look"), react("open fridge 1"), react(PLAN[0])]
    trials = env.try_actions(candidates)
    assert len(env.meter.calls) == before[2] + 1 and env.meter.calls[-1] == 3  # 3 distinct histories
    assert (len(env.unwrapped.messages), env.costs, len(env.meter.calls) - 1) == before
    for trial in trials:
        assert trial.info["ttg_cost"] == 50.0 and trial.info["ttg_delta"] == -10.0
        assert trial.env.costs == env.costs + [50.0]
    # A trial's branch goes on like a normal env.
    _, _, terminated, _, info = trials[0].env.step(react(PLAN[5]))
    assert terminated and info["ttg_cost"] == 0.0 and info["ttg_delta"] == 50.0


def test_score_actions_with_wrappers_above_and_a_winning_candidate(env, tmp_path):
    stack = TrajectoryRecorder(env, tmp_path / "t.jsonl")
    stack.reset(seed=0)
    for command in PLAN[:5]:
        stack.step(react(command))
    calls = len(env.meter.calls)
    trials = score_actions(stack, [react(PLAN[5]), react("this is not an action")])
    assert trials[0].terminated and trials[0].info["ttg_cost"] == 0.0 and trials[0].info["ttg_delta"] == 50.0
    assert trials[1].info["action_valid"] is False and trials[1].info["ttg_cost"] == 60.0
    assert env.meter.calls[calls:] == [1]  # only the branch that did not end was scored


def test_score_actions_needs_a_meter_wrapper(tiny_game):
    with pytest.raises(ValueError, match="no ProgressMeterWrapper"):
        plain = TokenCounter(gym.make("ttg/ALFWorld-v0", game_files=str(tiny_game)))
        plain.reset(seed=0)
        score_actions(plain, [react("look")])
