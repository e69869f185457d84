"""Branching: a branch's future equals the original's; snapshot and replay agree; originals stay untouched."""

from __future__ import annotations

import gymnasium as gym
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ttg_envs import BranchDivergenceError
from ttg_envs.wrappers import Lookahead, TokenCounter, branch, try_actions

SETTINGS = settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


def _play(env, choices):
    """Step ``env`` with admissible commands picked by index; return every step's outcome."""
    out = []
    for c in choices:
        commands = env.unwrapped.admissible_commands
        obs, reward, terminated, truncated, info = env.step(f"<action>{commands[c % len(commands)]}</action>")
        out.append((obs, reward, terminated, truncated, info["state_key"], info["success"]))
        if terminated or truncated:
            break
    return out


def _fresh(env, choices):
    env.reset(seed=0)
    return _play(env, choices)


@pytest.fixture(params=["bundled", "tiny"])
def branch_env(request, tiny_game):
    if request.param == "tiny":
        env = gym.make("ttg/ALFWorld-v0", game_files=str(tiny_game))
    else:
        env = gym.make("ttg/ALFWorld-v0", split="valid_seen", task_types=["pick_two_obj_and_place"])
    yield TokenCounter(Lookahead(env))
    env.close()


@SETTINGS
@given(
    prefix=st.lists(st.integers(0, 50), max_size=10),
    suffix=st.lists(st.integers(0, 50), min_size=1, max_size=8),
    method=st.sampled_from(["snapshot", "replay"]),
)
def test_branch_future_equals_original(branch_env, prefix, suffix, method):
    env = branch_env
    env.reset(seed=0)
    if any(o[2] or o[3] for o in _play(env, prefix)):
        return
    child = branch(env, method)
    assert child.unwrapped.messages == env.unwrapped.messages
    # Interleave the two so that they keep swapping the shared engine.
    child_out, parent_out = [], []
    for c in suffix:
        child_out += _play(child, [c])
        parent_out += _play(env, [c])
        if child_out[-1][2] or child_out[-1][3]:
            break
    assert child_out == parent_out
    assert child.step_tokens == env.step_tokens


def test_snapshot_and_replay_branches_agree(branch_env):
    env = branch_env
    env.reset(seed=0)
    _play(env, [1, 2, 0, 3])
    a, b = env.branch("snapshot"), env.branch("replay")
    assert _play(a, [2, 1, 1, 0]) == _play(b, [2, 1, 1, 0])


def test_try_actions_leaves_original_untouched(branch_env):
    env = branch_env
    env.reset(seed=0)
    _play(env, [0])
    before = (list(env.unwrapped.messages), env.unwrapped._state_key(), list(env.step_tokens))
    commands = env.unwrapped.admissible_commands
    trials = try_actions(env, [f"<action>{c}</action>" for c in commands[:4]] + ["junk"])
    assert len(trials) == 5 and not trials[-1].info["action_valid"]
    assert len({t.info["state_key"] for t in trials[:4]}) >= 2
    assert (list(env.unwrapped.messages), env.unwrapped._state_key(), list(env.step_tokens)) == before
    # A trial branch goes on independently of the original and of its siblings.
    assert trials[0].env.unwrapped.elapsed_steps == env.unwrapped.elapsed_steps + 1


def test_reset_after_branch_does_not_disturb_the_branch(tiny_env):
    tiny_env.reset(seed=0)
    _play(tiny_env, [0, 0])
    child = branch(tiny_env)
    expected = _play(branch(tiny_env), [0, 1])
    tiny_env.reset(seed=0)
    assert _play(child, [0, 1]) == expected


def test_replay_divergence_raises(tiny_env, monkeypatch):
    tiny_env.reset(seed=0)
    _play(tiny_env, [0])
    env = tiny_env.unwrapped
    monkeypatch.setattr(type(env), "_state_key", lambda self: str(id(self)))
    with pytest.raises(BranchDivergenceError, match="different engine state"):
        env.branch("replay")


def test_resetting_a_sharing_env_keeps_the_other_states(tiny_env):
    tiny_env.reset(seed=0)
    _play(tiny_env, [0, 0])
    child = branch(tiny_env)
    _play(child, [1])
    expected = _play(branch(child), [0, 0])
    tiny_env.reset(seed=0)  # same game: a restore on the shared engine
    assert _play(child, [0, 0]) == expected
    assert tiny_env.unwrapped.elapsed_steps == 0 and tiny_env.unwrapped._state_key() == _fresh_key(tiny_env)


def _fresh_key(env):
    child = branch(env)
    child.reset(seed=0)
    return child.unwrapped._state_key()
