"""Bounded state and numbers in the tool envs: each case is ordinary model output that hung, raised
or blew up before (issue 29), now an invalid step whose observation names the bound it hit, with
the episode going on and nothing half done."""

from __future__ import annotations

import json
import time

import pytest

from ttg_envs.core import MAX_OBSERVATION_CHARS, cap_text
from ttg_envs.tools import Tool, ToolCall, validate_call
from ttg_envs.tools.bounds import STATE_BOUNDS, BoundExceeded, StateBounds, state_problem, value_problem


def nested(depth: int, leaf=1):
    value = leaf
    for _ in range(depth):
        value = [value]
    return value


# ----------------------------------------------------------------- the bounds themselves
def test_value_bounds_name_what_they_hit():
    assert value_problem({"a": [1, "x", {"b": 2.5}]}) is None
    assert "bound on nesting" in value_problem(nested(33))
    assert "bound on integers" in value_problem({"n": 10**309})
    assert "bound on list and object sizes" in value_problem([[1] * 100] * 101)
    assert "bound on text" in value_problem(["x" * (1 << 19)] * 3)
    shared = [[[1] * 100] * 100] * 100  # 38 characters of source, 10**6 elements as printed
    start = time.perf_counter()
    assert value_problem(shared) and time.perf_counter() - start < 0.5


def test_state_bounds_count_shared_parts_per_reference_and_skip_back_links():
    class Node:
        def __init__(self, parent=None):
            self.parent, self.children = parent, []

    root = Node()
    root.children.append(Node(root))  # a parent link is a back edge, not a cycle to expand
    assert state_problem(root) is None
    layer: list = [1]
    for _ in range(20):  # 20 objects, 2**20 paths
        layer = [layer, layer]
    assert "bound on state size" in state_problem(layer)
    assert "bound on state depth" in state_problem(nested(STATE_BOUNDS.max_depth + 1))
    assert "bound on state integers" in state_problem({"balance": [10**309]})
    assert state_problem({"balance": [10**308, True, 1e308]}) is None


def test_observations_are_capped_with_a_marker():
    text = "a" * (MAX_OBSERVATION_CHARS + 1000)
    capped = cap_text(text, MAX_OBSERVATION_CHARS)
    assert "1000 characters cut" in capped and len(capped) < MAX_OBSERVATION_CHARS + 100
    assert cap_text("short", 10) == "short"


def test_integers_above_1e308_are_a_type_error_not_an_overflow():
    tool = Tool("f", "", {"type": "object", "properties": {"x": {"type": "number"}}})
    assert validate_call(ToolCall("f", {"x": 10**400}), {"f": tool}) is None  # raised OverflowError
    assert "must be a number" in validate_call(ToolCall("f", {"x": "1"}), {"f": tool})


# ----------------------------------------------------------------- BFCL
def test_bfcl_an_integer_above_1e308_is_an_invalid_step():
    # Before: OverflowError out of env.step (the schema check's math.isfinite), as in every tool env
    # that checks types (tau2: test_tau2_huge_integer_is_an_invalid_call; AWM: test_awm_sandbox.py).
    pytest.importorskip("bfcl_eval")
    from ttg_envs.envs.bfcl import BFCLEnv

    env = BFCLEnv("multi_turn_base", scoring="lenient")
    env.reset(options={"task_index": 15})  # MathAPI's absolute_value takes a number
    call = {"name": "absolute_value", "arguments": {"number": 10**400}}
    obs, _, terminated, _, info = env.step(f"<tool_call>{json.dumps(call)}</tool_call>")
    assert "bound on integers" in obs and not info["action_valid"] and not terminated, obs[:300]
    obs, _, _, _, info = env.step('<tool_call>{"name": "absolute_value", "arguments": {"number": -2}}</tool_call>')
    assert info["action_valid"] and "2" in obs


