"""``ttg serve`` under bad input: wrong tokens, truncated JSON, 10 MB bodies, unknown sessions, a full
server, dead clients, idle sessions and 1,000 random requests. The server stays up, other sessions
play on unchanged, nothing leaks between sessions. Loopback only, bounded in count and time."""

from __future__ import annotations

import http.client
import json
import os
import random
import time
from pathlib import Path

import pytest

pytest.importorskip("openenv")

import httpx
from openenv.core.generic_client import GenericEnvClient
from websockets.sync.client import connect

import ttg_envs  # noqa: F401
from ttg_envs.cli import main
from ttg_envs.registry import make_policy
from ttg_envs.serve.remote_env import RemoteEnv, RemoteEnvError
from ttg_envs.serve.server import ServeConfig, ServeError, ServerThread
from ttg_envs.serve.wire import jsonable
from ttg_envs.wrappers import make_env

TOKEN = "s3cret-token"
KWARGS = {"split": "valid_seen"}
AUTH = {"Authorization": f"Bearer {TOKEN}"}


@pytest.fixture(scope="module")
def server():
    thread = ServerThread(ServeConfig("ttg/ALFWorld-v0", KWARGS, port=0, token=TOKEN, max_sessions=4))
    thread.start()
    yield thread
    thread.stop()


def _ws(url: str, headers=AUTH):
    return connect(url.replace("http://", "ws://") + "/ws", additional_headers=headers, open_timeout=10, max_size=None)


def _ask(ws, message) -> dict:
    ws.send(message if isinstance(message, str) else json.dumps(message))
    return json.loads(ws.recv(timeout=60))


class _Pair:
    """A remote session and the same episode in process, stepped together with the expert's texts."""

    def __init__(self, url: str, seed: int):
        self.remote = RemoteEnv(url, "ttg/ALFWorld-v0", token=TOKEN)
        self.local = make_env("ttg/ALFWorld-v0", **KWARGS)
        self.policy = make_policy("ttg/ALFWorld-v0", "noisy_expert:0.5", seed=seed)
        assert self.remote.reset(seed=seed) == tuple(jsonable(list(self.local.reset(seed=seed))))

    def step(self) -> bool:
        if self.local.unwrapped.done:
            return False
        text = self.policy(self.local)
        expected = self.local.step(text)
        assert self.remote.step(text) == (*expected[:4], jsonable(expected[4]))
        return True

    def close(self):
        assert jsonable(self.local.unwrapped.messages) == self.remote.messages
        self.remote.close()
        self.local.close()


def _live(server) -> int:
    return len(server.app.sessions)


def test_any_address_but_loopback_needs_a_token(capsys):
    with pytest.raises(ServeError, match="needs a bearer token"):
        ServeConfig("ttg/ALFWorld-v0", host="0.0.0.0").check()
    ServeConfig("ttg/ALFWorld-v0", host="0.0.0.0", token="t").check()
    assert main(["serve", "ttg/ALFWorld-v0", "--host", "10.1.2.3"]) == 2
    assert "needs a bearer token" in capsys.readouterr().err


def test_a_wrong_or_missing_token_is_refused(server):
    for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": TOKEN}):
        response = httpx.get(server.url + "/schema", headers=headers, timeout=10)
        assert response.status_code == 401 and "bearer token" in response.json()["detail"]
    assert httpx.get(server.url + "/schema", headers=AUTH, timeout=10).status_code == 200
    with pytest.raises(RemoteEnvError, match="401"):
        RemoteEnv(server.url, token="wrong")
    with pytest.raises(ConnectionError):
        with GenericEnvClient(base_url=server.url).sync() as client:
            client.reset()


