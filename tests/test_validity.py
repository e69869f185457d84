"""One validity rule in every env and scoring mode (``INFO_FIELDS["action_valid"]``): a call to no
tool, a malformed call and an empty reply are invalid steps, whatever the scoring does next."""

from __future__ import annotations

import gymnasium as gym
import pytest

import ttg_envs  # noqa: F401
from ttg_envs.info_fields import INFO_FIELDS

EMPTY = ("", "   ", "<think>only reasoning</think>")
UNKNOWN_TOOL = '<tool_call>\n{"name": "no_such_tool", "arguments": {}}\n</tool_call>'
MALFORMED_CALL = '<tool_call>\n{"name": "x", "arguments": \n</tool_call>'


def invalid_steps(env_id: str, texts, **kwargs) -> list[tuple[str, bool, str | None]]:
    env = gym.make(env_id, **kwargs)
    try:
        env.reset(seed=0, options={"task_index": 0})
        out = []
        for text in texts:
            _, _, terminated, truncated, info = env.step(text)
            out.append((text, info["action_valid"], info.get("error")))
            if terminated or truncated:
                env.reset(seed=0, options={"task_index": 0})
        return out
    finally:
        env.close()


def assert_all_invalid(steps):
    for text, valid, error in steps:
        assert valid is False and error, f"{text!r} was a valid step"


def test_the_rule_is_stated_in_info_fields():
    meaning = INFO_FIELDS["action_valid"][1]
    assert "call to no tool" in meaning and "malformed call" in meaning and "empty reply" in meaning


@pytest.mark.parametrize("env_id", ["ttg/ALFWorld-v0", "ttg/PaperSearchQA-v0"])
def test_react_envs(env_id):
    pytest.importorskip("alfworld" if "ALF" in env_id else "bm25s")
    assert_all_invalid(invalid_steps(env_id, [*EMPTY, "<action>look", "<search></search>"]))


@pytest.mark.parametrize("scoring", ["official", "lenient"])
@pytest.mark.parametrize("category", ["simple_python", "irrelevance", "multi_turn_base"])
def test_bfcl_in_both_scorings(scoring, category):
    pytest.importorskip("bfcl_eval")
    assert_all_invalid(invalid_steps("ttg/BFCL-v0", [UNKNOWN_TOOL, MALFORMED_CALL, *EMPTY], categories=category, scoring=scoring))
    # Prose is a reply, not a call: valid (on an irrelevance entry it is also the right answer).
    [(_, valid, _)] = invalid_steps("ttg/BFCL-v0", ["I cannot do that with these tools."], categories=category, scoring=scoring)
    assert valid is True


def test_bfcl_official_prompting_style():
    pytest.importorskip("bfcl_eval")
    texts = ["[no_such_tool(a=1)]", "[calculate_triangle_area(base=10, height=5", *EMPTY]
    assert_all_invalid(invalid_steps("ttg/BFCL-v0", texts, categories="simple_python", model_style="prompting"))


def test_bfcl_official_verdict_is_still_the_harness():
    pytest.importorskip("bfcl_eval")
    # The harness reads an empty multi-turn step as "no call": the turn ends and is checked, as before.
    env = gym.make("ttg/BFCL-v0", categories="multi_turn_base")
    env.reset(seed=0, options={"task_index": 0})
    _, _, terminated, _, info = env.step("")
    assert terminated and info["evaluation"]["valid"] is False and info["action_valid"] is False
    env.close()


def test_tau2():
    pytest.importorskip("tau2")
    assert_all_invalid(invalid_steps("ttg/Tau2-v0", [UNKNOWN_TOOL, MALFORMED_CALL, *EMPTY], domain="mock", user="gold"))


def test_awm_empty_reply_is_an_invalid_step_not_a_final_answer():
    pytest.importorskip("fastapi")
    steps = invalid_steps("ttg/AWM-v0", [UNKNOWN_TOOL, MALFORMED_CALL, *EMPTY])
    assert_all_invalid(steps)
