"""action_format="lenient": one named admissible command, or one command on its own line; strict stays the default."""

from __future__ import annotations

import gymnasium as gym
import pytest
from hypothesis import given
from hypothesis import strategies as st

from ttg_envs.core import parse_lenient, parse_react

COMMANDS = ["go to bed 1", "go to drawer 1", "go to drawer 10", "look", "look at mug 1", "take mug 1 from desk 1"]


@pytest.mark.parametrize(
    "text, command",
    [
        ("1. Go to bed 1.", "go to bed 1"),  # SmolLM2's prose answer
        ("I will go to drawer 10 now", "go to drawer 10"),  # drawer 1 is not named by drawer 10
        ("<think>the mug</think>\nAction: look at mug 1", "look at mug 1"),  # "look" inside it is no second choice
        ("<action>go to bed 1</action>", "go to bed 1"),  # strict answers stay as they are
        ("- open the window", "open the window"),  # one line, no admissible command named
        ("<action>go to bed 1", "go to bed 1"),  # an unclosed tag
    ],
)
def test_lenient_reads(text, command):
    assert parse_lenient(text, COMMANDS).command == command


@pytest.mark.parametrize(
    "text",
    [
        "go to bed 1 or go to drawer 1",  # two commands named
        "first this\nthen that",  # several lines, nothing named
        "",
        "<think>go to bed 1</think>",  # only inside the reasoning
    ],
)
def test_lenient_refuses_with_the_strict_error(text):
    parsed = parse_lenient(text, COMMANDS)
    assert parsed.command is None and parsed.error == parse_react(text).error


@given(st.text(max_size=300))
def test_lenient_accepts_everything_strict_accepts_and_never_raises(text):
    strict, lenient = parse_react(text), parse_lenient(text, COMMANDS)
    if strict.error is None:
        assert lenient == strict
    assert (lenient.command is None) == (lenient.error is not None)


def test_env_option():
    strict = gym.make("ttg/ALFWorld-v0", split="valid_seen")
    lenient = gym.make("ttg/ALFWorld-v0", split="valid_seen", action_format="lenient")
    for env in (strict, lenient):
        env.reset(seed=0, options={"task_index": 0})
    command = lenient.unwrapped.admissible_commands[0]
    prose = f"1. {command.capitalize()}."
    assert not strict.step(prose)[4]["action_valid"]
    obs, _, _, _, info = lenient.step(prose)
    strict.reset(seed=0, options={"task_index": 0})
    expected, _, _, _, strict_info = strict.step(f"<action>{command}</action>")
    assert info["action_valid"] and obs == expected and info["state_key"] == strict_info["state_key"]
    with pytest.raises(ValueError, match="action_format must be one of"):
        gym.make("ttg/ALFWorld-v0", action_format="loose")
    with pytest.raises(ValueError, match="action syntax of its own"):
        gym.make("ttg/PaperSearchQA-v0", action_format="lenient")