def test_malformed_messages_get_clear_errors_and_the_session_goes_on(server):
    pair = _Pair(server.url, seed=1)
    with _ws(server.url) as ws:
        assert _ask(ws, {"type": "reset", "data": {"seed": 1}})["type"] == "observation"
        bad = [
            ('{"type": "step", "data": {"text": "<act', "Invalid JSON"),
            ({"type": "step", "data": {"text": 5}}, "Invalid message"),
            ({"type": "step", "data": {"bogus": 1}}, "Invalid message"),
            ({"type": "reset", "data": {"fork": "no-such-session"}}, "unknown session id"),
            ({"type": "reset", "data": {"colour": "red"}}, "unknown reset argument"),
            ({"type": "reset", "data": {"options": {"task_index": 10**6}}}, "out of range"),
            ({"type": "step", "data": {"sample": {"policy": "expert"}}}, "sample needs"),
            ({"type": "step", "data": {"sample": {"policy": "oracle", "key": "k"}}}, "unknown ALFWorld policy"),
            ({"type": "fly"}, "Unknown message type"),
            ("[1, 2", "Invalid JSON"),
        ]
        for message, why in bad:
            reply = _ask(ws, message)
            assert reply["type"] == "error" and why in json.dumps(reply), (message, reply)
            assert pair.step(), "another session is unaffected"
        # An over-long action is the local env's invalid step, not a transport error.
        reply = _ask(ws, {"type": "step", "data": {"text": "x" * 300_000}})
        info = reply["data"]["observation"]["info"]
        assert not info["action_valid"] and "262144" in info["error"]
    pair.close()


def test_stateless_http_resets_are_bounded(server, monkeypatch):
    response = httpx.post(server.url + "/reset", json={"seed": 0}, headers=AUTH, timeout=60)
    assert response.status_code == 200 and response.json()["observation"]["info"]["task"]["split"] == "valid_seen"
    monkeypatch.setattr(server.app, "max_stateless", 0)
    response = httpx.post(server.url + "/reset", json={"seed": 0}, headers=AUTH, timeout=60)
    assert response.status_code == 503 and "use a /ws session" in response.json()["detail"]
    step = httpx.post(server.url + "/step", json={"action": {"text": "<action>look</action>"}}, headers=AUTH, timeout=60)
    assert step.status_code == 400 and "send reset first" in step.json()["detail"]


def test_ten_megabyte_bodies_are_refused(server):
    pair = _Pair(server.url, seed=2)
    big = b'{"action": {"text": "' + b"a" * (10 * 1024 * 1024) + b'"}}'
    response = httpx.post(server.url + "/step", content=big, headers={**AUTH, "content-type": "application/json"}, timeout=30)
    assert response.status_code == 413 and "bytes" in response.json()["detail"]
    with _ws(server.url) as ws:
        ws.send(json.dumps({"type": "step", "data": {"text": "a" * (10 * 1024 * 1024)}}))
        with pytest.raises(Exception, match="1009|too big|message"):
            ws.recv(timeout=30)
    assert pair.step()
    pair.close()


def test_a_full_server_refuses_with_a_clear_error_and_the_others_play_on(server):
    deadline = time.monotonic() + 10
    while _live(server) and time.monotonic() < deadline:  # sessions of earlier tests are gone
        time.sleep(0.05)
    pairs = [_Pair(server.url, seed=s) for s in range(4)]
    with pytest.raises(RemoteEnvError, match="capacity"):
        RemoteEnv(server.url, token=TOKEN)
    for pair in pairs:
        assert pair.step()
    pairs.pop().close()
    deadline = time.monotonic() + 10
    while _live(server) > 3 and time.monotonic() < deadline:
        time.sleep(0.05)
    extra = _Pair(server.url, seed=9)  # the closed session's slot is free again
    assert extra.step()
    for pair in [*pairs, extra]:
        pair.close()


@pytest.mark.filterwarnings("ignore::DeprecationWarning")  # a raw socket, closed without a close frame
def test_a_client_that_dies_has_its_session_reclaimed(server):
    # Sessions by id: an earlier test's closed session may still be on its way out (seen under load).
    before = server.app.sessions.ids()
    ws = _ws(server.url)
    assert _ask(ws, {"type": "reset", "data": {"seed": 0}})["type"] == "observation"
    (mine,) = server.app.sessions.ids() - before
    ws.socket.close()  # no close frame: the process died
    deadline = time.monotonic() + 20
    while mine in server.app.sessions.ids() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert mine not in server.app.sessions.ids()


def test_an_idle_session_is_closed_and_says_so():
    server = ServerThread(ServeConfig("ttg/ALFWorld-v0", KWARGS, port=0, idle_timeout=0.5))
    with server as url:
        env = RemoteEnv(url)
        env.reset(seed=0)
        assert len(server.app.sessions) == 1
        deadline = time.monotonic() + 20  # OpenEnv's reaper looks every max(timeout / 4, 5) seconds
        while len(server.app.sessions) and time.monotonic() < deadline:
            time.sleep(0.25)
        with pytest.raises(RemoteEnvError, match="closed"):
            env.step("<action>look</action>")


