"""tau2 branches share unchanged database records with their original (``envs/tau2/state.py``): they
diverge independently, replay gold to reward 1.0 with the evaluator's verdict unchanged, resets start
from the files' database, and the read-only tools that read shared records in place write nothing."""

from __future__ import annotations

import copy
import pickle

import pytest

pytest.importorskip("tau2")

from ttg_envs.envs.tau2 import GoldPolicy, Tau2Env  # noqa: E402
from ttg_envs.envs.tau2.data import new_environment  # noqa: E402
from ttg_envs.envs.tau2.gold import gold_plan  # noqa: E402
from ttg_envs.envs.tau2.state import SharedRecords, fork_environment, reading, shares_records  # noqa: E402
from ttg_envs.tools import ToolCall  # noqa: E402


def _db(env):
    return env.environment.get_db_hash()


def _first_write(env, index):  # env: reset (its environment names the tool types)
    """The step of task ``index``'s first gold write call, and that call."""
    moves = gold_plan(env.tasks[index])[0]
    tools = env.environment.tools
    for step, move in enumerate(moves):
        if isinstance(move, ToolCall) and tools.has_tool(move.name) and tools.tool_type(move.name).value == "write":
            return step, move
    raise LookupError("no write")


def _task_with_write(env):
    env.reset(options={"task_index": 0})
    for i in range(env.num_tasks):
        try:
            return i, *_first_write(env, i)
        except LookupError:
            continue
    raise LookupError("no task writes")


def _play(env, policy):
    terminated = truncated = False
    info = {}
    while not (terminated or truncated):
        _, _, terminated, truncated, info = env.step(policy(env))
    return info


def test_shared_records_copy_on_first_take():
    record = {"name": "a", "tags": ["x"]}
    original = SharedRecords({"k": record, "j": {"name": "j", "tags": []}})
    branch = original.share()
    branch["k"]["tags"].append("branch")
    assert record["tags"] == ["x"] and original["k"]["tags"] == ["x"]
    original["k"]["tags"].append("original")
    assert branch["k"]["tags"] == ["x", "branch"] and record["tags"] == ["x"]
    with reading():
        assert dict.__getitem__(branch, "j") is branch["j"]  # read in place, no copy
    for key, value in branch.items():
        value["seen"] = True
    assert "seen" not in dict.__getitem__(original, "j")
    assert type(copy.deepcopy(branch)) is dict and pickle.loads(pickle.dumps(branch)) == copy.deepcopy(branch)
    assert branch.pop("k")["tags"] == ["x", "branch"] and "k" not in branch and "k" in original


@pytest.mark.parametrize("domain", ["retail", "airline"])
def test_a_branch_and_its_original_diverge_independently(domain):
    env = Tau2Env(domain, user="gold")
    index, step, _ = _task_with_write(env)
    env.reset(options={"task_index": index})
    assert shares_records(env.environment)
    policy = GoldPolicy()
    for _ in range(step):
        env.step(policy(env))
    before = _db(env)
    child = env.branch()
    reference = env.branch("replay")  # a reset and the actions again: no record shared with env
    assert _db(child) == before == _db(reference)
    action = policy(env)
    child.step(action)
    assert _db(child) != before and _db(env) == before  # the branch's write stays in the branch
    grandchild = child.branch()
    env.step(action)
    reference.step(action)
    assert _db(env) == _db(child) == _db(reference) == _db(grandchild)
    twin = env.branch()
    infos = [_play(e, GoldPolicy()) for e in (env, twin, child, grandchild, reference)]
    assert [i["success"] for i in infos] == [True, True, True, True, True]
    rewards = [i["evaluation"]["reward"] for i in infos]
    assert rewards == [1.0] * 5
    # The evaluator's verdict is the same in every part that does not depend on wall-clock or ids.
    checks = [{k: v for k, v in i["evaluation"].items() if k in ("reward", "db_check", "action_checks", "reward_breakdown")} for i in infos]
    assert all(c == checks[-1] for c in checks)


