"""ALFWorld's declared task state and the meter wrapper's carry over steps that leave it unchanged
(issue 23: no reward for doing nothing)."""

from __future__ import annotations

import gymnasium as gym
import pytest

import ttg_envs  # noqa: F401
from ttg_envs import registry
from ttg_envs.envs.alfworld.policies import make_policy, react
from ttg_envs.meters import ScriptedMeter
from ttg_envs.training.meter.datasets import Trajectory
from ttg_envs.training.meter.evaluation import evaluate_meter, noop_preference, task_state_unchanged
from ttg_envs.wrappers import ProgressMeterWrapper, make_env
from ttg_envs.wrappers.branching import branch
from ttg_envs.wrappers.plan_length import plan_length
from ttg_envs.wrappers.progress_meter import score_actions

NOOPS = ("help", "look", "inventory", "fly to the moon")


def _last_action(history) -> str:
    assistant = [m["content"] for m in history if m.get("role") == "assistant"]
    return assistant[-1] if assistant else ""


def _help_loving(history):
    """A meter with the shipped one's hole: 10 tokens less per step taken, and `help` looks like the goal."""
    steps = sum(m.get("role") == "assistant" for m in history)
    return True, 1000 - 10 * steps - (500 if "<action>help</action>" in _last_action(history) else 0)


def test_noop_commands_keep_the_task_state_and_moves_change_it():
    env = gym.make("ttg/ALFWorld-v0", split="valid_seen")
    base = env.unwrapped
    env.reset(seed=0, options={"task_index": 0})
    key, full = base.task_state_key(), base._state_key()
    examines = [c for c in base.admissible_commands if c.startswith("examine ")]
    for command in (*NOOPS, *examines[:1]):
        child = branch(env)
        child.step(react(command))
        assert child.unwrapped.task_state_key() == key, command
    child = branch(env)
    child.step(react("help"))
    assert child.unwrapped._state_key() != full  # help sets a bookkeeping fact: the full key cannot tell
    moved = branch(env)
    moved.step(react(next(c for c in base.admissible_commands if c.startswith("go to "))))
    assert moved.unwrapped.task_state_key() != key
    env.close()


def test_plan_length_never_changes_across_a_step_that_keeps_the_task_state():
    # The planner's own plans (no reuse of earlier plans, which can be longer than optimal).
    env = gym.make("ttg/ALFWorld-v0", split="valid_seen", plan_repair=False, max_steps=1000)
    base = env.unwrapped
    policy = make_policy("noisy_expert", seed=3, eps=0.5)
    checked = 0
    for index in (0, 3):
        env.reset(seed=0, options={"task_index": index})
        for t in range(8):
            if t % 2 == 0:
                key, before = base.task_state_key(), plan_length(base)
                for command in [*base.admissible_commands, "help", "fly to the moon"]:
                    child = branch(env)
                    _, _, terminated, _, _ = child.step(react(command))
                    if not terminated and child.unwrapped.task_state_key() == key:
                        assert plan_length(child.unwrapped) == before, (index, t, command)
                        checked += 1
            _, _, terminated, truncated, _ = env.step(policy(env))
            if terminated or truncated:
                break
    assert checked >= 20
    env.close()


def test_carry_noops_keeps_the_estimate_and_skips_the_meter():
    meter = ScriptedMeter(_help_loving)
    env = ProgressMeterWrapper(make_env("ttg/ALFWorld-v0", split="valid_seen"), meter, carry_noops=True)
    _, info = env.reset(seed=0, options={"task_index": 0})
    calls = len(meter.calls)
    _, _, _, _, info = env.step(react("help"))
    assert info["ttg_carried"] and info["ttg_delta"] == 0.0 and info["ttg"] == 1000
    assert len(meter.calls) == calls  # carried, not scored
    go = next(c for c in env.unwrapped.admissible_commands if c.startswith("go to "))
    _, _, _, _, info = env.step(react(go))
    assert not info["ttg_carried"] and info["ttg_delta"] == pytest.approx(20.0)  # v_0 (carried) - v_2
    # Branch trials (what the guided selector compares) carry the same way.
    other = next(c for c in env.unwrapped.admissible_commands if c.startswith("go to ") and c != go)
    trials = {t.action: t for t in score_actions(env, [react("help"), react("look"), react(other)])}
    assert trials[react("help")].info["ttg_delta"] == 0.0 and trials[react("look")].info["ttg_carried"]
    assert trials[react(other)].info["ttg_delta"] == pytest.approx(10.0)
    env.close()