def test_a_thousand_random_requests_leave_the_server_serving(server):
    rng = random.Random(0)
    a, b = _Pair(server.url, seed=3), _Pair(server.url, seed=4)
    paths = ["/reset", "/step", "/state", "/schema", "/metadata", "/health", "/mcp", "/ws", "/docs", "/nope", "/" + "x" * 300]
    words = ["{", "}", '"type"', '"step"', '"reset"', '"data"', ":", ",", "null", "[", "]", '"text"', '"fork"', "1e309", '"\\ud800"']

    def junk() -> str:
        return "".join(rng.choice(words) for _ in range(rng.randint(0, 12)))

    statuses = {}
    client = http.client.HTTPConnection(*server.address, timeout=30)
    with _ws(server.url) as ws:
        for i in range(1000):
            if i % 2:
                headers = AUTH if rng.random() < 0.8 else {"Authorization": f"Bearer wrong{rng.random()}"}
                method = rng.choice(["GET", "POST", "PUT", "DELETE"])
                body = junk().encode() if rng.random() < 0.7 else bytes(rng.getrandbits(8) for _ in range(rng.randint(0, 64)))
                client.request(method, rng.choice(paths), body=body, headers=headers)
                response = client.getresponse()
                text = response.read()
                statuses[response.status] = statuses.get(response.status, 0) + 1
                assert response.status < 500, (method, body, text)
            else:
                # Resets stay on one game (a new game loads in ~0.3 s; this test is about the protocol).
                data = rng.choice(
                    [
                        {"text": junk()},
                        {"seed": rng.randint(-3, 3), "options": {"task_index": 0}},
                        {"fork": junk()},
                        {"options": junk()},
                        {"sample": {"policy": "expert", "key": "k", "n": rng.randint(-1, 99)}},
                    ]
                )
                message = junk() if rng.random() < 0.5 else json.dumps({"type": rng.choice(["step", "reset", "state"]), "data": data})
                ws.send(message)
                reply = json.loads(ws.recv(timeout=60))
                assert reply["type"] in ("error", "observation", "state")
            if i % 50 == 0:
                a.step() or b.step()
    assert httpx.get(server.url + "/health", headers=AUTH, timeout=10).json()["status"] == "healthy"
    while a.step() | b.step():
        pass
    client.close()
    a.close()
    b.close()
    assert statuses.get(401) and statuses.get(200) and statuses.get(422)


def _descendants(pid: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(entry.name))
    out, todo = [], [pid]
    while todo:
        found = children.get(todo.pop(), [])
        out += found
        todo += found
    return out


@pytest.mark.filterwarnings("ignore::DeprecationWarning")  # a raw socket, closed without a close frame
def test_a_dead_clients_awm_sandbox_is_reclaimed():
    pytest.importorskip("sqlalchemy")
    from ttg_envs.envs.awm.env import close_idle_sandboxes

    with ServerThread(ServeConfig("ttg/AWM-v0", {"scenarios": ["crm_1"]}, port=0)) as url:
        before = set(_descendants(os.getpid()))
        ws = _ws(url, headers=None)
        assert _ask(ws, {"type": "reset", "data": {"seed": 0}})["type"] == "observation"
        sandbox = set(_descendants(os.getpid())) - before
        assert sandbox, "the episode's app runs in sandbox processes"
        ws.socket.close()  # the client died
        # A released sandbox waits in the process's pool (alive, its episode's files gone): closing the
        # idle ones ends it only once the server has reclaimed the session, which is what this checks
        # (before, the test passed only where an earlier test had left a pooled sandbox).
        deadline = time.monotonic() + 20
        while sandbox & set(_descendants(os.getpid())) and time.monotonic() < deadline:
            close_idle_sandboxes()
            time.sleep(0.05)
        assert not sandbox & set(_descendants(os.getpid()))


def test_a_missing_extra_is_named():
    from ttg_envs._optional import MissingExtraError
    from ttg_envs.serve.wire import require_openenv

    with pytest.raises(MissingExtraError, match=r"'serve' extra: pip install 'ttg-envs\[serve\]' && pip install --no-deps openenv-core"):
        require_openenv("openenv.no_such_module")