def _fs(**contents):
    pytest.importorskip("bfcl_eval")
    from ttg_envs.envs.bfcl.backends import Backends

    root = {"w": {"type": "directory", "contents": contents or {"a": {"type": "directory", "contents": {}}}}}
    return Backends(["GorillaFileSystem"], {"GorillaFileSystem": {"root": root}}, long_context=False)


def test_folders_copied_into_each_other_stop_at_the_state_size_bound():
    # Before: state_key's cost tripled per copy (29.6 s at the 11th pair); 60 pairs never finished.
    backends = _fs()
    start = time.monotonic()
    with pytest.raises(BoundExceeded, match="bound on state size"):
        for i in range(60):
            for source, destination in (("a", f"b{i}"), (f"b{i}", "a")):
                before = backends.state_digest()
                backends.execute(ToolCall("cp", {"source": source, "destination": destination}))
    assert i < 12 and time.monotonic() - start < 10
    assert backends.state_digest() == before  # the call that crossed the bound was undone
    copy_ = backends.copy()
    assert copy_.state_digest() == backends.state_digest()


def test_a_step_that_crosses_a_state_bound_is_undone_whole_and_the_episode_goes_on():
    pytest.importorskip("bfcl_eval")
    from ttg_envs.envs.bfcl import BFCLEnv

    env = BFCLEnv("multi_turn_base", scoring="lenient")
    env.reset(options={"task_index": 0})
    model = env.unwrapped._episode.model
    fs = model.instances["GorillaFileSystem"]
    folder = next(n for n, item in fs._current_dir.contents.items() if type(item).__name__ == "Directory")
    key = env.unwrapped._state_key()
    calls = []
    for i in range(14):
        calls += [{"name": "cp", "arguments": {"source": folder, "destination": f"c{i}"}}]
        calls += [{"name": "cp", "arguments": {"source": f"c{i}", "destination": folder}}]
    action = "".join(f"<tool_call>{json.dumps(c)}</tool_call>" for c in calls)
    start = time.monotonic()
    obs, _, terminated, _, info = env.step(action)
    assert time.monotonic() - start < 10
    assert "bound on state size" in obs and not info["action_valid"] and not terminated
    assert not any(n.startswith("c") and n[1:].isdigit() for n in fs._current_dir.contents)  # none of the 28 calls stands
    assert env.unwrapped._episode.results == [] and info["state_key"] != key  # the turn's step counter moved
    assert env.step('<tool_call>{"name": "pwd", "arguments": {}}</tool_call>')[4]["action_valid"]
    env.branch()


def test_deep_folders_stop_at_the_state_depth_bound_and_branch():
    # Before: 200 nested folders made branch() raise RecursionError.
    backends = _fs()
    with pytest.raises(BoundExceeded, match="bound on state depth"):
        for i in range(200):
            backends.execute(ToolCall("mkdir", {"dir_name": f"d{i}"}))
            backends.execute(ToolCall("cd", {"folder": f"d{i}"}))
    assert 10 < i < 60
    assert backends.copy().state_digest() == backends.state_digest()


def test_grep_over_an_amplified_file_is_capped():
    # Before: the observation held every matching line (60 million characters for an 18 KB action).
    pytest.importorskip("bfcl_eval")
    from ttg_envs.envs.bfcl import BFCLEnv

    env = BFCLEnv("multi_turn_base", model_style="prompting")
    env.reset(options={"task_index": 0})
    name = "amplified.txt"
    obs, _, _, _, info = env.step(
        f"[touch(file_name='{name}'), echo(content='\\n' * 1048576, file_name='{name}'), grep(file_name='{name}', pattern='')]"
    )
    assert "characters cut" in obs and len(obs) <= MAX_OBSERVATION_CHARS + 200
    assert all(len(m.get("content") or "") <= MAX_OBSERVATION_CHARS + 200 for m in env.unwrapped.messages)