def test_without_carry_the_wrapper_is_unchanged():
    env = ProgressMeterWrapper(make_env("ttg/ALFWorld-v0", split="valid_seen"), ScriptedMeter(_help_loving))
    env.reset(seed=0, options={"task_index": 0})
    _, _, _, _, info = env.step(react("help"))
    assert "ttg_carried" not in info and info["ttg_delta"] == pytest.approx(510.0)
    env.close()


def test_carry_needs_an_env_that_declares_its_task_state():
    assert registry.declares_task_state("ttg/ALFWorld-v0") and not registry.declares_task_state("ttg/PaperSearchQA-v0")
    with pytest.raises(ValueError, match="declares none"):
        ProgressMeterWrapper(make_env("ttg/PaperSearchQA-v0"), ScriptedMeter(lambda h: (True, 1)), carry_noops=True)


def _walk(task_index: int, commands) -> Trajectory:
    env = make_env("ttg/ALFWorld-v0", split="valid_seen")
    _, info = env.reset(seed=0, options={"task_index": task_index})
    for command in commands:
        env.step(react(command))
    messages = list(env.unwrapped.messages)
    env.close()
    actions = [i for i, m in enumerate(messages) if m["role"] == "assistant"]
    return Trajectory("t", messages, actions, False, None, policy="walk", task=info["task"])


def test_noop_check_reports_the_raw_and_the_carried_figure():
    env = gym.make("ttg/ALFWorld-v0", split="valid_seen")
    env.reset(seed=0, options={"task_index": 0})
    first = env.unwrapped.expert_plan()[0]
    env.close()
    traj = _walk(0, ["help", first])
    expert = make_policy("expert")
    report = noop_preference(
        ScriptedMeter(_help_loving),
        "ttg/ALFWorld-v0",
        [traj],
        respond=expert.respond,
        failure_cost=16384,
        progress=False,
        carry_noops=True,
    )
    assert report.states == 2
    assert report.rate == 1.0 and report.by_command == {"help": 2}  # the raw meter prefers help everywhere
    assert report.carried_rate == 0.0 and report.carried_ties_best == 0  # carried: help gains 0, the best command 10
    assert report.carried_by_best == {}


def test_noop_check_names_the_moves_the_carried_meter_reads_as_no_progress():
    # A meter that predicts 10 tokens more after every step: a carried no-op (0) beats every move.
    env = gym.make("ttg/ALFWorld-v0", split="valid_seen")
    env.reset(seed=0, options={"task_index": 0})
    first = env.unwrapped.expert_plan()[0]
    env.close()
    report = noop_preference(
        ScriptedMeter(lambda h: (True, 100 + 10 * sum(m.get("role") == "assistant" for m in h))),
        "ttg/ALFWorld-v0",
        [_walk(0, [first])],
        respond=make_policy("expert").respond,
        failure_cost=16384,
        progress=False,
        carry_noops=True,
    )
    assert report.states == 1 and report.carried_above_best == 1
    assert report.carried_by_best == {" ".join(w for w in first.split() if not w.isdigit()): 1}


def test_step_figures_with_the_estimate_carried():
    traj = _walk(0, ["look", "help"])
    env = gym.make("ttg/ALFWorld-v0", split="valid_seen")
    carried = task_state_unchanged(traj, env)
    env.close()
    assert carried == [True, True]
    traj.step_labels = [-1, -1]  # pretend both were bad, to see the deltas' signs
    raw = evaluate_meter(ScriptedMeter(_help_loving), [traj], failure_cost=16384, progress=False)
    both = evaluate_meter(ScriptedMeter(_help_loving), [traj], failure_cost=16384, progress=False, carried=[carried])
    assert raw.steps["ties"] == 0 and raw.bad_step_accuracy == 0.0
    assert both.steps["ties"] == 2  # no predicted change across either no-op


def test_a_budget_aware_meter_carries_the_same_state_at_fewer_turns_left():
    from ttg_envs.meters import load_meter

    meter = load_meter("ttg/ALFWorld-v0", threads=1)
    assert meter.budget_aware
    env = ProgressMeterWrapper(make_env("ttg/ALFWorld-v0", split="valid_seen"), meter, carry_noops=True)
    _, first = env.reset(seed=0, options={"task_index": 0})
    start = list(env.unwrapped.messages)
    assert meter.estimate_at_turns([start], [0])[0].remaining_tokens == first["ttg"]
    env.step(react("help"))
    _, _, _, _, info = env.step(react("look"))
    # The start state's history read with two turns spent: no help or look text reaches the meter.
    assert info["ttg_carried"] and info["ttg"] == meter.estimate_at_turns([start], [2])[0].remaining_tokens
    trials = score_actions(env, [react("inventory")])
    assert trials[0].info["ttg"] == meter.estimate_at_turns([start], [3])[0].remaining_tokens
    env.close()
