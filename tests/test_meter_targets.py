"""The meter's expert roll-out targets, budget awareness, the planner ceiling and the no-op check."""

from __future__ import annotations

import math

import pytest

from ttg_envs.agents import PlannerSelector
from ttg_envs.core import Generation
from ttg_envs.eval.report import capture_ratios
from ttg_envs.meters import ScriptedMeter
from ttg_envs.registry import make_policy
from ttg_envs.training.meter.datasets import Trajectory
from ttg_envs.training.meter.regression import trajectory_targets
from ttg_envs.wrappers import PlanLength, ProgressMeterWrapper, TokenCounter, make_env


class FixedActor:
    """Returns the given texts as the k candidates of every env."""

    def __init__(self, texts):
        self.texts = list(texts)

    def sample(self, envs, n=1):
        return [[Generation(t) for t in self.texts[:n]] for _ in envs]


def react(command: str) -> str:
    return make_policy("ttg/ALFWorld-v0", "expert").respond(command)


def test_expert_ttg_equals_the_tokens_of_a_real_expert_rollout():
    expert = make_policy("ttg/ALFWorld-v0", "expert")
    noisy = make_policy("ttg/ALFWorld-v0", "noisy_expert", eps=0.6, seed=3)
    env = PlanLength(make_env("ttg/ALFWorld-v0", split="train"), respond=expert.respond)
    try:
        _, info = env.reset(seed=0, options={"task_index": 11})
        checked = 0
        for _ in range(6):
            rollout = env.branch()
            tokens, done, last = 0, False, {}
            while not done:
                _, _, terminated, truncated, last = rollout.step(expert(rollout))
                tokens += last["assistant_tokens"]
                done = terminated or truncated
            assert last["success"] and info["expert_ttg"] == tokens
            checked += 1
            _, _, terminated, truncated, info = env.step(noisy(env))
            if terminated or truncated:
                break
        assert checked >= 3
    finally:
        env.close()


def test_expert_ttg_is_none_when_the_plan_does_not_fit_in_the_turns_left():
    expert = make_policy("ttg/ALFWorld-v0", "expert")
    env = PlanLength(make_env("ttg/ALFWorld-v0", split="train", max_steps=3), respond=expert.respond)
    try:
        _, info = env.reset(seed=0, options={"task_index": 11})
        assert info["plan_length"] > 3 and info["expert_ttg"] is None
    finally:
        env.close()


def test_plan_length_with_respond_needs_a_token_counter(tiny_env):
    with pytest.raises(ValueError, match="TokenCounter"):
        PlanLength(tiny_env, respond=react)


def test_expert_targets_by_hand():
    traj = Trajectory("t", [], [], success=False, ttg=None, expert_ttg=[76, 46, None, 0])
    traj.actions = [0, 1, 2]
    b, y = trajectory_targets(traj, "expert")
    assert b == [1.0, 1.0, 0.0, 1.0]
    assert y[0] == pytest.approx(math.log(77)) and y[1] == pytest.approx(math.log(47)) and math.isnan(y[2]) and y[3] == 0.0
    b, y = trajectory_targets(traj, "recorded")
    assert b == [0.0] * 4 and all(math.isnan(v) for v in y)
    with pytest.raises(ValueError, match="expert_ttg"):
        trajectory_targets(Trajectory("u", [], [], True, [3, 0]), "expert")


def test_turns_left_counts_from_the_limit_per_read_prefix(one_torch_thread):
    torch = pytest.importorskip("torch")
    from ttg_envs.meters.encoder import EncoderConfig, EncoderMeter, build_model
    from ttg_envs.training.tiny_models import tiny_encoder, train_wordpiece_tokenizer

    tokenizer = train_wordpiece_tokenizer(["go to desk 1", "take mug 1 from desk 1"] * 20, vocab_size=200)
    config = EncoderConfig(hidden=16, turn_limit=10, window=2)
    meter = EncoderMeter(build_model(tiny_encoder(tokenizer, hidden=16, max_tokens=96), 16, budget_aware=True), tokenizer, config)
    # Read lists of 3 segments (task + a window of 2) after 5 actions, and of 2 after 1 action.
    left = meter.turns_left([5, 1], [3, 2])
    assert left.tolist() == [[7, 6, 5], [10, 9, 8]]
    assert meter.turn_limit == 10
    meter.turn_limit = 4
    assert meter.turns_left([1], [2]).tolist() == [[4, 3]]
    assert torch.is_tensor(left)
    # A row with its own limit (a trajectory recorded at 15 turns) counts from it; None: the meter's.
    assert meter.turns_left([5, 1], [3, 2], [15, None]).tolist() == [[12, 11, 10], [4, 3, 2]]


