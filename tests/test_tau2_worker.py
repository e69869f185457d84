"""tau2 tool calls bounded in time by the episode's call worker (``Tau2Env(stateful_timeout=S)``):
a process forked from the env that owns a copy of the episode's environment and sends back only
the records a call changed. The env's own copy stays authoritative: gold still wins, the database
matches an in-process run's after every step, branches, undone steps, adoption and resets fork a
new worker from the env's state, and a late call is killed, the step undone, the episode going on."""

from __future__ import annotations

import json
import os
import time

import pytest

pytest.importorskip("tau2")

from ttg_envs.envs.tau2 import GoldPolicy, Tau2Env  # noqa: E402


def _dbs(env):
    environment = env.environment
    return [kit.db.model_dump() for kit in (environment.tools, environment.user_tools) if kit is not None and getattr(kit, "db", None)]


def _reaped(pid):
    try:
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        return True
    return False


def _passenger_update(reservation, first_name):
    passengers = [p.model_dump() for p in reservation.passengers]
    passengers[0]["first_name"] = first_name
    call = {"name": "update_reservation_passengers", "arguments": {"reservation_id": reservation.reservation_id, "passengers": passengers}}
    return f"<tool_call>{json.dumps(call)}</tool_call>"


def test_a_late_tau2_call_is_killed_in_the_worker_and_the_step_undone():
    # Before: no tau2 call but `calculate` had a time bound (Tau2Env took no stateful_timeout).
    from ttg_envs.envs.tau2.state import reading

    env = Tau2Env("airline", user="gold", stateful_timeout=10.0)
    env.reset(options={"task_index": 0})
    with reading():
        first, second = [r for r in env.environment.tools.db.reservations.values() if r.passengers][:2]
    obs, _, _, _, info = env.step(_passenger_update(first, "Ann"))
    assert info["action_valid"], obs[:300]
    worker = env.unwrapped._episode.worker
    pid, dbs, trajectory = worker.pid, _dbs(env), len(env.trajectory)
    # The step's first call runs, its second overruns a deadline too short for any call: the
    # worker is killed and the step undone whole (the first call's write too).
    real = env._in_worker
    calls = []

    def late_second(environment, tool_call):
        calls.append(tool_call.name)
        if len(calls) == 2:
            env.stateful_timeout = 1e-6
        return real(environment, tool_call)

    env._in_worker = late_second
    start = time.monotonic()
    obs, _, terminated, _, info = env.step(_passenger_update(second, "Bob") + _passenger_update(first, "Cid"))
    assert calls == ["update_reservation_passengers"] * 2
    assert "bound on a call's time" in obs and "undone" in obs and not info["action_valid"] and not terminated, obs[:300]
    assert time.monotonic() - start < 5
    assert _dbs(env) == dbs and len(env.trajectory) == trajectory  # nothing of the step stands
    assert not worker.alive and _reaped(pid) and env.unwrapped._episode.worker is None
    del env._in_worker
    env.stateful_timeout = 10.0
    obs, _, _, _, info = env.step(_passenger_update(second, "Dee"))  # a new worker from the env's state
    assert info["action_valid"], obs[:300]
    assert env.unwrapped._episode.worker.pid != pid
    assert env.environment.tools.db.reservations[second.reservation_id].passengers[0].first_name == "Dee"
    assert env.environment.tools.db.reservations[first.reservation_id].passengers[0].first_name == "Ann"
    worker = env.unwrapped._episode.worker
    env.close()
    assert not worker.alive and _reaped(worker.pid or pid)


def _step_both(pair, action):
    outs = [env.step(action) for env in pair]
    assert outs[0][1:] == outs[1][1:] and outs[0][0] == outs[1][0]
    assert _dbs(pair[0]) == _dbs(pair[1])
    return outs[1]


