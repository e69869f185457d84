"""The offline tau2 user that converses from the task's user scenario (``user="scenario"``)."""

from __future__ import annotations

import gymnasium as gym
import pytest

pytest.importorskip("tau2")

import ttg_envs  # noqa: E402,F401
from ttg_envs.envs.tau2.users import STOP, first_person  # noqa: E402


def test_first_person():
    assert first_person("You received your order #W1 and you'd like to tell you.") == "I received my order #W1 and I'd like to tell me."
    assert first_person("You name is Liam.") == "My name is Liam."


def test_it_opens_with_the_request_gives_ids_when_asked_and_stops_when_done():
    env = gym.make("ttg/Tau2-v0", domain="retail", split="test", user="scenario")
    obs, _ = env.reset(seed=0, options={"task_index": 0})
    scenario = env.unwrapped.task_object.user_scenario.instructions
    assert obs == first_person(scenario.reason_for_call) and not obs.startswith("You")
    obs, _, terminated, _, info = env.step("Could you give me your name and zip code?")
    assert "Liam Thomas" in obs and "85049" in obs and not terminated and info["action_valid"]
    obs, _, terminated, _, _ = env.step("Shall I proceed with the exchange?")
    assert obs == "Yes, please go ahead." and not terminated
    obs, _, terminated, _, info = env.step("Done. Is there anything else I can help with?")
    assert obs.endswith(STOP) and terminated and "reward" in info["evaluation"]  # tau2's evaluator scored it
    env.close()