def test_a_recorded_turn_limit_reaches_the_trajectory():
    from ttg_envs.training.meter.datasets import parse_trajectory

    record = {
        "messages": [{"role": "user", "content": "task"}, {"role": "assistant", "content": "look"}],
        "num_steps": 1,
        "success": False,
        "metadata": {"policy": "start", "turn_limit": 15},
    }
    assert parse_trajectory(record, "f:1").turn_limit == 15
    assert parse_trajectory({**record, "metadata": {}}, "f:1").turn_limit is None


def test_progress_meter_wrapper_gives_a_budget_aware_meter_the_envs_limit(tiny_env):
    class Budgeted(ScriptedMeter):
        budget_aware = True
        turn_limit = 50

    meter = Budgeted(lambda h: (True, 10))
    ProgressMeterWrapper(TokenCounter(tiny_env), meter)
    assert meter.turn_limit == tiny_env.unwrapped.max_steps


def test_planner_selector_takes_the_shortest_plan_and_a_wrong_action_loses():
    env = make_env("ttg/ALFWorld-v0", split="valid_seen")
    try:
        env.reset(seed=0, options={"task_index": 5})
        base = env.unwrapped
        best = base.expert_plan()[0]
        wrong = next(c for c in base.admissible_commands if c.startswith(("take", "examine", "inventory", "help")) and c != best)
        selector = PlannerSelector(FixedActor([react(wrong), "no action at all", react(best)]), k=3)
        assert selector(env).text == react(best)
        assert selector.last.chosen == 2 and selector.last.deltas[2] == max(selector.last.deltas)
        # The main env did not move.
        assert base.elapsed_steps == 0
    finally:
        env.close()


def test_planner_selector_prefers_a_winning_step(tiny_env):
    env = TokenCounter(tiny_env)
    env.reset(seed=0)
    plan = env.unwrapped.expert_plan()
    for command in plan[:-1]:
        env.step(react(command))
    other = next(c for c in env.unwrapped.admissible_commands if c != plan[-1])
    selector = PlannerSelector(FixedActor([react(other), react(plan[-1])]), k=2)
    assert selector(env).text == react(plan[-1]) and selector.last.deltas[1] == math.inf


def test_planner_selector_needs_a_planner():
    class NoPlanner:
        unwrapped = object()

    with pytest.raises(TypeError, match="expert_plan"):
        PlannerSelector(FixedActor(["a", "b"]), k=2).choose(NoPlanner(), ["a", "b"])


def test_capture_ratio_by_hand():
    def row(condition, rate):
        return {"actor": "a", "split": "s", "condition": condition, "task_type": "all", "success_rate_mean": rate}

    rows = [row("natural", 0.3), row("random-4", 0.4), row("guided-4", 0.55), row("planner-4", 0.9)]
    ratios = capture_ratios(rows)
    assert ratios[("a", "s", 4)]["capture"] == pytest.approx(0.3)  # (0.55 - 0.4) / (0.9 - 0.4)
    assert capture_ratios(rows[:3]) == {}
    flat = capture_ratios([row("random-4", 0.5), row("guided-4", 0.6), row("planner-4", 0.5)])
    assert flat[("a", "s", 4)]["capture"] is None


def test_noop_check_counts_a_meter_that_rewards_help_and_passes_a_plan_meter(tmp_path):
    from ttg_envs.training.meter.datasets import load_trajectories
    from ttg_envs.training.meter.evaluation import noop_preference
    from ttg_envs.training.meter.record import collect_trajectories

    paths = collect_trajectories("ttg/ALFWorld-v0", {}, "valid_seen", ["expert"], tmp_path, tasks=[5], plan_lengths=True)
    trajectories = load_trajectories(paths)

    def last_command(history):
        last = next((m["content"] for m in reversed(history) if m["role"] == "assistant"), "")
        return last.split("<action>")[-1].split("</action>")[0]

    helpful = ScriptedMeter(lambda h: (True, 1 if last_command(h) == "help" else 500))
    report = noop_preference(helpful, "ttg/ALFWorld-v0", trajectories, respond=react, failure_cost=16384, progress=False)
    # help looks best everywhere except before the winning step, whose anchored cost 0 beats it.
    assert report.states == trajectories[0].num_steps == 3
    assert report.noop_above_best == 2 and report.by_command == {"help": 2}

    # A meter that knows the expert roll-out's TTG (the recorded targets) never prefers doing nothing.
    expert = make_policy("ttg/ALFWorld-v0", "expert")
    env = PlanLength(make_env("ttg/ALFWorld-v0", split="valid_seen"), respond=expert.respond)
    memo = {}

    def oracle(history):
        key = tuple(m["content"] for m in history if m["role"] == "assistant")
        if key not in memo:
            _, info = env.reset(seed=0, options={"task_index": 5})
            for text in key:
                *_, info = env.step(text)
            memo[key] = info["expert_ttg"]
        return memo[key] is not None, memo[key] or 0

    try:
        report = noop_preference(ScriptedMeter(oracle), "ttg/ALFWorld-v0", trajectories, respond=react, failure_cost=16384, progress=False)
    finally:
        env.close()
    assert report.states > 0 and report.noop_above_best == 0