def test_message_flood_stops_at_the_state_size_bound(monkeypatch):
    # Before: MessageAPI._generate_id looped forever once its 90,000 ids were drawn. The state
    # bound stops a flood long before: 50,000 values (shrunk here so the test is quick).
    pytest.importorskip("bfcl_eval")
    from ttg_envs.envs.bfcl.backends import Backends

    assert STATE_BOUNDS.max_nodes < 90_000
    monkeypatch.setattr(Backends, "state_bounds", StateBounds(max_nodes=3000))
    backends = Backends(["MessageAPI"], {"MessageAPI": {"current_user": "USR001"}}, long_context=False)
    user = json.loads(backends.execute(ToolCall("list_users", {})))["user_list"][0]
    receiver = json.loads(backends.execute(ToolCall("get_user_id", {"user": user})))["user_id"]
    with pytest.raises(BoundExceeded, match="bound on state size"):
        for _ in range(3000):
            backends.execute(ToolCall("send_message", {"receiver_id": receiver, "message": "hi"}))
    assert len(backends.instances["MessageAPI"].generated_ids) < 1000


def test_official_prompting_literals_that_would_blow_up_are_invalid_steps():
    # Before: 28 s and 1 GB per step (the nested list), still running at 60 s (the shifted product).
    pytest.importorskip("bfcl_eval")
    from ttg_envs.envs.bfcl import BFCLEnv

    env = BFCLEnv("multi_turn_base", model_style="prompting")
    env.reset(options={"task_index": 0})
    big = "((1<<1048576)-1)"
    for action, bound in (
        ("[get_watchlist(x=[[[1]*100]*100]*100)]", "bound on literal sizes"),
        (f"[ls(a={big}*{big}*{big})]", "bound on integers"),
        ("[echo(content='ab' * 10**7)]", "bound on literal sizes"),
        ("[echo(content=" + "+".join(["'a'*1000000"] * 3) + ")]", "bound on literal sizes"),
    ):
        start = time.monotonic()
        obs, _, terminated, _, info = env.step(action)
        assert bound in obs and not info["action_valid"] and not terminated, action
        assert time.monotonic() - start < 5, action
    assert env.step("[pwd()]")[4]["action_valid"]


# ----------------------------------------------------------------- tau2
def _tau2_env():
    pytest.importorskip("tau2")
    from ttg_envs.envs.tau2 import Tau2Env

    env = Tau2Env("airline", user="gold")
    env.reset(options={"task_index": 0})
    return env


def _passengers_call(env, junk):
    reservation_id, reservation = next(iter(env.environment.tools.db.reservations.items()))
    passengers = [{**p.model_dump(), "junk": junk} for p in reservation.passengers]
    call = {"name": "update_reservation_passengers", "arguments": {"reservation_id": reservation_id, "passengers": passengers}}
    return reservation, f"<tool_call>{json.dumps(call)}</tool_call>"


def test_tau2_deep_argument_is_refused_before_the_call_runs():
    # Before: the reservation was updated, then env.step raised (tau2's serializer), leaving a
    # dangling trajectory message and an unchanged transcript and state_key.
    env = _tau2_env()
    reservation, action = _passengers_call(env, nested(300, "x"))
    passengers, trajectory = list(reservation.passengers), len(env.trajectory)
    obs, _, terminated, _, info = env.step(action)
    assert "bound on nesting" in obs and not info["action_valid"] and not terminated
    assert reservation.passengers == passengers and len(env.trajectory) == trajectory
    env.branch()  # before: RecursionError at 600 deep


def test_tau2_a_call_whose_record_would_fail_does_not_run(monkeypatch):
    # The arguments' bound lifted: what can fail in recording the call fails before it runs.
    import ttg_envs.tools.env as tool_env

    monkeypatch.setattr(tool_env, "_bounded", lambda call: None)
    env = _tau2_env()
    reservation, action = _passengers_call(env, nested(300, "x"))
    before = reservation.model_dump()
    trajectory, key = len(env.trajectory), env.unwrapped._state_key()
    obs, _, _, _, info = env.step(action)
    assert "cannot record its arguments" in obs and not info["action_valid"]
    assert env.environment.tools.db.reservations[reservation.reservation_id].model_dump() == before
    assert len(env.trajectory) == trajectory and info["state_key"] != key  # one more error, counted


