"""Hostile and careless inputs outside AWM: linear parsers, bounded actions, torn trajectory files,
lone surrogates, tool calls that never end or change the caller's numeric state, deep nesting."""

from __future__ import annotations

import decimal
import json
import re
import time
import warnings

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ttg_envs.core import MAX_ACTION_CHARS, parse_react
from ttg_envs.envs.papersearchqa.env import parse_search_action
from ttg_envs.tools.parsing import parse_tool_calls
from ttg_envs.wrappers import (
    TokenCounter,
    TrajectoryRecorder,
    read_trajectories,
    write_trajectory,
)
from ttg_envs.wrappers.recorder import sort_by_task

# ----------------------------------------------------------------- linear-time parsers
PARSERS = {"react": parse_react, "search": parse_search_action, "tool_calls": parse_tool_calls}
#: Pieces an adversarial action repeats: unclosed tags, fence openers, whitespace runs.
UNITS = st.sampled_from(
    [
        "<action>",
        "<ACTION>x",
        "<search>",
        "<answer>",
        "<search>a</answer>",
        "<tool_call>",
        "<tool_call>{",
        "</think><tool_call>",
        "```",
        "``` ",
        " ",
        "\n",
        "[f(",
        '{"name": ',
        "<think>",
        "<action></act",
    ]
)


def _best_time(fn, text: str, repeats: int = 5) -> float:
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        fn(text)
        best = min(best, time.perf_counter() - start)
    return best