def test_idle_expert_wastes_turns_on_commands_that_leave_the_plan_unchanged():
    idle = make_policy("ttg/ALFWorld-v0", "idle_expert", eps=1.0, seed=0)
    env = PlanLength(make_env("ttg/ALFWorld-v0", split="train"), respond=react)
    try:
        _, info = env.reset(seed=0, options={"task_index": 11})
        for _ in range(8):
            text = idle(env)
            command = text.split("<action>")[1].split("</action>")[0]
            assert command.split()[0] in ("help", "look", "inventory", "examine")
            before = (info["plan_length"], info["expert_ttg"])
            _, _, _, _, info = env.step(text)
            assert info["action_valid"] and info["plan_length"] == before[0] and info["expert_ttg"] == before[1]
    finally:
        env.close()
    with pytest.raises(ValueError, match="idle_expert"):
        make_policy("ttg/ALFWorld-v0", "idle_expertt")


def test_gold_selector_takes_golds_move_a_premature_close_loses_and_it_needs_a_gold_policy():
    import gymnasium as gym

    from ttg_envs.agents import GoldSelector
    from ttg_envs.tools import action_text
    from ttg_envs.wrappers.gold_path import gold_actions

    env = gym.make("ttg/Tau2-v0", split="test", user="gold")
    try:
        env.reset(seed=0, options={"task_index": 3})
        task_id = env.unwrapped.task["id"]
        gold = [action_text(m) for m in gold_actions(gym.make("ttg/Tau2-v0", split="test", user="gold"), task_id, "ttg/Tau2-v0")]
        env.reset(seed=0, options={"task_index": 3})
        # Closing the conversation before any call: the episode ends lost.
        selector = GoldSelector(FixedActor([gold[-1], gold[0]]), k=2)
        assert selector(env).text == gold[0]
        assert selector.last.deltas[0] == -math.inf and math.isfinite(selector.last.deltas[1])
        assert env.unwrapped.elapsed_steps == 0  # the main env did not move
        for move in gold[:-1]:
            env.step(move)
        # From the last state, gold's closing message wins: +inf, ahead of a repeat of a call.
        selector = GoldSelector(FixedActor([gold[0], gold[-1]]), k=2)
        assert selector(env).text == gold[-1] and selector.last.deltas[1] == math.inf
        selector.close()
    finally:
        env.close()
    alfworld = make_env("ttg/ALFWorld-v0", split="valid_seen")
    try:
        with pytest.raises(TypeError, match="gold policy"):
            GoldSelector(FixedActor(["a", "b"]), k=2).choose(alfworld, ["a", "b"])
    finally:
        alfworld.close()


def test_capture_ratio_against_the_gold_ceiling():
    def row(condition, rate):
        return {"actor": "a", "split": "s", "condition": condition, "task_type": "all", "success_rate_mean": rate}

    ratios = capture_ratios([row("random-4", 0.3), row("guided-4", 0.55), row("gold-4", 0.8)])
    assert ratios[("a", "s", 4)]["capture"] == pytest.approx(0.5) and ratios[("a", "s", 4)]["ceiling"] == "gold"


def test_the_demo_runs_each_envs_ceiling():
    from ttg_envs.agents.conditions import default_conditions

    assert default_conditions("ttg/ALFWorld-v0")[-1] == "planner-4"
    assert default_conditions("ttg/Tau2-v0")[-1] == default_conditions("ttg/BFCL-v0")[-1] == "gold-4"
    assert default_conditions("ttg/AWM-v0") == ["natural", "random-4", "guided-4"]
