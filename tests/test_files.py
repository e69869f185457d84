"""Files that cannot mix or lie (issue 29): folders saved whole and loaded pinned, trajectory
writes that fail loudly and leave nothing, caches that are code loaded as data only."""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from ttg_envs._io import atomic_folder, load_folder
from ttg_envs.wrappers import read_trajectories, write_trajectory

# ----------------------------------------------------------------- meters saved and loaded whole
_SAVER = textwrap.dedent(
    """
    import sys, time
    from ttg_envs.meters.hf import save_meter
    from ttg_envs.meters.prompt import PromptConfig

    class Part:  # stands in for a model / tokenizer: save_pretrained writes one file of the token
        def __init__(self, name, token):
            self.name, self.token = name, token
        def save_pretrained(self, out):
            (out / self.name).write_text(self.token * 4096)
            time.sleep(0.002)

    token, folder, until = sys.argv[1], sys.argv[2], time.monotonic() + float(sys.argv[3])
    while time.monotonic() < until:
        save_meter(Part("backbone.txt", token), Part("head.txt", token), folder, PromptConfig())
    """
)


def _read_pair(folder: Path) -> tuple[str, str]:
    backbone = (folder / "backbone.txt").read_text()
    time.sleep(0.001)  # widen the window in which a save could land between the two reads
    return backbone[:1], (folder / "head.txt").read_text()[:1]


def test_two_processes_saving_meters_into_one_folder_never_mix(tmp_path):
    # Before: save_meter wrote into the folder in place; 205 of 1,993 concurrent loads mixed two saves.
    folder = tmp_path / "meter"
    savers = [
        subprocess.Popen(
            [sys.executable, "-c", _SAVER, token, str(folder), "4"],
            env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])},
        )
        for token in "AB"
    ]
    try:
        deadline, loads, seen = time.monotonic() + 3.5, 0, set()
        while time.monotonic() < deadline:
            if not folder.is_dir():
                continue
            try:
                backbone, head = load_folder(folder, _read_pair)
            except FileNotFoundError:  # the folder was swapped out between the check and the load
                continue
            assert backbone == head, "a load got one save's backbone and the other's head"
            loads += 1
            seen.add(backbone)
    finally:
        for saver in savers:
            assert saver.wait(timeout=30) == 0
    assert loads > 20 and seen == {"A", "B"}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["meter"]  # no temporary folder left


def test_a_failed_save_leaves_the_old_folder(tmp_path):
    folder = tmp_path / "meter"
    with atomic_folder(folder) as out:
        (out / "a.txt").write_text("old")
    with pytest.raises(RuntimeError), atomic_folder(folder) as out:
        (out / "a.txt").write_text("new")
        raise RuntimeError("the save failed half way")
    assert (folder / "a.txt").read_text() == "old" and sorted(p.name for p in tmp_path.iterdir()) == ["meter"]


# ----------------------------------------------------------------- trajectories on a full disk
_FULL_DISK = textwrap.dedent(
    """
    import resource, signal, sys
    from ttg_envs.wrappers import write_trajectory
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # the file-size limit as a full disk: short writes, EFBIG
    path = sys.argv[1]
    size = len(open(path, "rb").read())
    resource.setrlimit(resource.RLIMIT_FSIZE, (size + 100, resource.getrlimit(resource.RLIMIT_FSIZE)[1]))
    try:
        write_trajectory(path, {"task": {"id": "big"}, "text": "x" * 10000})
    except OSError as exc:
        print("raised", exc)
    """
)


def test_a_trajectory_that_does_not_fit_raises_and_leaves_no_partial_record(tmp_path):
    # Before: the first 100 bytes of the record were written and write_trajectory returned normally.
    path = tmp_path / "t.jsonl"
    write_trajectory(path, {"task": {"id": "a"}})
    before = path.read_bytes()
    done = subprocess.run([sys.executable, "-c", _FULL_DISK, str(path)], capture_output=True, text=True, timeout=60)
    assert "raised" in done.stdout and "nothing of it was kept" in done.stdout, done.stdout + done.stderr
    assert path.read_bytes() == before
    assert [r["task"]["id"] for r in read_trajectories(path)] == ["a"]


# ----------------------------------------------------------------- ALFWorld's translation cache
class _Forged:
    def __init__(self, marker: Path):
        self.marker = marker

    def __reduce__(self):
        return (exec, (f"open({str(self.marker)!r}, 'w').write('ran')",))


@pytest.fixture
def alfworld_game(tmp_path, monkeypatch):
    """A valid_seen game with its translation built into an empty cache (entry on disk)."""
    pytest.importorskip("textworld")
    from ttg_envs.envs.alfworld import load_tasks, translation

    monkeypatch.setenv("TTG_ENVS_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(translation, "_MEMORY", {})
    game = dict(load_tasks("valid_seen")[0].game())
    built = translation.translation_for(game)
    monkeypatch.setattr(translation, "_MEMORY", {})
    return game, built


@pytest.mark.parametrize("where", ["task", "logic"])
def test_a_forged_translation_entry_runs_no_code_and_is_rebuilt(tmp_path, alfworld_game, where):
    # Before: the entry was unpickled with pickle.loads, which ran the forged exec call.
    from ttg_envs.envs.alfworld import translation

    game, built = alfworld_game
    marker = tmp_path / "marker"
    logic = pickle.dumps(_Forged(marker)) if where == "logic" else built.logic
    task = _Forged(marker) if where == "task" else built.task
    translation._write(translation.Translation(built.key, logic, task, built.sas))  # a valid header and checksum
    with pytest.warns(UserWarning, match="rebuilding corrupt ALFWorld translation cache entry"):
        again = translation.translation_for(game)
    assert again.origin == "built" and not marker.exists()
    assert translation._read(built.key).logic == built.logic  # the rebuilt entry is on disk


def test_a_translation_entry_whose_grammar_code_is_not_the_games_is_rebuilt(alfworld_game, monkeypatch):
    # textworld evals its grammar's EvalSymbol expressions when it writes text: an entry may hold
    # only the game's own.
    from ttg_envs.envs.alfworld import translation

    game, built = alfworld_game
    logic = built.new_logic()
    stack, forged = [logic], 0
    while stack:  # point every EvalSymbol at other code
        item = stack.pop()
        if type(item).__name__ == "EvalSymbol":
            item.expression, forged = "__import__('os').getpid()", forged + 1
        elif isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, (list, tuple)):
            stack.extend(item)
        elif hasattr(item, "__dict__") and not isinstance(item, type):
            stack.extend(vars(item).values())
    assert forged
    translation._write(translation.Translation(built.key, pickle.dumps(logic), built.task, built.sas))
    with pytest.warns(UserWarning, match="code not in the game's grammar"):
        again = translation.translation_for(game)
    assert again.origin == "built"


def test_a_failed_load_names_the_folder_given_not_its_pinned_path(tmp_path):
    folder = tmp_path / "meter"
    folder.mkdir()
    with pytest.raises(FileNotFoundError) as caught:
        load_folder(folder, lambda pinned: (pinned / "meter.json").read_text())
    assert str(folder) in str(caught.value) and "/proc/self/fd" not in str(caught.value)