@pytest.mark.parametrize("domain", ["retail", "airline", "telecom"])
def test_the_worker_follows_branches_undone_steps_adoption_and_resets(domain):
    """Each env with the worker stays step for step equal to one without (observations, infos, database)."""
    from ttg_envs.tools.bounds import STATE_BOUNDS

    pair = [Tau2Env(domain, user="gold"), Tau2Env(domain, user="gold", stateful_timeout=10.0)]
    index = {"retail": 0, "airline": 1, "telecom": 0}[domain]
    for env in pair:
        env.reset(options={"task_index": index})
    policy = GoldPolicy()
    steps = carried = 0
    while True:
        action = policy(pair[1])
        steps += 1
        # A branch steps first (its own worker), then the original adopts it or steps itself.
        branches = [env.branch() for env in pair]
        _step_both(branches, action)
        worker = branches[1].unwrapped._episode.worker
        if steps % 2:
            for env, branch in zip(pair, branches):
                assert env.offer_step(branch)
        _, _, terminated, truncated, info = _step_both(pair, action)
        if steps % 2 and worker is not None:  # the adopted branch's worker serves the original now
            assert pair[1].unwrapped._episode.worker is worker and worker.alive
            carried += 1
        if terminated or truncated:
            break
    assert info["success"] and carried
    if domain == "airline":  # an undone step (past the state bound) puts another environment in place
        pair = [Tau2Env(domain, user="gold"), Tau2Env(domain, user="gold", stateful_timeout=10.0)]
        for env in pair:
            env.reset(options={"task_index": 0})
        from ttg_envs.envs.tau2.state import reading

        with reading():
            reservations = [r for r in pair[0].environment.tools.db.reservations.values() if r.passengers][:60]
        for i in range(STATE_BOUNDS.max_chars // 200_000 + 1):
            action = _passenger_update(reservations[2 * i], "Changed") + _passenger_update(reservations[2 * i + 1], "y" * 200_000)
            info = _step_both(pair, action)[4]
        assert not info["action_valid"]
        info = _step_both(pair, _passenger_update(reservations[2 * i], "Again"))[4]
        assert info["action_valid"]
    for env in pair:  # a reset: the database from the files again, and a new worker
        env.reset(options={"task_index": index})
    assert _dbs(pair[0]) == _dbs(pair[1])
    _step_both(pair, GoldPolicy()(pair[1]))
    for env in pair:
        env.close()


@pytest.mark.parametrize(
    "domain, tasks", [("airline", range(0, 50, 10)), ("retail", range(0, 114, 23)), ("telecom", range(0, 114, 23)), ("mock", range(9))]
)
def test_gold_wins_with_the_call_worker(domain, tasks):
    env = Tau2Env(domain, user="gold", stateful_timeout=10.0)
    for index in tasks:
        env.reset(options={"task_index": index})
        policy = GoldPolicy()
        terminated = truncated = False
        while not (terminated or truncated):
            _, _, terminated, truncated, info = env.step(policy(env))
        assert info["success"] or env.task["id"] == "update_task_with_history_and_env_assertions", env.task["id"]
    env.close()


def test_a_process_forked_from_the_env_forks_its_own_worker():
    # A pool worker forked from a process whose env has a call worker: the inherited worker is the
    # parent's (its pipes are shared); the child forks its own and the parent's stays as it was.
    env = Tau2Env("airline", user="gold", stateful_timeout=10.0)
    env.reset(options={"task_index": 0})
    call = '<tool_call>{"name": "get_user_details", "arguments": {"user_id": "sara_doe_496"}}</tool_call>'
    assert env.step(call)[4]["action_valid"]
    inherited = env.unwrapped._episode.worker.pid
    pid = os.fork()
    if pid == 0:
        try:
            info = env.step(call)[4]
            env.close()  # kills the child's worker only
            os._exit(0 if info["action_valid"] and env.unwrapped._episode.worker is None else 1)
        finally:
            os._exit(2)
    assert os.waitpid(pid, 0)[1] == 0
    assert env.unwrapped._episode.worker.alive and env.unwrapped._episode.worker.pid == inherited
    assert env.step(call)[4]["action_valid"]
    env.close()