@pytest.mark.parametrize("domain, tasks", [("retail", range(0, 114, 38)), ("airline", range(0, 50, 17))])
def test_gold_from_a_branch_at_every_step_still_wins(domain, tasks):
    env = Tau2Env(domain, user="gold")
    for index in tasks:
        env.reset(options={"task_index": index})
        policy = GoldPolicy()
        branches = []
        done = False
        while not done:
            branches.append(env.branch())
            _, _, terminated, truncated, info = env.step(policy(env))
            done = terminated or truncated
        won = info["success"]
        assert won or env.task["id"] in {"update_task_with_history_and_env_assertions"}
        for child in branches[:: max(1, len(branches) // 3)]:
            assert _play(child, GoldPolicy())["success"] == won


@pytest.mark.parametrize("domain", ["retail", "airline"])
def test_a_reset_starts_from_the_files_database(domain):
    env = Tau2Env(domain, user="gold")
    index, _, _ = _task_with_write(env)
    for _ in range(2):
        env.reset(options={"task_index": index})
        _play(env, GoldPolicy())
    env.reset(options={"task_index": index})
    assert _db(env) == new_environment(domain).get_db_hash()


@pytest.mark.parametrize("domain", ["retail", "airline"])
def test_read_only_tools_write_nothing(domain):
    """Records are read in place while a tool tau2 declares read-only runs: check that it changes nothing."""
    env = Tau2Env(domain, user="gold")
    seen: set[str] = set()
    tools = new_environment(domain).tools
    for index in range(env.num_tasks):
        for move in gold_plan(env.tasks[index])[0]:
            if isinstance(move, ToolCall) and tools.has_tool(move.name) and tools.tool_type(move.name).value == "read":
                if move.name in seen:
                    continue
                seen.add(move.name)
                env.reset(options={"task_index": index})
                environment = fork_environment(env.environment)
                before = environment.get_db_hash()
                with reading():
                    try:
                        environment.use_tool(move.name, **move.arguments)
                    except Exception:  # an error answer (not found...) must write nothing either
                        pass
                assert environment.get_db_hash() == before, move.name
    assert len(seen) >= 2


def test_tool_responses_equal_tau2s_get_response_without_its_log_line(monkeypatch):
    # The env calls tau2's tools itself (tau2's get_response formats every result into a debug
    # f-string, logging off or on): the messages and the databases it leaves must be tau2's own.
    from tau2.data_model.message import ToolCall as Tau2Call

    from ttg_envs.envs.tau2 import env as tau2_env

    ours, theirs = new_environment("retail"), new_environment("retail")
    user_id = next(iter(ours.tools.db.users))
    order_id = next(iter(ours.tools.db.orders))
    calls = [
        ("find_user_id_by_name_zip", {"first_name": "no", "last_name": "body", "zip": "00000"}),  # an error
        ("get_user_details", {"user_id": user_id}),
        ("get_order_details", {"order_id": order_id}),
        ("calculate", {"expression": "2 + 3 * 4"}),
        ("no_such_tool", {}),
        ("cancel_pending_order", {"order_id": order_id, "reason": "no longer needed"}),  # a write (or its error)
    ]
    formatted, errors = [], []
    monkeypatch.setattr(tau2_env.tau2("tau2.environment.environment"), "logger", type("L", (), {"debug": formatted.append})())
    for i, (name, arguments) in enumerate(calls):
        call = Tau2Call(id=f"c{i}", name=name, arguments=arguments, requestor="assistant")
        got = tau2_env._get_response(ours, call)
        want = theirs.get_response(call)
        assert got.model_dump(exclude={"timestamp"}) == want.model_dump(exclude={"timestamp"}), name
        errors.append(got.error)
    assert len(formatted) == len(calls)  # tau2's path logged each call; ours never formatted one
    assert ours.get_db_hash() == theirs.get_db_hash()
    assert errors[0] and errors[4] and not errors[1] and not errors[3]


def test_a_scripted_users_copy_shares_its_script_and_keeps_its_own_position():
    from ttg_envs.envs.tau2 import ScriptedUser
    from ttg_envs.envs.tau2.gold import UserTurn

    user = ScriptedUser([UserTurn("hello"), UserTurn("done", (ToolCall("toggle", {"on": True}),)), UserTurn("bye")])
    assert isinstance(user.turns, tuple)
    user.respond([])
    copied = copy.deepcopy(user)
    assert copied.turns is user.turns and copied.position == user.position == 1
    assert copied.respond([]).tool_calls[0].name == "toggle"  # the copy moves on alone
    assert (copied.position, copied.calls_made) == (1, True) and (user.position, user.calls_made) == (1, False)
    assert [user.respond([]).tool_calls[0].name, user.respond([]).content] == ["toggle", "done"]
    assert copied.respond([]).content == "done" and copied.respond([]).content == "bye"


def test_a_branchs_scripted_user_shares_the_script():
    env = Tau2Env("retail", user="gold")
    env.reset(options={"task_index": 0})
    env.step(GoldPolicy()(env))
    child = env.branch()
    assert child._episode.user is not env._episode.user
    assert child._episode.user.turns is env._episode.user.turns
