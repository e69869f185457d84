"""The tool envs' meters: perturbed gold policies and the gold-path step labels they are measured by."""

from __future__ import annotations

import json

import gymnasium as gym
import pytest

pytest.importorskip("bfcl_eval")

import ttg_envs  # noqa: F401,E402  (registers the ids)
from ttg_envs.envs.bfcl.policies import END_TURN, GoldPolicy, PerturbedGoldPolicy  # noqa: E402
from ttg_envs.envs.perturb import Perturber, changed  # noqa: E402
from ttg_envs.tools import ToolCall, format_tool_calls  # noqa: E402
from ttg_envs.training.meter.datasets import Trajectory  # noqa: E402
from ttg_envs.training.meter.evaluation import gold_path_labels, label_gold_path  # noqa: E402

TASK = "multi_turn_base_0"


def _trajectory(env, steps: int, task_id: str, split: str) -> Trajectory:
    """The env's transcript as a Trajectory of its last ``steps`` assistant messages."""
    messages = list(env.unwrapped.messages)
    actions = [i for i, m in enumerate(messages) if m["role"] == "assistant"][-steps:]
    return Trajectory("t", messages, actions, False, None, task={"id": task_id, "split": split})


def test_gold_steps_are_good_and_a_harmless_wrong_argument_is_neutral():
    # multi_turn_base_0, checked by hand: turn 0's ground truth is three calls (cd into "document",
    # mkdir "temp", mv the report there); gold makes them in one response and ends the turn; then
    # turn 1's calls with the first one's folder changed ("temp_x" for "temp") depart, but harmlessly:
    # the cd fails and gold's turn-1 calls made again from there still win (neutral); ending the turn
    # instead of making them loses the task (bad). The first-departure rule before said [1, 1, -1, 0].
    env = gym.make("ttg/BFCL-v0", split="multi_turn")
    env.reset(seed=0, options={"task_id": TASK})
    gold = GoldPolicy()
    base = env.unwrapped
    assert base.task_entry.ground_truth[0][0] == "cd(folder='document')" and len(base.task_entry.ground_truth[0]) == 3
    for _ in range(2):  # turn 0: its calls, then the text that ends the turn
        env.step(gold(env))
    first, *rest = base._truth_calls(base.task_entry.ground_truth[1])
    assert (first.name, first.arguments) == ("cd", {"folder": "temp"})
    env.step(format_tool_calls([ToolCall("cd", {"folder": changed("temp")}), *rest]))
    env.step(END_TURN)
    trajectory = _trajectory(env, 4, TASK, "multi_turn")
    label_gold_path([trajectory], "ttg/BFCL-v0", progress=False)
    assert trajectory.step_labels == [1, 1, 0, -1]
    env.close()


def test_a_dropped_call_departs_and_a_task_gold_cannot_win_labels_nothing():
    env = gym.make("ttg/BFCL-v0", split="multi_turn")
    env.reset(seed=0, options={"task_id": TASK})
    env.step(END_TURN)  # turn 0's call left out
    trajectory = _trajectory(env, 1, TASK, "multi_turn")
    label_gold_path([trajectory], "ttg/BFCL-v0", progress=False)
    assert trajectory.step_labels == [-1]
    assert gold_path_labels(trajectory, []) == [-1]  # past gold's last move
    env.close()


def test_perturbed_policy_is_gold_at_eps_0_and_departs_at_eps_1():
    env = gym.make("ttg/BFCL-v0", split="multi_turn")
    env.reset(seed=0, options={"task_id": TASK})
    assert PerturbedGoldPolicy(eps=0.0, seed=1)(env) == GoldPolicy()(env)
    departures = {PerturbedGoldPolicy(eps=1.0, seed=seed)(env) for seed in range(12)}
    assert GoldPolicy()(env) not in departures and len(departures) >= 2
    same = [PerturbedGoldPolicy(eps=1.0, seed=3)(env) for _ in range(2)]
    assert same[0] == same[1]  # a seed fixes the episode
    env.close()


def test_perturber_kinds():
    calls = [ToolCall("f", {"x": 1}), ToolCall("g", {"y": "a"})]
    other = ToolCall("h")
    assert Perturber(1.0, 0).depart("drop", calls, [other]) in ([calls[0]], [calls[1]])
    assert Perturber(1.0, 0).depart("extra", calls, [other]) == [*calls, other]
    wrong = Perturber(1.0, 0).depart("wrong_argument", calls, [])
    assert len(wrong) == 2 and wrong != calls and {c.name for c in wrong} == {"f", "g"}
    # a call without arguments cannot get a wrong one: an extra call instead, else a drop
    assert Perturber(1.0, 0).depart("wrong_argument", [other], [calls[0]]) == [other, calls[0]]
    assert Perturber(1.0, 0).depart("wrong_argument", [other], []) == []


def test_tau2_perturbed_policy_skips_extras_and_wrong_calls():
    pytest.importorskip("tau2")
    from ttg_envs.envs.tau2.policies import GoldPolicy as Tau2Gold
    from ttg_envs.envs.tau2.policies import PerturbedGoldPolicy as Tau2Perturbed

    env = gym.make("ttg/Tau2-v0", split="train", user="gold")
    env.reset(seed=0, options={"task_index": 0})
    gold = Tau2Gold()(env)
    assert Tau2Perturbed(eps=0.0, seed=0)(env) == gold
    assert all(Tau2Perturbed(eps=1.0, seed=seed)(env) != gold for seed in range(6))
    env.close()