def _passenger_update(reservation, first_name):
    passengers = [p.model_dump() for p in reservation.passengers]
    passengers[0]["first_name"] = first_name
    return {"name": "update_reservation_passengers", "arguments": {"reservation_id": reservation.reservation_id, "passengers": passengers}}


def test_tau2_database_past_the_state_bound_undoes_the_step_and_the_episode_goes_on():
    # Each response is within its bounds (200,000 characters, under the 262,144 of one action), but
    # they pile up in the airline database; before, every one was booked, without end. Each step
    # renames one passenger and gives another a 200,000-character name: the 21st crosses the 4 MiB
    # bound on state text (STATE_BOUNDS.max_chars), and its first call is undone too.
    from ttg_envs.envs.tau2.state import reading

    env = _tau2_env()
    with reading():  # the test's own look at the records takes none of them out
        reservations = [r for r in env.environment.tools.db.reservations.values() if r.passengers][:60]

    def action(i):
        calls = [_passenger_update(reservations[2 * i], "Changed"), _passenger_update(reservations[2 * i + 1], "y" * 200_000)]
        return "".join(f"<tool_call>{json.dumps(c)}</tool_call>" for c in calls)

    for i in range(30):
        db = env.environment.tools.db
        before = db.reservations[reservations[2 * i].reservation_id].model_dump()
        trajectory, messages, key = len(env.trajectory), len(env.unwrapped.messages), env.unwrapped._state_key()
        obs, _, terminated, _, info = env.step(action(i))
        if not info["action_valid"]:
            break
    assert i == STATE_BOUNDS.max_chars // 200_000, (i, obs[:300])
    assert "bound on state text" in obs and "undone" in obs and not terminated
    db = env.environment.tools.db  # the database from before the step: its first call did not happen either
    assert db.reservations[reservations[2 * i].reservation_id].model_dump() == before
    assert len(env.trajectory) == trajectory and len(env.unwrapped.messages) == messages + 3
    assert all("Bound exceeded" in m["content"] for m in env.unwrapped.messages[-2:]) and info["state_key"] != key
    replayed = env.branch("replay")  # a fresh replay of the transcript reaches the same state_key...
    assert replayed.environment.tools.db.model_dump() == db.model_dump()  # ...and the same database
    obs, _, _, _, info = env.step(f"<tool_call>{json.dumps(_passenger_update(reservations[2 * i], 'Changed'))}</tool_call>")
    assert info["action_valid"], obs[:300]  # the episode goes on
    assert env.environment.tools.db.reservations[reservations[2 * i].reservation_id].passengers[0].first_name == "Changed"


def test_tau2_huge_integer_is_an_invalid_call():
    env = _tau2_env()
    call = {"name": "send_certificate", "arguments": {"user_id": "sara_doe_496", "amount": 10**400}}
    obs, _, _, _, info = env.step(f"<tool_call>{json.dumps(call)}</tool_call>")
    assert "bound on integers" in obs and not info["action_valid"]


def test_a_step_whose_calls_run_too_long_is_stopped_and_undone(monkeypatch):
    # Each call is bounded by the state it walks; a step of many of them by the step's time bound.
    from ttg_envs.envs.bfcl.backends import Backends

    monkeypatch.setattr(Backends, "step_seconds", 0.3)
    backends = _fs()
    backends.execute(ToolCall("touch", {"file_name": "big.txt"}))
    backends.execute(ToolCall("echo", {"content": "\n" * 1_000_000, "file_name": "big.txt"}))
    before = backends.state_digest()
    start = time.monotonic()
    with pytest.raises(BoundExceeded, match="bound on a step's time"), backends.atomic():
        backends.execute(ToolCall("touch", {"file_name": "new.txt"}))
        for _ in range(256):
            backends.execute(ToolCall("grep", {"file_name": "big.txt", "pattern": ""}))
    assert time.monotonic() - start < 5 and backends.state_digest() == before  # new.txt undone too


