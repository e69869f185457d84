"""TokenCounter and TrajectoryRecorder: exact counts, Token-to-Go labels, crash-safe files."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import warnings

import gymnasium as gym
import pytest

from ttg_envs import Generation
from ttg_envs.tokenization import load_tokenizer
from ttg_envs.wrappers import TokenCounter, TrajectoryRecorder, branch, read_trajectories, token_to_go, write_trajectory

PLAN = ["go to cabinet 1", "open cabinet 1", "take mug 1 from cabinet 1", "go to fridge 1", "open fridge 1", "move mug 1 to fridge 1"]


def test_qwen3_counts():
    tok = load_tokenizer()
    assert tok.encode("Hello world") == [9707, 1879]
    assert tok.encode("<think>") == [151667]
    assert tok.count("<think>hi</think><action>look</action>") == tok.count("<think>hi</think>") + tok.count("<action>look</action>")


def test_token_to_go_by_hand():
    # TTG_t = n_t + ... + n_{T-1}: [3, 5, 2] -> [3+5+2, 5+2, 2].
    assert token_to_go([3, 5, 2]) == [10, 7, 2]
    assert token_to_go([]) == []


def test_token_counter_on_a_won_episode(tiny_env):
    env = TokenCounter(tiny_env)
    tok = env.tokenizer
    _, info = env.reset(seed=0)
    assert info["assistant_tokens_total"] == 0
    texts = [f"<think>step {i}</think><action>{c}</action>" for i, c in enumerate(PLAN)]
    counts = []
    for i, text in enumerate(texts):
        action = Generation(text, token_ids=list(range(7 + i))) if i == 2 else text
        _, _, terminated, _, info = env.step(action)
        counts.append(info["assistant_tokens"])
    assert counts == [tok.count(t) if i != 2 else 9 for i, t in enumerate(texts)]
    assert terminated and info["success"]
    assert info["assistant_tokens_total"] == sum(counts)
    assert info["ttg_labels"] == [sum(counts[t:]) for t in range(len(counts))]


def test_ttg_labels_none_on_failure(tiny_game):
    env = TokenCounter(gym.make("ttg/ALFWorld-v0", game_files=str(tiny_game), max_steps=2))
    env.reset(seed=0)
    env.step("<action>look</action>")
    _, _, terminated, truncated, info = env.step("<action>look</action>")
    assert truncated and not terminated
    assert "ttg_labels" in info and info["ttg_labels"] is None


def test_recorder_writes_every_episode_with_info(tiny_env, tmp_path):
    path = tmp_path / "traj.jsonl"
    env = TrajectoryRecorder(TokenCounter(tiny_env), path, metadata={"policy": "expert"})
    for _ in range(2):
        env.reset(seed=0)
        for c in PLAN:
            env.step(f"<action>{c}</action>")
    # A branch's trial steps are not episodes of the recorded run.
    env.reset(seed=0)
    child = branch(env)
    for c in PLAN:
        child.step(f"<action>{c}</action>")
    records = list(read_trajectories(path))
    assert len(records) == 2
    rec = records[0]
    assert rec["success"] and rec["num_steps"] == 6 and rec["metadata"] == {"policy": "expert"}
    assert rec["task"]["type"] == "pick_and_place_simple"
    assert len(rec["messages"]) == 2 + 2 * 6 and rec["messages"][2]["content"] == "<action>go to cabinet 1</action>"
    assert rec["ttg_labels"] == token_to_go(rec["assistant_tokens"])
    assert rec["steps"][-1]["info"]["success"] is True and "state_key" in rec["steps"][0]["info"]


_WRITER = """
import sys
from ttg_envs.wrappers import write_trajectory
i = 0
while True:
    write_trajectory(sys.argv[1], {"episode": i, "payload": "x" * 400_000})
    i += 1
"""


def test_killed_writer_leaves_readable_file(tmp_path):
    path = tmp_path / "traj.jsonl"
    proc = subprocess.Popen([sys.executable, "-c", _WRITER, str(path)])
    deadline = time.time() + 30
    while (not path.exists() or path.stat().st_size < 2_000_000) and time.time() < deadline:
        time.sleep(0.01)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the killed write may have left a torn last line
        episodes = [r["episode"] for r in read_trajectories(path)]
        assert episodes == list(range(len(episodes))) and len(episodes) >= 4
        write_trajectory(path, {"episode": "after"})
        assert [r["episode"] for r in read_trajectories(path)] == episodes + ["after"]


def test_torn_line_is_skipped_and_terminated(tmp_path):
    path = tmp_path / "traj.jsonl"
    write_trajectory(path, {"episode": 0})
    with open(path, "a") as f:
        f.write('{"episode": 1, "pay')  # a writer killed mid-line
    write_trajectory(path, {"episode": 2})
    with pytest.warns(UserWarning, match="torn"):
        assert [r["episode"] for r in read_trajectories(path)] == [0, 2]
    assert json.loads(path.read_text().splitlines()[-1]) == {"episode": 2}


def test_sort_by_task_puts_episodes_in_task_order_whatever_the_worker_timing(tmp_path):
    from ttg_envs.wrappers.recorder import sort_by_task

    path = tmp_path / "train-expert.jsonl"
    rows = [{"task": {"id": f"train/t{i}"}, "messages": [], "n": n} for n, i in enumerate((2, 0, 1, 0))]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows) + '{"task": {"id": "torn')
    with pytest.warns(UserWarning, match="torn"):
        sort_by_task(path)
    records = [json.loads(line) for line in path.read_text().splitlines()]
    assert [(r["task"]["id"], r["n"]) for r in records] == [("train/t0", 1), ("train/t0", 3), ("train/t1", 2), ("train/t2", 0)]