@settings(max_examples=25, deadline=None)
@given(
    parser=st.sampled_from(sorted(PARSERS)), units=st.lists(UNITS, min_size=1, max_size=3), head=st.sampled_from(["", "```", "<action>x"])
)
def test_parse_time_grows_linearly_with_adversarial_length(parser, units, head):
    fn, unit = PARSERS[parser], "".join(units)
    small = head + unit * (4096 // len(unit))
    large = head + unit * (8 * 4096 // len(unit))
    ratio = _best_time(fn, large) / max(_best_time(fn, small), 1e-5)
    assert ratio < 30, f"{parser}: 8x the input took {ratio:.0f}x the time (quadratic would be ~64x)"


_OLD_ACTION = re.compile(r"<action>(.*?)</action>", re.DOTALL | re.IGNORECASE)
_OLD_SEARCH = re.compile(r"<(search|answer)>(.*?)</\1>", re.DOTALL | re.IGNORECASE)
_TAG_SOUP = st.lists(
    st.sampled_from(["<action>", "</action>", "<ACTION>", "</Action>", "<search>", "</search>", "<answer>", "</ANSWER>", "go", " ", "q"]),
    max_size=10,
).map("".join)


@settings(max_examples=300, deadline=None)
@given(_TAG_SOUP)
def test_linear_parsers_read_what_the_old_regexes_read(text):
    blocks = _OLD_ACTION.findall(text)
    parsed = parse_react(text)
    if len(blocks) == 1 and " ".join(blocks[0].split()):
        assert parsed.command == " ".join(blocks[0].split())
    else:
        assert parsed.error
    match = _OLD_SEARCH.search(text)
    parsed = parse_search_action(text)
    if match and " ".join(match.group(2).split()):
        assert parsed.command == (match.group(1).lower(), " ".join(match.group(2).split()))
    else:
        assert parsed.error


def test_a_code_fence_is_still_unwrapped():
    fenced = parse_tool_calls('```json\n{"name": "f", "arguments": {"a": 1}}\n```')
    assert [(c.name, c.arguments) for c in fenced.calls] == [("f", {"a": 1})]
    assert not parse_tool_calls("```" + " " * 50_000 + "x").calls


# ----------------------------------------------------------------- bounded actions
@pytest.fixture(scope="module")
def search_env():
    import gymnasium as gym

    env = gym.make("ttg/PaperSearchQA-v0", split="test")
    yield env
    env.close()


def test_an_action_over_the_limit_is_an_invalid_step_stating_it(tiny_env, search_env):
    for env, action in ((tiny_env, "<action>look</action>"), (search_env, "<search>hemoglobin</search>")):
        env.reset(seed=0)
        obs, reward, terminated, truncated, info = env.step(action + " " * MAX_ACTION_CHARS)
        assert not info["action_valid"] and f"the limit is {MAX_ACTION_CHARS} characters" in obs
        assert reward == 0 and not terminated
        assert env.step(action)[4]["action_valid"]  # the episode goes on


# ----------------------------------------------------------------- trajectory files
RECORDS = [
    {"task": {"id": "b"}, "text": "plain"},
    {"task": {"id": "a"}, "text": "é 中 😀 \u2028"},
    {"task": {"id": "c"}, "text": "中😀é" * 5},
]


def test_a_record_cut_at_any_byte_is_skipped(tmp_path):
    path = tmp_path / "t.jsonl"
    for record in RECORDS:
        write_trajectory(path, record)
    data = path.read_bytes()
    last = data.rindex(b"\n", 0, len(data) - 1) + 1
    for cut in range(last + 1, len(data) - 1):  # every byte of the last record, mid-character included
        path.write_bytes(data[:cut])
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            assert list(read_trajectories(path)) == RECORDS[:2], cut
            sort_by_task(path)
        assert any("torn" in str(w.message) for w in caught), cut
        assert [r["task"]["id"] for r in read_trajectories(path)] == ["a", "b"]


def test_lone_surrogates_are_written_and_read_back(tmp_path, tiny_env):
    path = tmp_path / "t.jsonl"
    env = TrajectoryRecorder(TokenCounter(tiny_env), path)
    env.reset(seed=0)
    action = "<think>\ud800 odd \udfff</think><action>look</action>"
    _, _, _, _, info = env.step(action)
    assert info["assistant_tokens"] > 0
    while True:
        *_, terminated, truncated, _ = env.step("<action>look</action>\udc80")
        if terminated or truncated:
            break
    (record,) = read_trajectories(path)
    assert record["messages"][2]["content"] == action
    path.read_bytes().decode("utf-8")  # strict UTF-8 on disk


def test_the_recorder_fails_at_construction_on_an_unwritable_path(tmp_path, tiny_env):
    with pytest.raises(IsADirectoryError):
        TrajectoryRecorder(tiny_env, tmp_path)
    (tmp_path / "file").write_text("")
    with pytest.raises((NotADirectoryError, FileExistsError)):
        TrajectoryRecorder(tiny_env, tmp_path / "file" / "t.jsonl")


# ----------------------------------------------------------------- tool calls with limits
def _math_backends():
    pytest.importorskip("bfcl_eval")
    from ttg_envs.envs.bfcl.backends import Backends

    return Backends(["MathAPI"], {}, long_context=False)


def test_bfcl_math_calls_leave_the_callers_decimal_and_mpmath_state():
    mpmath = pytest.importorskip("mpmath")
    from ttg_envs.tools import ToolCall

    backends = _math_backends()
    prec, dps = decimal.getcontext().prec, mpmath.mp.dps
    assert json.loads(backends.execute(ToolCall("power", {"base": 2, "exponent": 10}))) == {"result": 1024}
    assert "0.63092975" in backends.execute(ToolCall("logarithm", {"value": 2, "base": 3, "precision": 40}))
    assert backends.execute(ToolCall("square_root", {"number": 2, "precision": 60})).count("4") >= 3
    assert (decimal.getcontext().prec, mpmath.mp.dps) == (prec, dps)


def test_bfcl_math_calls_are_time_limited(monkeypatch):
    from ttg_envs.envs.bfcl.backends import Backends
    from ttg_envs.tools import ToolCall

    backends = _math_backends()
    monkeypatch.setattr(Backends, "call_timeout", 2.0)
    start = time.monotonic()
    for name, arguments in (("power", {"base": 10, "exponent": 10**9}), ("logarithm", {"value": 3, "base": 2, "precision": 10**8})):
        result = backends.execute(ToolCall(name, arguments))
        # Stopped at the time limit, or (logarithm) out of the child's memory limit.
        assert "did not finish within 2 s" in result or '"error"' in result, (name, result)
    assert time.monotonic() - start < 20
    assert json.loads(backends.execute(ToolCall("power", {"base": 2, "exponent": 10}))) == {"result": 1024}


def test_bfcl_official_call_strings_get_the_same_limits(monkeypatch):
    """Official scoring executes the harness's call strings (Backends.execute_source): limited and isolated too."""
    mpmath = pytest.importorskip("mpmath")
    from ttg_envs.envs.bfcl.backends import Backends

    backends = _math_backends()
    monkeypatch.setattr(Backends, "call_timeout", 2.0)
    prec, dps = decimal.getcontext().prec, mpmath.mp.dps
    start = time.monotonic()
    result = backends.execute_source("power(base=10, exponent=1000000000)")
    assert "did not finish within 2 s" in result or '"error"' in result, result
    assert time.monotonic() - start < 20
    assert json.loads(backends.execute_source("power(base=2, exponent=10)")) == {"result": 1024}
    assert "0.63092975" in backends.execute_source("logarithm(value=2, base=3, precision=40)")
    assert (decimal.getcontext().prec, mpmath.mp.dps) == (prec, dps)


def test_bfcl_state_nested_600_deep_still_hashes():
    pytest.importorskip("bfcl_eval")
    from ttg_envs.envs.bfcl.backends import Backends
    from ttg_envs.tools import ToolCall
    from ttg_envs.tools.bounds import BoundExceeded

    config = {"TwitterAPI": {"authenticated": True, "username": "u", "password": "p"}}
    backends = Backends(["TwitterAPI"], config, long_context=False)
    nested: list = []
    for _ in range(600):
        nested = [nested]
    with pytest.raises(BoundExceeded, match="bound on nesting"):  # a call may no longer store it
        backends.execute(ToolCall("post_tweet", {"content": "x", "tags": nested}))
    backends.instances["TwitterAPI"].tweets[0] = {"tags": nested}  # state built otherwise still hashes
    assert len(backends.state_digest()) == 64  # raised RecursionError before
    assert backends.copy().state_digest() == backends.state_digest()  # and copies (copy.deepcopy raised)


def test_tau2_calculate_bomb_is_an_error_and_the_episode_goes_on(monkeypatch):
    pytest.importorskip("tau2")
    from ttg_envs.envs.tau2 import Tau2Env

    monkeypatch.setattr(Tau2Env, "tool_timeout", 2.0)
    env = Tau2Env("airline", user="gold")
    env.reset(options={"task_index": 0})
    call = '<tool_call>{"name": "calculate", "arguments": {"expression": "%s"}}</tool_call>'
    start = time.monotonic()
    obs, _, terminated, _, info = env.step(call % "9**9**9**9")
    assert "did not finish within 2 s" in obs and not terminated and time.monotonic() - start < 20
    obs, *_ = env.step(call % "(2 + 3) * 4")
    assert "20.0" in obs
    env.close()


def test_a_limited_call_dies_with_its_caller(tmp_path):
    # The caller is killed mid-call (a pool worker shut down, a user's ^C): its forked child must
    # not go on computing as an orphan until its own deadline.
    import os
    import signal
    import subprocess
    import sys
    import time

    pid_file = tmp_path / "child.pid"
    code = (
        "import os, sys\n"
        "from ttg_envs.tools.limits import run_limited\n"
        "def spin():\n"
        f"    open({str(pid_file)!r}, 'w').write(str(os.getpid()))\n"
        "    while True:\n"
        "        pass\n"
        "run_limited(spin, 300)\n"
    )
    caller = subprocess.Popen([sys.executable, "-c", code])
    deadline = time.monotonic() + 60
    while not (pid_file.exists() and pid_file.read_text()) and time.monotonic() < deadline:
        time.sleep(0.05)
    child = int(pid_file.read_text())
    caller.send_signal(signal.SIGKILL)
    caller.wait()
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            with open(f"/proc/{child}/stat") as f:
                if f.read().split(")")[-1].split()[0] == "Z":  # dead, waiting to be reaped by init
                    break
        except FileNotFoundError:
            break
        time.sleep(0.05)
    else:
        os.kill(child, signal.SIGKILL)
        raise AssertionError("the limited call outlived its caller")