def test_a_stateful_call_past_its_deadline_is_killed_in_the_worker_and_the_step_undone():
    # BFCLEnv(stateful_timeout=...) (an option; off by default): stateful calls run in the process's
    # call worker (ttg_envs/tools/worker.py, one fork per process, not per call). A grep over 30,000
    # lines (15-30 ms here) past a 1 ms deadline: before, nothing bounded one stateful call's time.
    pytest.importorskip("bfcl_eval")
    import os

    from ttg_envs.envs.bfcl import BFCLEnv
    from ttg_envs.tools import worker

    def action(*calls):
        return "".join(f"<tool_call>{json.dumps({'name': n, 'arguments': a})}</tool_call>" for n, a in calls)

    grep = ("grep", {"file_name": "big.txt", "pattern": "1"})
    env = BFCLEnv("multi_turn_base", scoring="lenient", stateful_timeout=10.0)
    env.reset(options={"task_index": 0})
    backends = env.unwrapped._episode.model
    lines = "".join(f"{i}\n" for i in range(30_000))
    assert env.step(action(("touch", {"file_name": "big.txt"}), ("echo", {"content": lines, "file_name": "big.txt"})))[4]["action_valid"]
    pid, digest = worker._WORKERS[os.getpid()].pid, backends.state_digest()
    backends.stateful_timeout = 0.001
    start = time.monotonic()
    obs, _, terminated, _, info = env.step(action(grep))
    assert "bound on a call's time" in obs and not info["action_valid"] and not terminated, obs
    assert time.monotonic() - start < 5 and backends.state_digest() == digest  # the backends as before
    assert os.getpid() not in worker._WORKERS  # the late worker was killed...
    with pytest.raises(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)  # ...and reaped
    backends.stateful_timeout = 10.0
    obs, _, _, _, info = env.step(action(grep))  # a new worker; the episode goes on
    assert info["action_valid"] and '"10"' in obs
    before = backends.state_digest()  # a step's earlier calls are undone with the late one
    with pytest.raises(BoundExceeded, match="bound on a call's time"), backends.atomic():
        backends.execute(ToolCall("touch", {"file_name": "new.txt"}))
        backends.stateful_timeout = 0.001
        backends.execute(ToolCall(*grep))
    assert backends.state_digest() == before


def test_a_late_answer_already_waiting_is_still_late(monkeypatch):
    # The deadline counts from the call: a caller descheduled while its payload's write returned
    # (CI at load: the answer was waiting when it looked, and a 1 ms bound let a 30 ms grep through)
    # must still find the call late. Simulated by a write that dawdles after the worker has the payload.
    from ttg_envs.tools import worker

    write = worker._write

    def slow_write(fd, data):
        write(fd, data)
        time.sleep(0.3)

    monkeypatch.setattr(worker, "_write", slow_write)
    with pytest.raises(worker.ToolTimeout):
        worker.call_with_deadline(time.sleep, (0.05,), 0.1)
    monkeypatch.setattr(worker, "_write", write)
    assert worker.call_with_deadline(abs, (-3,), 10.0) == 3  # a new worker answers in time


def test_a_single_turn_literal_past_the_bound_names_it():
    pytest.importorskip("bfcl_eval")
    from ttg_envs.envs.bfcl import BFCLEnv

    env = BFCLEnv("simple_python", model_style="prompting")
    env.reset(options={"task_index": 0})
    obs, reward, terminated, _, info = env.step(f"[{env.tools[0].name}(x=[[[1]*100]*100]*100)]")
    assert "bound on literal sizes" in obs and not info["action_valid"] and terminated and reward == 0
    assert info["evaluation"]["error_type"] == "ast_decoder:decoder_failed"  # the harness's verdict


