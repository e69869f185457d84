"""ttg/ALFWorld-v0 on the real engine: the expert wins every bundled validation game, wrong endings
lose, task order and episodes are deterministic across processes, the loaders find the right games."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections import Counter

import gymnasium as gym
import pytest

from ttg_envs.envs.alfworld import NoisyExpertPolicy, load_tasks
from ttg_envs.envs.alfworld.tasks import TASK_TYPES

PAPER_COUNTS = {
    "valid_seen": dict(zip(TASK_TYPES, (35, 13, 27, 16, 25, 24))),
    "valid_unseen": dict(zip(TASK_TYPES, (24, 18, 31, 23, 21, 17))),
}


@pytest.mark.parametrize("split", ["valid_seen", "valid_unseen"])
def test_bundled_valid_splits_have_the_paper_counts(split):
    assert Counter(t.type for t in load_tasks(split)) == PAPER_COUNTS[split]


def test_bundled_train_split_covers_all_types():
    assert set(t.type for t in load_tasks("train")) == set(TASK_TYPES)


# The expert on every bundled validation game: tests/test_alfworld_engine.py (with the cache checks).


@pytest.mark.parametrize("task_type", TASK_TYPES)
def test_wrong_last_action_does_not_win(task_type):
    env = gym.make("ttg/ALFWorld-v0", split="valid_unseen", task_types=[task_type])
    env.reset(options={"task_index": 0})
    plan = env.unwrapped.expert_plan()
    for command in plan[:-1]:
        _, _, terminated, _, info = env.step(f"<action>{command}</action>")
        assert not terminated and not info["success"]
    # Moving or using something else could also satisfy the (existential) goal; these cannot.
    wrong = [c for c in env.unwrapped.admissible_commands if c.split()[0] in ("go", "look", "inventory", "examine", "open", "close")]
    assert wrong
    for command in wrong:
        child = env.unwrapped.branch()
        _, reward, terminated, _, info = child.step(f"<action>{command}</action>")
        assert (reward, terminated, info["success"]) == (0.0, False, False), command
    _, reward, terminated, _, info = env.step(f"<action>{plan[-1]}</action>")
    assert (reward, terminated, info["success"]) == (1.0, True, True)


_EPISODE = """
import hashlib, json, sys
import gymnasium as gym, ttg_envs
from ttg_envs.envs.alfworld import NoisyExpertPolicy
env = gym.make("ttg/ALFWorld-v0", split="valid_unseen")
obs, info = env.reset(seed=int(sys.argv[1]))
policy = NoisyExpertPolicy(eps=0.5, seed=7)
trace = [info["task"]["id"], obs]
done = False
while not done:
    obs, r, term, trunc, info = env.step(policy(env))
    trace += [obs, r, info["state_key"]]
    done = term or trunc
print(hashlib.sha256(json.dumps(trace).encode()).hexdigest())
"""


def test_same_seed_same_episode_in_two_processes():
    def run(seed, hashseed):
        env = {**os.environ, "PYTHONHASHSEED": hashseed}
        return subprocess.run(
            [sys.executable, "-c", _EPISODE, str(seed)], env=env, capture_output=True, text=True, check=True
        ).stdout.strip()

    first = run(3, "1")
    assert first == run(3, "2")
    assert first != run(4, "1")


def test_task_ids_unique_and_sorted():
    for split in ("train", "valid_seen", "valid_unseen"):
        ids = [t.id for t in load_tasks(split)]
        assert ids == sorted(ids) and len(set(ids)) == len(ids)


def test_seed_picks_the_task_and_options_override():
    env = gym.make("ttg/ALFWorld-v0", split="valid_seen")
    a = env.reset(seed=11)[1]["task"]["id"]
    assert env.reset(seed=11)[1]["task"]["id"] == a
    assert env.reset(options={"task_id": a})[1]["task"]["id"] == a
    assert env.reset(options={"task_index": 5})[1]["task"] == load_tasks("valid_seen")[5].info()


def test_game_files_and_official_layout(tmp_path, tiny_game, monkeypatch):
    root = tmp_path / "json_2.1.1" / "valid_seen"
    good = root / "pick_and_place_simple-Mug-None-Fridge-1" / "trial_T1"
    shutil.copytree(tiny_game, good)
    shutil.copytree(tiny_game, root / "pick_and_place_simple-Mug-None-Fridge-1-movable" / "trial_T2")
    unsolvable = root / "pick_and_place_simple-Mug-None-Fridge-2" / "trial_T3"
    shutil.copytree(tiny_game, unsolvable)
    game = json.loads((unsolvable / "game.tw-pddl").read_text())
    (unsolvable / "game.tw-pddl").write_text(json.dumps({**game, "solvable": False}))
    monkeypatch.setenv("ALFWORLD_DATA", str(tmp_path))

    tasks = load_tasks("valid_seen", source="official")
    assert [t.id for t in tasks] == ["valid_seen/pick_and_place_simple-Mug-None-Fridge-1/trial_T1"]
    assert tasks[0].type == "pick_and_place_simple" and tasks[0].source == "official"
    env = gym.make("ttg/ALFWorld-v0", split="valid_seen", source="official")
    obs, info = env.reset(seed=0)
    assert "put some mug in fridge" in obs and info["task"]["source"] == "official"

    by_files = load_tasks(game_files=[str(root)])
    assert len(by_files) == 3 and all(t.type == "pick_and_place_simple" for t in by_files)

    monkeypatch.setenv("ALFWORLD_DATA", str(tmp_path / "nowhere"))
    with pytest.raises(FileNotFoundError, match="alfworld-download"):
        load_tasks("valid_seen", source="official")


def test_bad_arguments_fail_clearly():
    with pytest.raises(ValueError, match="split must be one of"):
        load_tasks("test")
    with pytest.raises(ValueError, match="unknown task types"):
        load_tasks("train", task_types=["pick_and_juggle"])
    with pytest.raises(ValueError, match="eps"):
        NoisyExpertPolicy(eps=2.0)
