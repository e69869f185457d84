"""Tests of the offline ALFWorld task generator and the task set bundled with the package."""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ttg_envs.datagen import alfworld as gen

REPO_ROOT = Path(__file__).resolve().parents[1]
TYPES = (
    "pick_and_place_simple",
    "pick_clean_then_place_in_recep",
    "pick_heat_then_place_in_recep",
    "pick_cool_then_place_in_recep",
    "look_at_obj_in_light",
    "pick_two_obj_and_place",
)
# Paper, appendix A: Seen 140 / Unseen 134 (Pick, Clean, Heat, Cool, Look, Pick Two); train: 100 per type.
EXPECTED_COUNTS = {
    "train": dict.fromkeys(TYPES, 100),
    "valid_seen": dict(zip(TYPES, (35, 27, 16, 25, 13, 24))),
    "valid_unseen": dict(zip(TYPES, (24, 31, 23, 21, 18, 17))),
}
ID_RE = re.compile(r"^(train|valid_seen|valid_unseen)/([a-z_]+)-([A-Za-z]+)-None-([A-Za-z]+)-FloorPlan(\d+)-(\d{4})$")

_REGEN_SCRIPT = """
import json, sys
from ttg_envs.datagen import alfworld as gen
jobs = json.loads(sys.argv[1])
print(json.dumps([gen.task_line(gen.generate_task(s, t, i, seed)) for s, t, i, seed in jobs]))
"""


@pytest.fixture(scope="module")
def manifest() -> dict[str, Any]:
    return json.loads((gen.DATA_DIR / "MANIFEST.json").read_text())


@pytest.fixture(scope="module")
def lines() -> dict[str, list[str]]:
    out = {}
    for split in gen.SPLITS:
        with gzip.open(gen.DATA_DIR / f"{split}.jsonl.gz", "rt", encoding="utf-8") as f:
            out[split] = f.read().splitlines()
    return out


@pytest.fixture(scope="module")
def tasks() -> dict[str, list[dict[str, Any]]]:
    return {split: list(gen.read_split(split)) for split in gen.SPLITS}


@pytest.fixture(scope="module")
def regen_sample(tasks: dict[str, list[dict[str, Any]]]) -> list[dict[str, Any]]:
    """The first bundled task of each type of each valid split."""
    return [next(t for t in tasks[split] if t["type"] == tt) for split in ("valid_seen", "valid_unseen") for tt in TYPES]


