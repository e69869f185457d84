"""The TextEnv core: action parsing, spaces, transcript, truncation, malformed input."""

from __future__ import annotations

import copy
import warnings

import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ttg_envs.core import Generation, TextSpace, copy_rng, parse_react


@pytest.mark.parametrize(
    "text, command",
    [
        ("<think>hm</think><action>go to fridge 1</action>", "go to fridge 1"),
        ("<action>  open   cabinet 1 \n</action>", "open cabinet 1"),
        ("<ACTION>look</ACTION>", "look"),
    ],
)
def test_parse_react_accepts_one_action(text, command):
    parsed = parse_react(text)
    assert parsed.error is None and parsed.command == command


@pytest.mark.parametrize(
    "text, why",
    [
        ("go to fridge 1", "no <action>"),
        ("<think>x</think><action>look", "not closed"),
        ("<action>look</action><action>inventory</action>", "found 2 <action> blocks"),
        ("<action>   </action>", "empty"),
    ],
)
def test_parse_react_says_what_was_wrong(text, why):
    parsed = parse_react(text)
    assert parsed.command is None
    assert why in parsed.error and "<think>your reasoning</think><action>" in parsed.error


@given(st.text())
def test_parse_react_never_raises(text):
    parsed = parse_react(text)
    assert (parsed.command is None) != (parsed.error is None)


def test_text_space_contains_prose_and_rejects_non_text():
    space = TextSpace()
    assert space.contains("Déjà vu — \n\t<think>ok</think>")
    assert not space.contains(3) and not space.contains(None)
    assert space.contains(space.sample())


def test_transcript_is_chat_messages(tiny_env):
    obs, _ = tiny_env.reset(seed=0)
    tiny_env.step("<think>a</think><action>go to cabinet 1</action>")
    messages = tiny_env.unwrapped.messages
    assert [m["role"] for m in messages] == ["system", "user", "assistant", "user"]
    assert messages[1]["content"] == obs
    assert messages[2]["content"] == "<think>a</think><action>go to cabinet 1</action>"


def test_generation_steps_like_its_text(tiny_env):
    tiny_env.reset(seed=0)
    obs_a = tiny_env.step(Generation("<action>go to fridge 1</action>", token_ids=[1, 2]))[0]
    tiny_env.reset(seed=0)
    obs_b = tiny_env.step("<action>go to fridge 1</action>")[0]
    assert obs_a == obs_b


def test_malformed_action_is_an_observation_and_counts_as_a_step(tiny_env):
    tiny_env.reset(seed=0)
    obs, reward, terminated, truncated, info = tiny_env.step("I would like to open the fridge")
    assert "no <action>...</action> block" in obs and info["error"] in obs
    assert info["action_valid"] is False and info["elapsed_steps"] == 1
    assert reward == 0.0 and not terminated and not truncated
    obs, *_, info = tiny_env.step(12345)
    assert "expected text, got int" in obs and info["action_valid"] is False


def test_inadmissible_command_gets_the_engine_answer(tiny_env):
    tiny_env.reset(seed=0)
    key = tiny_env.unwrapped._state_key()
    obs, _, _, _, info = tiny_env.step("<action>fly to the moon</action>")
    assert obs.startswith("Nothing happens.")
    assert info["action_valid"] is False and "not an admissible command" in info["error"]
    assert info["state_key"] == key


def test_truncation_at_max_steps(tiny_game):
    import gymnasium as gym

    env = gym.make("ttg/ALFWorld-v0", game_files=str(tiny_game), max_steps=3)
    env.reset(seed=0)
    outcomes = [env.step("<action>look</action>")[2:4] for _ in range(3)]
    assert outcomes == [(False, False), (False, False), (False, True)]
    with pytest.raises(Exception, match="reset"):
        env.step("<action>look</action>")


def test_check_env_passes_without_warnings(tiny_env):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        check_env(tiny_env.unwrapped, skip_render_check=True)
    assert [str(w.message) for w in caught] == []


@settings(max_examples=1000, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    st.one_of(
        st.text(max_size=300),
        st.sampled_from(["<action>", "</action>", "<action></action>", "<think>"]),
        st.builds(lambda s: f"<action>{s}</action>", st.text(max_size=40)),
    )
)
def test_arbitrary_strings_raise_nothing(tiny_env, text):
    env = tiny_env
    if env.unwrapped.task is None or env.unwrapped.done:
        env.reset(seed=0)
    obs, reward, terminated, truncated, info = env.step(text)
    assert isinstance(obs, str) and obs
    if not info["action_valid"]:
        assert info["error"] and (info["error"] in obs or obs.startswith("Nothing happens."))


@pytest.mark.parametrize("bits", [np.random.PCG64, np.random.MT19937, np.random.Philox, np.random.SFC64, np.random.PCG64DXSM])
def test_copy_rng_draws_the_same_sequence_and_is_independent(bits):
    rng = np.random.Generator(bits(np.random.SeedSequence(7, spawn_key=(2,))))
    rng.random(3)
    rng.integers(10)  # a half-used 32-bit word (PCG64's has_uint32) is part of the state
    copied = copy_rng(rng)
    assert type(copied) is type(rng) and type(copied.bit_generator) is bits
    assert copied.bit_generator is not rng.bit_generator
    reference = copy.deepcopy(rng)
    draws = [rng.random(5).tolist(), rng.integers(0, 1 << 40, size=5).tolist(), rng.normal(size=3).tolist()]
    assert [copied.random(5).tolist(), copied.integers(0, 1 << 40, size=5).tolist(), copied.normal(size=3).tolist()] == draws
    # Independent: drawing from the copy moved neither the original nor a second copy.
    again = copy_rng(reference)
    copied.random(100)
    assert reference.random(5).tolist() == draws[0] and again.random(5).tolist() == draws[0]
    # The seed sequence spawns as a deep copy's does, and spawning on the copy leaves the original's count.
    assert [g.random() for g in copy_rng(reference).spawn(2)] == [g.random() for g in copy.deepcopy(reference).spawn(2)]
    assert reference.bit_generator.seed_seq.n_children_spawned == 0


def test_copy_rng_of_none_and_other_objects():
    assert copy_rng(None) is None
    legacy = np.random.RandomState(3)
    copied = copy_rng(legacy)
    assert copied is not legacy and copied.random_sample(4).tolist() == legacy.random_sample(4).tolist()


def test_branch_copies_the_rng(tiny_env):
    env = tiny_env.unwrapped
    env.reset(seed=5)
    child = env.branch()
    assert child.np_random is not env.np_random
    assert child.np_random.random(4).tolist() == env.np_random.random(4).tolist()
    child.close()