def test_tau2_a_response_past_the_call_bound_runs_nothing_and_is_one_error():
    env = _tau2_env()
    call = '<tool_call>{"name": "get_user_details", "arguments": {"user_id": "sara_doe_496"}}</tool_call>'
    trajectory = len(env.trajectory)
    obs, _, terminated, _, info = env.step(call * 65)
    assert "the bound is 64 per step" in obs and not info["action_valid"] and not terminated
    assert len(env.trajectory) == trajectory and env.unwrapped._episode.errors == 1


def test_tau2_a_step_whose_user_fails_is_undone_and_can_be_retried():
    # The user's endpoint fails mid-step: the step raises and leaves the episode as it was.
    pytest.importorskip("tau2")
    from ttg_envs.envs.tau2 import GoldPolicy, Tau2Env
    from ttg_envs.envs.tau2.gold import gold_plan
    from ttg_envs.envs.tau2.users import ScriptedUser

    class Flaky(ScriptedUser):
        texts = 0  # agent text messages seen; the second one (the first after reset's greeting) fails once

        def respond(self, incoming):
            if len(incoming) == 1 and getattr(incoming[0], "role", "") == "assistant" and not incoming[0].tool_calls:
                Flaky.texts += 1
                if Flaky.texts == 2:
                    raise ConnectionError("the user's endpoint is down")
            return super().respond(incoming)

    env = Tau2Env("retail", user=lambda task, environment: Flaky(gold_plan(task)[1]))
    env.reset(options={"task_index": 0})
    policy, failed = GoldPolicy(), False
    terminated = truncated = False
    while not (terminated or truncated):
        action = policy(env)
        before = (len(env.trajectory), env.unwrapped._state_key(), len(env.unwrapped.messages))
        try:
            _, _, terminated, truncated, info = env.step(action)
        except ConnectionError:
            failed = True
            assert (len(env.trajectory), env.unwrapped._state_key(), len(env.unwrapped.messages)) == before
            _, _, terminated, truncated, info = env.step(action)  # the retry starts from the same state
    assert failed and info["success"]


def test_tau2_a_user_tool_call_past_the_bounds_is_not_run_and_stops_the_user():
    pytest.importorskip("tau2")
    from ttg_envs.envs.tau2 import Tau2Env
    from ttg_envs.envs.tau2.data import tau2

    message = tau2("tau2.data_model.message")

    class DeepUser:
        def respond(self, incoming):
            call = message.ToolCall(id="", name="check_status_bar", arguments={"x": nested(300)}, requestor="user")
            return message.UserMessage(role="user", tool_calls=[call])

    env = Tau2Env("telecom", user=lambda task, environment: DeepUser())
    obs, info = env.reset(options={"task_index": 0})
    assert obs == "###STOP###" and env.unwrapped._episode.ended  # before: tau2's serializer raised


def test_state_copies_never_recurse_and_keep_sharing_and_cycles():
    import copy
    import datetime
    import random

    from ttg_envs.tools.statecopy import copy_state

    shared = [1]
    state = {"a": shared, "b": shared, "t": (shared, "s"), "r": random.Random(3), "when": datetime.date(2026, 1, 1)}
    state["self"] = state
    copied = copy_state(state)
    assert copied["a"] is copied["b"] is copied["t"][0] and copied["a"] is not shared and copied["self"] is copied
    assert copied["r"].random() == random.Random(3).random() and copied["when"] == state["when"]
    deep = nested(20_000)  # copy.deepcopy raises RecursionError here
    with pytest.raises(RecursionError):
        copy.deepcopy(deep)
    copied = copy_state(deep)
    for _ in range(20_000):
        copied = copied[0]
    assert copied == 1


