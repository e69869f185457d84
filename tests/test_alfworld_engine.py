"""The fast ALFWorld engine equals the stock one: translation cache (fresh processes, corrupt
entries), FastDeriver vs textworld's own text (also on random walks of fresh states), successor
caches vs none, the expert on every bundled validation game, a user's stock textworld untouched,
the bounded planner, close()."""

from __future__ import annotations

import os
import subprocess
import sys
import warnings
from concurrent.futures import ProcessPoolExecutor

import gymnasium as gym
import numpy as np
import pytest

from ttg_envs.envs.alfworld import ExpertPolicy, load_tasks, translation
from ttg_envs.envs.alfworld.tasks import TASK_TYPES

textworld = pytest.importorskip("textworld")


@pytest.fixture
def cache_dir(tmp_path, monkeypatch):
    """An empty translation cache, in memory and on disk."""
    monkeypatch.setenv("TTG_ENVS_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(translation, "_MEMORY", {})
    return tmp_path / "cache"


def _stock_stack():
    """The stack exactly as alfworld ships it."""
    from alfworld.agents.environment.alfred_tw_env import AlfredDemangler, AlfredInfos
    from textworld.envs.pddl.pddl import PddlEnv

    pddl = PddlEnv(textworld.EnvInfos(admissible_commands=True, won=True))
    return pddl, AlfredInfos(AlfredDemangler(pddl, shuffle=False))


def _one_task_per_type(split="valid_unseen"):
    tasks = load_tasks(split)
    return [next(i for i, t in enumerate(tasks) if t.type == ty) for ty in TASK_TYPES]


def test_fast_engine_equals_the_stock_stack(cache_dir):
    # One game of each task type: every action and feedback rule of the grammar is exercised.
    pddl, stock = _stock_stack()
    env = gym.make("ttg/ALFWorld-v0", split="valid_unseen", show_admissible=False, max_steps=1000, plan_repair=False)
    tasks = env.unwrapped.tasks
    rng = np.random.default_rng(0)
    for index in _one_task_per_type():
        task = tasks[index]
        stock.load(dict(task.game()))
        episodes = [list(task.plan)] + [None, None]
        for e, commands in enumerate(episodes):
            state = stock.reset()
            obs, info = env.reset(options={"task_index": index})
            assert (obs, info["admissible_commands"]) == (state.feedback, state["admissible_commands"])
            for k in range(len(commands) if commands else 8):
                c = commands[k] if commands else state["admissible_commands"][int(rng.integers(len(state["admissible_commands"])))]
                state, _, _ = stock.step(c)
                obs, reward, terminated, _, info = env.step(f"<action>{c}</action>")
                assert obs == state.feedback and info["admissible_commands"] == state["admissible_commands"], (task.id, c)
                assert terminated == bool(state["won"]) == (reward == 1.0)
                if terminated:
                    break
            assert terminated or commands is None
            # The planner's plan from a state off the walkthrough (the search takes seconds: twice).
            if not terminated and e == 1 and task.type in TASK_TYPES[:2]:
                assert env.unwrapped.expert_plan() == pddl._pddl_state.replan(pddl._entity_infos)


def test_a_fresh_process_loads_a_seen_game_without_translating(cache_dir):
    env = gym.make("ttg/ALFWorld-v0", split="valid_seen")
    env.reset(options={"task_index": 3})
    assert env.unwrapped._engine.translation.origin == "built"
    code = (
        "import fast_downward, gymnasium as gym, ttg_envs\n"
        "from textworld.envs.pddl import logic\n"
        "def boom(*a, **k): raise AssertionError('translated')\n"
        "fast_downward.pddl2sas = logic.fast_downward.pddl2sas = boom\n"
        "logic._PARSER.parse = boom\n"
        "env = gym.make('ttg/ALFWorld-v0', split='valid_seen')\n"
        "obs, info = env.reset(options={'task_index': 3})\n"
        "print(env.unwrapped._engine.translation.origin, len(info['admissible_commands']))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], env={**os.environ, "TTG_ENVS_CACHE": str(cache_dir)}, capture_output=True, text=True, check=True
    ).stdout.split()
    assert out == ["disk", str(len(env.unwrapped.admissible_commands))]


def _play_plan(env, index):
    obs, info = env.reset(options={"task_index": index})
    trace = [obs, info["admissible_commands"]]
    for c in env.unwrapped.tasks[index].plan:
        obs, reward, terminated, _, info = env.step(f"<action>{c}</action>")
        trace += [obs, reward, terminated, info["admissible_commands"]]
    return trace


@pytest.mark.parametrize("damage", ["flip", "truncate", "other_game"])
def test_corrupt_or_foreign_cache_entry_is_rebuilt(cache_dir, monkeypatch, damage):
    env = gym.make("ttg/ALFWorld-v0", split="valid_seen", max_steps=1000)
    expected = _play_plan(env, 5)
    env.reset(options={"task_index": 6})  # a second entry
    entries = sorted(cache_dir.rglob("*.bin"))
    assert len(entries) == 2
    target = translation._path(translation.game_key(dict(env.unwrapped.tasks[5].game())))
    other = next(p for p in entries if p != target)
    blob = target.read_bytes()
    if damage == "flip":
        target.write_bytes(blob[:-100] + bytes(b ^ 0xFF for b in blob[-100:]))
    elif damage == "truncate":
        target.write_bytes(blob[: len(blob) // 2])
    else:
        target.write_bytes(other.read_bytes())
    monkeypatch.setattr(translation, "_MEMORY", {})
    fresh = gym.make("ttg/ALFWorld-v0", split="valid_seen", max_steps=1000)
    with pytest.warns(UserWarning, match="rebuilding corrupt ALFWorld translation"):
        assert _play_plan(fresh, 5) == expected
    assert fresh.unwrapped._engine.translation.origin == "built"
    monkeypatch.setattr(translation, "_MEMORY", {})
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        again = gym.make("ttg/ALFWorld-v0", split="valid_seen", max_steps=1000)
        assert _play_plan(again, 5) == expected
    assert again.unwrapped._engine.translation.origin == "disk"


def test_uncached_random_walks_equal_the_stock_stack():
    # A sampled policy's rollouts: most steps reach states the engine has not met, where the
    # text is derived (facts sorted and indexed once per content, command templates reused
    # while the facts they read are unchanged: see FastDeriver). cached=False runs the engine
    # on every step; one engine plays all rollouts of a game, so what it keeps carries over.
    from ttg_envs.envs.alfworld.engine import AlfredEngine

    pddl, stock = _stock_stack()
    engine = AlfredEngine(cached=False)
    tasks = load_tasks("train")
    rng = np.random.default_rng(3)
    for index in (1, len(tasks) // 2, len(tasks) - 1):
        task = tasks[index]
        stock.load(dict(task.game()))
        engine.load(task.game(), task.id)
        for _ in range(3):
            state = stock.reset()
            assert engine.reset(owner=engine) == state.feedback
            for _ in range(12):
                admissible = state["admissible_commands"]
                assert engine.admissible_commands == admissible, task.id
                command = admissible[int(rng.integers(len(admissible)))]
                state, _, _ = stock.step(command)
                assert engine.step(command) == state.feedback, (task.id, command)
                fast = engine._pddl.state
                assert fast["_valid_commands"] == state["_valid_commands"], (task.id, command)
                assert [(a.name, a.mapping, a.command_template) for a in fast["_valid_actions"]] == [
                    (a.name, a.mapping, a.command_template) for a in state["_valid_actions"]
                ]
                assert set(engine._pddl._pddl_state.facts) == set(pddl._pddl_state.facts)
                assert engine.won == bool(state["won"])
                if engine.won:
                    break


def test_stock_textworld_in_the_same_process_is_untouched():
    from textworld.envs.pddl import logic, pddl, textgen

    patched = [
        (textgen.ContextSensitiveGrammar, "CSG.derive"),
        (textgen.ContextSensitiveGrammar, "CSG.parse"),
        (textgen, "copy_context"),
        (textgen, "_parse_and_convert"),
        (pddl.PddlEnv, "PddlEnv.load"),
        (pddl.PddlEnv, "PddlEnv.reset"),
        (pddl.PddlEnv, "PddlEnv.step"),
        (pddl.PddlEnv, "PddlEnv._gather_infos"),
        (logic.PddlState, "PddlState.__init__"),
        (logic, "_parse_and_convert"),
    ]
    before = {f: getattr(owner, f.split(".")[-1]) for owner, f in patched}
    env = gym.make("ttg/ALFWorld-v0", split="valid_seen")
    env.reset(options={"task_index": 0})
    env.step(f"<action>{env.unwrapped.admissible_commands[0]}</action>")
    after = {f: getattr(owner, f.split(".")[-1]) for owner, f in patched}
    assert after == before
    # A stock PddlEnv still translates on load and reset and parses on every derive.
    import fast_downward

    calls = {"pddl2sas": 0, "parse": 0}
    real_sas, real_parse = fast_downward.pddl2sas, textgen._parse_and_convert

    def counting_sas(*a, **k):
        calls["pddl2sas"] += 1
        return real_sas(*a, **k)

    def counting_parse(*a, **k):
        calls["parse"] += 1
        return real_parse(*a, **k)

    _, stock = _stock_stack()
    try:
        logic.fast_downward.pddl2sas, textgen._parse_and_convert = counting_sas, counting_parse
        stock.load(dict(env.unwrapped.tasks[0].game()))
        state = stock.reset()
        stock.step(state["admissible_commands"][0])
    finally:
        logic.fast_downward.pddl2sas, textgen._parse_and_convert = real_sas, real_parse
    assert calls["pddl2sas"] == 4 and calls["parse"] > 50


# ---------------------------------------------------------------- every bundled validation game
def _check_games(split: str, indices: list[int]) -> list[str]:
    """For each game: the expert walkthrough (which must win) and 3 random admissible episodes on
    the cached engine, then the walkthrough again on warm caches; the same commands on an engine
    without successor caches must give the same observations, commands, rewards and wins."""
    fast = gym.make("ttg/ALFWorld-v0", split=split, show_admissible=False, max_steps=1000)
    ref = gym.make("ttg/ALFWorld-v0", split=split, show_admissible=False, max_steps=1000, engine_caches=False)
    expert = ExpertPolicy()
    problems = []

    def play(env, index, choose, n):
        obs, info = env.reset(options={"task_index": index})
        commands, trace = [], [obs, info["admissible_commands"]]
        for _ in range(n):
            text = choose(info)
            obs, reward, terminated, _, info = env.step(text)
            commands.append(text)
            trace += [obs, reward, terminated, info["success"], info["admissible_commands"], info["state_key"]]
            if terminated:
                break
        return commands, trace, terminated

    for index in indices:
        task_id = fast.unwrapped.tasks[index].id
        rng = np.random.default_rng(index)

        def random_action(info, rng=rng):
            admissible = info["admissible_commands"]
            return f"<action>{admissible[int(rng.integers(len(admissible)))]}</action>"

        walkthrough, expert_trace, won = play(fast, index, lambda info: expert(fast), 10)
        if not won:
            problems.append(f"{task_id}: the expert did not win in 10 steps")
        episodes = [(walkthrough, expert_trace)] + [play(fast, index, random_action, 6)[:2] for _ in range(3)]
        if play(fast, index, lambda info: expert(fast), 10)[1] != expert_trace:
            problems.append(f"{task_id}: the walkthrough on warm caches differs")
        for commands, trace in episodes:
            replayed = iter(commands)
            if play(ref, index, lambda info, replayed=replayed: next(replayed), len(commands))[1] != trace:
                problems.append(f"{task_id}: cached and uncached episodes differ")
    return problems


@pytest.mark.parametrize("split", ["valid_seen", "valid_unseen"])
def test_every_validation_game_expert_wins_and_caches_change_nothing(split):
    # Replaces the expert-on-every-game rollout test (~370 s): two processes, each a half.
    n = len(load_tasks(split))
    halves = [list(range(0, n, 2)), list(range(1, n, 2))]
    with ProcessPoolExecutor(2) as pool:
        problems = [p for part in pool.map(_check_games, [split, split], halves) for p in part]
    assert problems == []


def test_planner_time_limit_falls_back_and_says_so():
    env = gym.make("ttg/ALFWorld-v0", split="valid_seen", planner_timeout=0.001, plan_repair=False)
    env.reset(options={"task_index": 2})
    # Off the stored walkthrough, the planner has to search: it cannot finish in a millisecond.
    off = next(c for c in env.unwrapped.admissible_commands if c.startswith("go to") and c != env.unwrapped.tasks[2].plan[0])
    env.step(f"<action>{off}</action>")
    start_children = _children()
    assert ExpertPolicy()(env) == "<think>Next I will look.</think><action>look</action>"
    assert env.unwrapped.last_plan_timed_out and env.unwrapped.planner_timeouts == 1
    assert env.unwrapped.expert_plan() == [] and env.unwrapped.planner_timeouts == 2  # remembered: no new search
    assert _children() == start_children  # the search process was killed and reaped
    _, _, _, _, info = env.step("<action>look</action>")
    assert info["planner_timeout"] is True
    _, _, _, _, info = env.step("<action>look</action>")
    assert "planner_timeout" not in info
    # With time to search, the same state gets the planner's plan, and following it wins.
    patient = gym.make("ttg/ALFWorld-v0", split="valid_seen", plan_repair=False)
    patient.reset(options={"task_index": 2})
    patient.step(f"<action>{off}</action>")
    plan = patient.unwrapped.expert_plan()
    assert plan and not patient.unwrapped.last_plan_timed_out
    for c in plan:
        _, reward, terminated, _, info = patient.step(f"<action>{c}</action>")
    assert terminated and reward == 1.0 and "planner_timeout" not in info


def _follow(env, plan):
    """Step ``plan``; True when it ends in a win."""
    terminated = False
    for c in plan:
        assert not terminated
        _, _, terminated, _, _ = env.step(f"<action>{c}</action>")
    return terminated


def test_plan_repair_reuses_a_plan_that_still_wins_without_a_search():
    # A millisecond limit: any search would time out, so a plan here came from repair.
    env = gym.make("ttg/ALFWorld-v0", split="valid_seen", planner_timeout=0.001)
    env.reset(options={"task_index": 2})
    walkthrough = list(env.unwrapped.tasks[2].plan)
    off = next(c for c in env.unwrapped.admissible_commands if c.startswith("go to") and c != walkthrough[0])
    env.step(f"<action>{off}</action>")
    plan = env.unwrapped.expert_plan()
    assert plan == walkthrough  # "go to" first, so the walkthrough still applies from the detour
    assert env.unwrapped.plans_repaired == 1 and env.unwrapped.planner_timeouts == 0
    assert _follow(env, plan)


def test_plan_repair_undoes_a_detour_that_broke_the_plan():
    # Holding the wrong object, the walkthrough's "take book 1" is not admissible: the repaired
    # plan first puts the object back (no search: the limit is a millisecond).
    env = gym.make("ttg/ALFWorld-v0", split="valid_seen", planner_timeout=0.001)
    env.reset(options={"task_index": 2})
    assert env.unwrapped.tasks[2].plan == ("go to sidetable 1", "use desklamp 1", "take book 1 from sidetable 1")
    env.step("<action>go to sidetable 1</action>")
    env.step("<action>take mug 1 from sidetable 1</action>")
    plan = env.unwrapped.expert_plan()
    assert plan == ["move mug 1 to sidetable 1", "use desklamp 1", "take book 1 from sidetable 1"]
    assert env.unwrapped.planner_timeouts == 0 and _follow(env, plan)


def test_undo_command():
    from ttg_envs.envs.alfworld.engine import undo_command

    assert undo_command(["take mug 1 from sidetable 1"]) == "move mug 1 to sidetable 1"
    assert undo_command(["go to desk 1", "move mug 1 to desk 1"]) == "take mug 1 from desk 1"
    assert undo_command(["open drawer 2"]) == "close drawer 2" and undo_command(["close drawer 2"]) == "open drawer 2"
    assert undo_command(["go to desk 1", "look", "go to bed 1"]) == "go to desk 1"
    assert undo_command(["go to bed 1"]) is None and undo_command(["heat egg 1 with microwave 1"]) is None


def test_plan_repair_searches_when_no_earlier_plan_applies():
    # Holding the mug two moves away: undoing two commands does not free the hands, so no earlier
    # plan applies and the planner is asked (and runs out of its millisecond).
    env = gym.make("ttg/ALFWorld-v0", split="valid_seen", planner_timeout=0.001)
    env.reset(options={"task_index": 2})
    for c in ("go to sidetable 1", "take mug 1 from sidetable 1", "go to desk 1", "go to bed 1"):
        env.step(f"<action>{c}</action>")
    assert env.unwrapped.expert_plan() == [] and env.unwrapped.planner_timeouts == 1


def test_every_repaired_plan_wins():
    # Random detours on a few games: each repaired plan must win when followed (from a branch, so
    # the episode goes on).
    env = gym.make("ttg/ALFWorld-v0", split="valid_unseen", max_steps=200)
    rng = np.random.default_rng(0)
    repaired = 0
    for index in (0, 5, 11, 20, 33):
        env.reset(options={"task_index": index})
        base = env.unwrapped
        for _ in range(25):
            commands = base.admissible_commands
            _, _, terminated, _, _ = env.step(f"<action>{commands[int(rng.integers(len(commands)))]}</action>")
            if terminated:
                break
            before = base.plans_repaired
            plan = base.expert_plan()
            repaired += base.plans_repaired - before
            if plan:
                assert _follow(env.unwrapped.branch(), plan)
    assert repaired >= 20, repaired


def _children() -> set[str]:
    path = f"/proc/{os.getpid()}/task/{os.getpid()}/children"
    return set(open(path).read().split()) if os.path.exists(path) else set()


def test_close_returns_the_core_and_reuses_it():
    from ttg_envs.envs.alfworld import engine

    cores = set()
    for _ in range(5):
        env = gym.make("ttg/ALFWorld-v0", split="valid_seen")
        env.reset(options={"task_index": 1})
        cores.add(id(env.unwrapped._engine._core))
        core = env.unwrapped._engine._core
        env.close()
        assert core.states == [] and core.game_id is None  # the game's caches are gone
    assert len(cores) == 1 and len(engine._IDLE_CORES) <= engine.MAX_IDLE_CORES


def test_plan_length_labels_leave_timed_out_states_unknown():
    from ttg_envs.training.meter.datasets import step_labels_from_plan_lengths

    assert step_labels_from_plan_lengths([3, 2, None, 4, 0]) == [1, 0, 0, 1]
    assert step_labels_from_plan_lengths([2, 3, 3]) == [-1, 0]