@pytest.mark.parametrize(
    "env_id, name, kwargs", [("ttg/BFCL-v0", "bfcl", {"split": "multi_turn"}), ("ttg/Tau2-v0", "tau2", {"split": "test", "user": "gold"})]
)
def test_the_tool_envs_load_shipped_meters_of_their_own(env_id, name, kwargs):
    pytest.importorskip("torch")
    if name == "tau2":
        pytest.importorskip("tau2")
    from ttg_envs.meters import load_meter
    from ttg_envs.meters.ready import ready_meter_path
    from ttg_envs.registry import make_policy
    from ttg_envs.wrappers import ProgressMeterWrapper, TokenCounter

    path = ready_meter_path(env_id)
    config = json.loads((path / "meter.json").read_text())
    assert path.name == name and config["ready"]["env_id"] == env_id
    assert config["ready"]["heldout_previous"]["meter"] == "ttg/AWM-v0"
    env = ProgressMeterWrapper(TokenCounter(gym.make(env_id, **kwargs)), load_meter(env_id))
    _, info = env.reset(seed=0)
    assert info["ttg_valid"] and info["ttg_cost"] is not None
    _, _, _, _, info = env.step(make_policy(env_id, "gold")(env))
    assert info["ttg_valid"] and isinstance(info["ttg_delta"], float)
    env.close()


def test_a_harmless_departure_is_not_bad():
    # multi_turn_base_0, checked by hand: an extra `pwd()` beside turn 0's three gold calls leaves
    # gold's remaining moves winning after it (good: it did gold's move and more); an `ls()` first, in
    # a response of its own, leaves gold's moves from turn 0's calls on winning (neutral: nothing
    # gained, nothing lost), and the gold moves after it are good again. The first-departure rule
    # before labelled both departures -1 and everything after them 0.
    env = gym.make("ttg/BFCL-v0", split="multi_turn")
    env.reset(seed=0, options={"task_id": TASK})
    base = env.unwrapped
    calls = base._truth_calls(base.task_entry.ground_truth[0])
    env.step(format_tool_calls([*calls, ToolCall("pwd")]))
    env.step(END_TURN)
    extra = _trajectory(env, 2, TASK, "multi_turn")
    env.reset(seed=0, options={"task_id": TASK})
    env.step(format_tool_calls([ToolCall("ls")]))
    env.step(format_tool_calls(calls))
    env.step(END_TURN)
    first = _trajectory(env, 3, TASK, "multi_turn")
    label_gold_path([extra, first], "ttg/BFCL-v0", progress=False, targets=True)
    assert extra.step_labels == [1, 1]
    assert first.step_labels == [0, 1, 1]
    # gold's remaining tokens from each state: unchanged by the neutral step, then gold's own
    gold_tokens = [_tokens(format_tool_calls(calls)), _tokens(END_TURN)]
    assert first.expert_ttg[0] == first.expert_ttg[1]
    assert first.expert_ttg[1] - first.expert_ttg[2] == gold_tokens[0]
    assert first.expert_ttg[2] - first.expert_ttg[3] == gold_tokens[1]
    env.close()


def _tokens(text: str) -> int:
    """Tokens of ``text`` as TokenCounter counts an action (the offline Qwen3 vocabulary)."""
    from ttg_envs.tokenization import load_tokenizer

    return load_tokenizer(None).count(text)


def test_tau2_a_repeated_read_is_neutral():
    # tau2 retail train task 0 with the gold user: gold's first move is a read (find the user); made
    # twice, the second costs tokens and loses nothing (gold's moves from there still win): neutral,
    # and no step after it loses the task. tau2's transcript keeps the calls apart from the text, so
    # the replays write them back (``action_text``; without it no replay wins and the read is bad);
    # the first-departure rule said -1, then 0s.
    pytest.importorskip("tau2")
    from ttg_envs.envs.tau2.gold import gold_plan
    from ttg_envs.envs.tau2.policies import GoldPolicy as Tau2Gold

    env = gym.make("ttg/Tau2-v0", split="train", user="gold")
    env.reset(seed=0, options={"task_index": 0})
    moves, _ = gold_plan(env.unwrapped.task_object)
    assert isinstance(moves[0], ToolCall) and moves[0].name.startswith(("find_", "get_"))
    gold = Tau2Gold()
    env.step(gold(env))
    env.step(format_tool_calls([moves[0]]))  # the read again
    steps = 2
    done = False
    for move in moves[1:3]:
        _, _, terminated, truncated, _ = env.step(format_tool_calls([move]) if isinstance(move, ToolCall) else move)
        steps, done = steps + 1, terminated or truncated
        if done:
            break
    task_id = env.unwrapped.task["id"]
    trajectory = _trajectory(env, steps, task_id, "train")
    label_gold_path([trajectory], "ttg/Tau2-v0", {"user": "gold"}, progress=False)
    assert trajectory.step_labels[:2] == [1, 0]
    assert -1 not in trajectory.step_labels
    env.close()