def test_forked_backends_share_instances_until_a_call_and_never_leak_changes():
    # Backends.fork shares every stateful instance (copy on write): each side copies one before its
    # first call into it, so neither side's calls, undone steps or sources reach the other.
    backends = _fs()
    backends.execute(ToolCall("cd", {"folder": "w"}))
    start = backends.state_digest()
    fork = backends.fork()
    assert fork.instances["GorillaFileSystem"] is backends.instances["GorillaFileSystem"]
    fork.execute(ToolCall("mkdir", {"dir_name": "only_in_fork"}))
    assert fork.instances["GorillaFileSystem"] is not backends.instances["GorillaFileSystem"]
    assert backends.state_digest() == start and fork.state_digest() != start
    backends.execute(ToolCall("touch", {"file_name": "only_in_original.txt"}))
    assert "only_in_original.txt" not in fork.execute(ToolCall("ls", {}))
    assert "only_in_fork" not in backends.execute(ToolCall("ls", {}))
    # A step undone on a fork goes back to the shared state, which stays as it was.
    again = backends.fork()
    before = again.state_digest()
    with pytest.raises(BoundExceeded, match="bound on state depth"), again.atomic():
        for i in range(200):
            again.execute(ToolCall("mkdir", {"dir_name": f"d{i}"}))
            again.execute(ToolCall("cd", {"folder": f"d{i}"}))
    assert again.state_digest() == before
    # A source's call copies the instance it reaches (a private method is refused: see below).
    third, start = backends.fork(), backends.state_digest()
    assert "Error" not in third.execute_source("mkdir(dir_name='z')")
    assert third.state_digest() != start and backends.state_digest() == start


def test_a_call_source_cannot_reach_private_backend_methods():
    # Before: `ttg_instance_GorillaFileSystem._load_scenario(...)` ran, past the step's undo copy
    # and the state bounds (the method table lists public methods only; the instance name did not).
    pytest.importorskip("bfcl_eval")
    from ttg_envs.envs.bfcl import BFCLEnv

    load = "ttg_instance_GorillaFileSystem._load_scenario"
    scenario = {"root": {"z": {"type": "directory", "contents": {}}}}
    fc = BFCLEnv("multi_turn_base", model_style="fc")
    prompting = BFCLEnv("multi_turn_base", model_style="prompting")
    for env, action in (
        (fc, "<tool_call>\n" + json.dumps({"name": load, "arguments": {"scenario": scenario}}) + "\n</tool_call>"),
        (fc, "<tool_call>\n" + json.dumps({"name": "ls.__func__", "arguments": {}}) + "\n</tool_call>"),
        # A public call first: the step is undone whole, mkdir too.
        (prompting, "[mkdir(dir_name='made'), ttg_instance_GorillaFileSystem._navigate_to_directory(path='/')]"),
        (fc, "<tool_call>\n" + json.dumps({"name": "ttg_instance_GorillaFileSystem.__dict__.clear", "arguments": {}}) + "\n</tool_call>"),
    ):
        env.reset(options={"task_index": 0})
        model = env.unwrapped._episode.model
        digest = model.state_digest()
        obs, _, terminated, _, info = env.step(action)
        assert "a private attribute" in obs and not info["action_valid"] and not terminated, (action, obs[:300])
        assert model.state_digest() == digest and env.unwrapped._episode.results == [], action
        assert env.step("[pwd()]" if env is prompting else '<tool_call>\n{"name": "pwd", "arguments": {}}\n</tool_call>')[4]["action_valid"]
    backends = _fs()
    with pytest.raises(BoundExceeded, match="private attribute"):
        backends.execute_source(f"{load}({scenario!r})")
    from ttg_envs.envs.bfcl.harness import execute_call_source  # the worker's path refuses it too

    result = execute_call_source(f"{load}({scenario!r})", backends.instances, backends.owner)
    assert "private attribute" in result and "Error during execution" in result