@pytest.fixture(scope="module")
def regen_subprocess(regen_sample: list[dict[str, Any]]) -> Iterator[subprocess.Popen]:
    """Regenerates the whole sample in another interpreter with another hash seed; started by the
    first test so that it runs on the second core while the others run."""
    hash_seed = "2" if os.environ.get("PYTHONHASHSEED") == "1" else "1"
    env = {
        **os.environ,
        "PYTHONHASHSEED": hash_seed,
        "PYTHONPATH": os.pathsep.join(filter(None, (str(REPO_ROOT), os.environ.get("PYTHONPATH")))),
    }
    jobs = [[t["split"], t["type"], t["index"], t["seed"]] for t in regen_sample]
    proc = subprocess.Popen(
        [sys.executable, "-c", _REGEN_SCRIPT, json.dumps(jobs)], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    yield proc
    if proc.poll() is None:
        proc.kill()
        proc.communicate()


def test_manifest_counts_match_paper(
    manifest: dict[str, Any], tasks: dict[str, list[dict[str, Any]]], regen_subprocess: subprocess.Popen
) -> None:
    assert manifest["seed"] == 0
    assert manifest["generator_version"] == gen.GENERATOR_VERSION
    for split, expected in EXPECTED_COUNTS.items():
        assert manifest["splits"][split]["counts"] == expected
        assert manifest["splits"][split]["num_tasks"] == sum(expected.values()) == len(tasks[split])
        actual = {tt: sum(t["type"] == tt for t in tasks[split]) for tt in TYPES}
        assert actual == expected
    assert sum(manifest["splits"]["valid_seen"]["counts"].values()) == 140
    assert sum(manifest["splits"]["valid_unseen"]["counts"].values()) == 134


def test_files_match_manifest_sha256(manifest: dict[str, Any]) -> None:
    for split in gen.SPLITS:
        entry = manifest["splits"][split]
        data = (gen.DATA_DIR / entry["file"]).read_bytes()
        assert hashlib.sha256(data).hexdigest() == entry["sha256"]


def test_files_are_canonical_gzip(lines: dict[str, list[str]], tmp_path: Path) -> None:
    for split, split_lines in lines.items():
        sha = gen.write_jsonl_gz(tmp_path / "x.jsonl.gz", split_lines)
        assert (tmp_path / "x.jsonl.gz").read_bytes() == (gen.DATA_DIR / f"{split}.jsonl.gz").read_bytes()
        assert sha == hashlib.sha256((tmp_path / "x.jsonl.gz").read_bytes()).hexdigest()
        for line in split_lines:
            assert gen.task_line(json.loads(line)) == line


def test_data_folder_is_small() -> None:
    assert sum(p.stat().st_size for p in gen.DATA_DIR.iterdir() if p.is_file()) < 5_000_000


def test_all_types_in_each_split(tasks: dict[str, list[dict[str, Any]]]) -> None:
    for split in gen.SPLITS:
        assert {t["type"] for t in tasks[split]} == set(TYPES)
        # File order: types in the fixed order, then index.
        assert [(t["type"], t["index"]) for t in tasks[split]] == [(tt, i) for _, tt, i in gen.split_jobs(split)]


def test_unseen_floorplans_are_held_out(tasks: dict[str, list[dict[str, Any]]], manifest: dict[str, Any]) -> None:
    def floorplans(split: str) -> set[int]:
        return {int(t["floorplan"].removeprefix("FloorPlan")) for t in tasks[split]}

    unseen = floorplans("valid_unseen")
    assert unseen <= set(gen.HELD_OUT_FLOORPLANS)
    assert not unseen & (floorplans("train") | floorplans("valid_seen"))
    assert manifest["held_out_floorplans"] == list(gen.HELD_OUT_FLOORPLANS)
    # Every room type is held out.
    assert {gen._room_of(n) for n in unseen} == set(gen.ROOM_FLOORPLANS)


def test_task_fields(tasks: dict[str, list[dict[str, Any]]]) -> None:
    seen_ids = set()
    for split, split_tasks in tasks.items():
        for t in split_tasks:
            assert set(t) == {"id", "type", "split", "index", "floorplan", "goal", "pddl_problem", "pddl_params", "walkthrough", "seed"}
            m = ID_RE.match(t["id"])
            assert m, t["id"]
            assert (m[1], m[2], f"FloorPlan{m[5]}", int(m[6])) == (split, t["type"], t["floorplan"], t["index"])
            params = t["pddl_params"]
            assert params["object_target"] == m[3] and params["object_sliced"] is False
            assert m[4] == (params["toggle_target"] if t["type"] == "look_at_obj_in_light" else params["parent_target"])
            assert t["goal"] == t["goal"].lower() and t["walkthrough"]
            assert t["pddl_problem"].startswith("(define (problem ") and "(:goal" in t["pddl_problem"]
            assert t["id"] not in seen_ids
            seen_ids.add(t["id"])


def test_make_game_inserts_goal(tasks: dict[str, list[dict[str, Any]]]) -> None:
    task = tasks["valid_seen"][0]
    game = gen.make_game(task)
    assert set(game) == {"pddl_domain", "grammar", "pddl_problem", "solvable", "walkthrough"}
    assert "UNKNOWN GOAL" not in game["grammar"]
    assert f"Your task is to: {task['goal']}." in game["grammar"]
    assert game["solvable"] is True and game["walkthrough"] == task["walkthrough"]


@pytest.mark.slow  # a long integration test (CI runs it; -m 'not slow' leaves it out)
def test_walkthroughs_win_and_not_before_the_end(tasks: dict[str, list[dict[str, Any]]]) -> None:
    # The last task of each type (the first ones are regenerated below), splits taken in turn.
    sample = [[t for t in tasks[gen.SPLITS[i % 3]] if t["type"] == tt][-1] for i, tt in enumerate(TYPES)]
    for task in sample:
        env = gen._engine()
        env.load(gen.make_game(task))
        state = env.reset()
        assert not state["won"], task["id"]
        assert task["goal"] in state["feedback"]
        for cmd in task["walkthrough"][:-1]:
            assert cmd in state["admissible_commands"], (task["id"], cmd)
            state, _, _ = env.step(cmd)
        assert not state["won"], task["id"]
        state, _, done = env.step(task["walkthrough"][-1])
        assert state["won"] and done, task["id"]


def test_replay_helper(tasks: dict[str, list[dict[str, Any]]]) -> None:
    task = tasks["valid_unseen"][0]
    assert gen.replay(task) == (False, True)
    with pytest.raises(ValueError):
        gen.replay(task, ["fly to the moon"])


@pytest.mark.slow  # a long integration test (CI runs it; -m 'not slow' leaves it out)
def test_regenerate_in_process(regen_sample: list[dict[str, Any]], lines: dict[str, list[str]]) -> None:
    # Half the sample here (the subprocess does all of it): one task per type, both valid splits.
    for task in regen_sample[0:6:2] + regen_sample[7:12:2]:
        line = gen.task_line(gen.generate_task(task["split"], task["type"], task["index"], task["seed"]))
        assert line == lines[task["split"]][_position(task)]


def test_regenerate_in_subprocess_with_other_hash_seed(
    regen_subprocess: subprocess.Popen, regen_sample: list[dict[str, Any]], lines: dict[str, list[str]]
) -> None:
    out, err = regen_subprocess.communicate(timeout=300)
    assert regen_subprocess.returncode == 0, err
    regenerated = json.loads(out.strip().splitlines()[-1])
    assert regenerated == [lines[t["split"]][_position(t)] for t in regen_sample]


def _position(task: dict[str, Any]) -> int:
    return gen.split_jobs(task["split"]).index((task["split"], task["type"], task["index"]))


def test_split_and_type_validation() -> None:
    with pytest.raises(ValueError):
        gen.split_floorplans("test")
    with pytest.raises(ValueError):
        gen.generate_task("train", "pick_and_place_with_movable_recep", 0)


def test_missing_alfworld_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without the alfworld package, a bundled task list says which extra to install (not a bare ModuleNotFoundError)."""
    from ttg_envs._optional import MissingExtraError
    from ttg_envs.envs.alfworld import load_tasks

    monkeypatch.setitem(sys.modules, "alfworld", None)  # as if it were not installed
    monkeypatch.delitem(sys.modules, "ttg_envs.envs.alfworld.games")  # the module that loads games needs alfworld
    with pytest.raises(MissingExtraError, match=re.escape("pip install 'ttg-envs[alfworld]'")):
        load_tasks("train")


def test_more_train_family_tasks_load_from_a_jsonl_and_their_walkthroughs_win(tmp_path: Path) -> None:
    """Indices past the bundled 100 are new tasks of the train family; game_files loads their lines."""
    import gymnasium as gym

    import ttg_envs  # noqa: F401

    lines = gen.generate_tasks("train", "pick_and_place_simple", [101, 100], progress=False)
    records = [json.loads(line) for line in lines]
    assert len({r["id"] for r in records}) == 2 and all(r["type"] == "pick_and_place_simple" for r in records)
    bundled = {r["id"] for r in gen.read_split("train")}
    assert not bundled & {r["id"] for r in records}
    path = tmp_path / "more.jsonl.gz"
    gen.write_jsonl_gz(path, lines)
    env = gym.make("ttg/ALFWorld-v0", game_files=path, action_format="lenient")
    base = env.unwrapped
    assert [t.id for t in base.tasks] == sorted(r["id"] for r in records) and {t.source for t in base.tasks} == {"generated"}
    for index, task in enumerate(base.tasks):
        env.reset(seed=0, options={"task_index": index})
        info: dict[str, Any] = {}
        for command in task.plan:
            _, _, terminated, _, info = env.step(command)
        assert terminated and info["success"], task.id
