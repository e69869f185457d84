"""Trials started together (``TextEnv.start_trials``, AWM's early first calls) equal trials stepped one after another."""

from __future__ import annotations

import hashlib
import json

import gymnasium as gym
import pytest

from ttg_envs.agents import GuidedSelector
from ttg_envs.core import TextEnv
from ttg_envs.envs.awm import AWMEnv
from ttg_envs.envs.awm.policies import call_text
from ttg_envs.meters import ScriptedMeter
from ttg_envs.wrappers import make_env
from ttg_envs.wrappers.branching import try_actions

WRITE = call_text("update_deal_stage", {"deal_id": 1, "stage": "closed_won"})
OTHER_WRITE = call_text("update_deal_stage", {"deal_id": 2, "stage": "proposal"})
READ = call_text("list_deals", {})
INVALID = call_text("update_deal_stage", {"deal_id": "one", "stage": 3})  # fails validation: never run
UNKNOWN = call_text("no_such_tool", {})
TWO = "<think>Two.</think>\n" + "\n".join(
    call_text(n, a).split("\n", 1)[1] for n, a in [("update_deal_stage", {"deal_id": 3, "stage": "proposal"}), ("list_deals", {})]
)
CANDIDATES = [
    [WRITE, READ, OTHER_WRITE, INVALID],
    [READ, "<tool_call>{bad json</tool_call>", UNKNOWN, TWO],
    [OTHER_WRITE, WRITE, READ + " ", "All done."],
]


def digest_meter() -> ScriptedMeter:
    """Remaining tokens that depend on the whole history, so the choice moves between candidates."""

    def fn(history):
        blob = json.dumps(list(history), sort_keys=True, default=str).encode()
        return True, int(hashlib.sha256(blob).hexdigest()[:6], 16) % 500

    return ScriptedMeter(fn)


def play(together: bool, monkeypatch) -> list:
    """Guided steps over :data:`CANDIDATES`: every trial's results, the choice and the state after it."""
    with monkeypatch.context() as patch:
        if not together:
            patch.setattr(AWMEnv, "start_trials", TextEnv.start_trials)
        env = make_env("ttg/AWM-v0", meter=digest_meter(), scenarios=["crm_1"], max_steps=8)
        selector = GuidedSelector(None, k=4)
        seen = [env.reset(seed=0, options={"task_id": "crm_1/0"})[0]]
        for candidates in CANDIDATES:
            trials = selector.trials(env, candidates)
            seen.append([(t.observation, t.reward, t.terminated, t.info["state_key"], t.info["ttg_delta"]) for t in trials])
            for trial in trials:
                trial.env.close()
            chosen = selector.choose(env, candidates)
            seen.append((selector.last.chosen, selector.last.deltas, env.step(chosen)[:4], env.unwrapped._state_key()))
            if env.unwrapped.done:
                break
        env.close()
    return seen


def test_awm_trials_started_together_equal_trials_one_after_another(monkeypatch):
    calls = []
    real = AWMEnv.start_trials
    monkeypatch.setattr(AWMEnv, "start_trials", lambda self, *a, **k: calls.append(1) or real(self, *a, **k))
    together = play(True, monkeypatch)
    assert calls, "the selector should use the env's start_trials"
    assert together == play(False, monkeypatch)


@pytest.fixture(scope="module")
def crm_env():
    env = gym.make("ttg/AWM-v0", scenarios=["crm_1"], max_steps=8)
    yield env
    env.close()


@pytest.mark.parametrize("armed", [WRITE, INVALID, TWO])
@pytest.mark.parametrize("stepped", [OTHER_WRITE, READ, "All done.", "<tool_call>{bad json</tool_call>"])
def test_an_awm_branch_stepped_with_another_text_undoes_its_early_call(crm_env, armed, stepped):
    crm_env.reset(options={"task_id": "crm_1/0"})
    crm_env.step(READ)
    base = crm_env.unwrapped
    (early,) = base.start_trials([armed])
    fresh = base.branch()
    for _ in range(2):  # after an invalid step the early call is still pending, then undone by the next one
        a, b = early.step(stepped), fresh.step(stepped)
        assert (a[0], a[1], a[2], a[4]["state_key"]) == (b[0], b[1], b[2], b[4]["state_key"])
        if a[2]:
            assert a[4]["success"] == b[4]["success"]
            break
    for env in (early, fresh):
        env.close()


def test_an_awm_env_whose_trials_are_all_dropped_takes_its_state_back(crm_env):
    # The last trial took the env's own workspace; the env's next use loads the state again.
    crm_env.reset(options={"task_id": "crm_1/0"})
    crm_env.step(WRITE)
    base = crm_env.unwrapped
    key, fresh = base._state_key(), base.branch()
    trials = base.start_trials([OTHER_WRITE, READ, WRITE])
    assert trials[-1]._workspace.app is not None and base._lent is not None
    for trial in trials:
        trial.step(trial.actions[-1] if trial.actions else OTHER_WRITE)
        trial.close()
    for action in (OTHER_WRITE, READ, "All done."):  # a step first: its call takes the state back
        a, b = crm_env.step(action), fresh.step(action)
        assert (a[0], a[1], a[2], a[4]["state_key"]) == (b[0], b[1], b[2], b[4]["state_key"])
    fresh.close()
    crm_env.reset(options={"task_id": "crm_1/0"})
    crm_env.step(WRITE)
    for trial in base.start_trials([READ, OTHER_WRITE]):
        trial.close()
    assert base._state_key() == key  # so does a state key


def test_unstepped_trial_branches_are_closed(crm_env, monkeypatch):
    crm_env.reset(options={"task_id": "crm_1/0"})
    closed = []
    real = AWMEnv.close
    monkeypatch.setattr(AWMEnv, "close", lambda self: closed.append(self) or real(self))

    def boom(self, action):
        raise RuntimeError("a wrapper failed")

    monkeypatch.setattr(AWMEnv, "step", boom)
    with pytest.raises(RuntimeError):
        try_actions(crm_env, [WRITE, READ, OTHER_WRITE])
    assert len(closed) == 2  # the first one was handed out (its caller owns it); the two others were closed


def test_envs_without_the_hook_branch_one_after_another(tiny_env, monkeypatch):
    cls = type(tiny_env.unwrapped)
    assert cls.start_trials is TextEnv.start_trials
    order = []
    real_branch, real_step = cls.branch, cls.step
    monkeypatch.setattr(cls, "branch", lambda self, method="auto": order.append("branch") or real_branch(self, method))
    monkeypatch.setattr(cls, "step", lambda self, action: order.append("step") or real_step(self, action))
    tiny_env.reset(seed=0)
    trials = try_actions(tiny_env, ["<action>look</action>", "<action>inventory</action>"])
    assert order == ["branch", "step", "branch", "step"]
    for trial in trials:
        trial.env.close()
