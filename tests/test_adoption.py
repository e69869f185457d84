"""Guided selection adopts the chosen trial's branch: the stack ends exactly as if the action had been stepped."""

from __future__ import annotations

import hashlib
import json

import pytest

from ttg_envs.agents import GuidedSelector, selectors
from ttg_envs.core import TextEnv
from ttg_envs.meters import ScriptedMeter
from ttg_envs.registry import make_policy
from ttg_envs.wrappers import make_env
from ttg_envs.wrappers.branching import find_wrapper
from ttg_envs.wrappers.progress_meter import find_meter_wrapper
from ttg_envs.wrappers.token_counter import TokenCounter

ENVS = {
    "alfworld": ("ttg/ALFWorld-v0", {"split": "valid_seen"}, {"task_index": 0}, "expert"),
    "awm": ("ttg/AWM-v0", {}, {"task_id": "crm_1/0"}, "expert"),
    "papersearchqa": ("ttg/PaperSearchQA-v0", {}, {"task_index": 0}, "expert"),
    "bfcl": ("ttg/BFCL-v0", {"split": "multi_turn"}, {"task_index": 0}, "gold"),
    "tau2": ("ttg/Tau2-v0", {"domain": "retail", "user": "gold"}, {"task_index": 0}, "gold"),
}


def digest_meter() -> ScriptedMeter:
    """Remaining tokens that depend on the whole history, so the choice moves between candidates."""

    def fn(history):
        blob = json.dumps(list(history), sort_keys=True, default=str).encode()
        return True, int(hashlib.sha256(blob).hexdigest()[:6], 16) % 500

    return ScriptedMeter(fn)


def play(name: str, tmp_path, label: str, steps: int = 6):
    env_id, kwargs, options, policy_name = ENVS[name]
    path = tmp_path / f"{label}.jsonl"
    env = make_env(env_id, meter=digest_meter(), recorder=path, max_steps=steps, **kwargs)
    policy = make_policy(env_id, policy_name, seed=0)
    selector = GuidedSelector(None, k=4)
    out = [env.reset(seed=0, options=options)]
    while True:
        action = policy(env)
        text = getattr(action, "text", action)
        candidates = [text, text + " ", "<think>hm</think>", text + "  "]
        chosen = selector.choose(env, candidates)
        result = env.step(chosen)
        out.append((selector.last.chosen, result))
        if result[2] or result[3]:
            break
    base = env.unwrapped
    state = {
        "messages": base.messages,
        "actions": base.actions,
        "state_key": base._state_key(),
        "tokens": find_wrapper(env, TokenCounter).step_tokens,
        "costs": find_meter_wrapper(env).costs,
        "estimates": find_meter_wrapper(env).estimates,
        "rng": base.np_random.bit_generator.state,
    }
    env.close()
    return out, state, path.read_bytes()


@pytest.mark.parametrize("name", sorted(ENVS))
def test_adopting_the_chosen_branch_equals_stepping_it_again(name, tmp_path, monkeypatch):
    adopted = []
    real_adopt = TextEnv._take_offer

    def counting(self, text):
        result = real_adopt(self, text)
        adopted.append(result is not None)
        return result

    monkeypatch.setattr(TextEnv, "_take_offer", counting)
    after = play(name, tmp_path, "adopt")
    assert any(adopted), "no step adopted its branch"
    monkeypatch.setattr(selectors, "offer_trial", lambda env, trial: False)
    adopted.clear()
    before = play(name, tmp_path, "restep")
    assert not any(adopted)
    assert after[0] == before[0]  # chosen candidates and every step's (obs, reward, terminated, truncated, info)
    assert after[1] == before[1]  # transcript, engine state, token counts, costs, estimates, RNG
    assert after[2] == before[2]  # the recorded trajectory, byte for byte
    assert after[2].count(b"\n") == 1


def test_an_offer_is_dropped_when_another_text_is_stepped():
    env = make_env("ttg/PaperSearchQA-v0", meter=digest_meter())
    env.reset(seed=0, options={"task_index": 0})
    selector = GuidedSelector(None, k=2)
    selector.choose(env, ["<search>kinase</search>", "<search>protein</search>"])
    chosen = selector.last.candidates[selector.last.chosen].text
    other = next(c for c in ("<search>kinase</search>", "<search>protein</search>") if c != chosen)
    reference = make_env("ttg/PaperSearchQA-v0", meter=digest_meter())
    reference.reset(seed=0, options={"task_index": 0})
    assert env.step(other) == reference.step(other)
    assert env.unwrapped.messages == reference.unwrapped.messages
    assert env.unwrapped._offer is None
