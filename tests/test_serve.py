"""``ttg serve`` and ``RemoteEnv``: OpenEnv's own client plays whole episodes, and every env plays
the same through a server as in process (observations, rewards, info fields, transcripts, a
guided-4 episode). Servers listen on 127.0.0.1 only."""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import time
from pathlib import Path

import gymnasium as gym
import pytest

pytest.importorskip("openenv")

from openenv.core.generic_client import GenericEnvClient

import ttg_envs  # noqa: F401
from ttg_envs.agents import GuidedSelector, load_actor
from ttg_envs.meters import load_meter
from ttg_envs.registry import make_policy
from ttg_envs.serve.remote_env import RemoteEnv
from ttg_envs.serve.server import ServeConfig, ServerThread
from ttg_envs.serve.wire import jsonable
from ttg_envs.wrappers import make_env, try_actions

ROOT = Path(__file__).resolve().parent.parent


GENERIC = {
    "ttg/ALFWorld-v0": ({"split": "valid_seen"}, "expert", {"task_index": 3}),
    "ttg/BFCL-v0": ({"categories": "multi_turn_base"}, "gold", {"task_index": 0}),
}


@pytest.fixture(scope="module", autouse=True)
def ttg_serve_processes():
    """A ``ttg serve`` subprocess per GENERIC env on a free loopback port, started with the module so
    that their start-up overlaps the other tests; the tests that use them come last."""
    env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    procs = {
        env_id: subprocess.Popen(
            [sys.executable, "-m", "ttg_envs.cli", "serve", env_id, "--env-kwargs", json.dumps(kwargs), "--port", "0"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
            text=True,
        )
        for env_id, (kwargs, _, _) in GENERIC.items()
    }
    yield procs
    for proc in procs.values():
        proc.kill()
        proc.wait(timeout=30)


def _url_of(proc) -> str:
    """The URL a ``ttg serve`` subprocess prints once it listens."""
    deadline, line = time.monotonic() + 120, ""
    while time.monotonic() < deadline and "http://" not in line:
        if proc.poll() is not None:
            raise AssertionError(f"ttg serve exited: {proc.stderr.read()}")
        if select.select([proc.stdout], [], [], 1)[0]:
            line = proc.stdout.readline()
    assert "http://127.0.0.1:" in line, line
    return line.split(" on ", 1)[1].split()[0]


def _local_episode(env_id: str, kwargs: dict, policy: str, seed: int, options: dict | None = None, max_steps: int = 60):
    """Texts a scripted policy plays locally, and the local results of each step."""
    env = make_env(env_id, **kwargs)
    pol = make_policy(env_id, policy, seed=seed)
    obs, info = env.reset(seed=seed, options=options)
    texts, results = [], [(obs, jsonable(info))]
    for _ in range(max_steps):
        texts.append(pol(env))
        obs, reward, terminated, truncated, info = env.step(texts[-1])
        results.append((obs, reward, terminated, truncated, jsonable(info)))
        if terminated or truncated:
            break
    messages = jsonable(env.unwrapped.messages)
    env.close()
    return texts, results, messages


FIVE = [
    ("ttg/ALFWorld-v0", {"split": "valid_unseen"}, "noisy_expert:0.3", 12),
    ("ttg/PaperSearchQA-v0", {"split": "test"}, "noisy_expert:0.3", 6),
    ("ttg/AWM-v0", {"scenarios": ["crm_1"], "max_steps": 8}, "noisy_expert:0.3", 4),
    ("ttg/BFCL-v0", {"categories": "multi_turn_base"}, "gold", 6),
    ("ttg/Tau2-v0", {"domain": "mock", "user": "gold"}, "gold", 4),
]


@pytest.mark.parametrize("env_id, kwargs, policy, steps", FIVE, ids=[f[0].split("/")[1] for f in FIVE])
def test_remote_env_plays_like_the_local_env(env_id, kwargs, policy, steps):
    seed = 5
    texts, local, messages = _local_episode(env_id, kwargs, policy, seed=seed, max_steps=steps)
    with ServerThread(ServeConfig(env_id, kwargs, port=0)) as url:
        env = make_env("ttg/Remote-v0", url=url, env_id=env_id)  # TokenCounter over RemoteEnv, as a local stack
        obs, info = env.reset(seed=seed)
        assert (obs, info) == local[0]
        for text, expected in zip(texts, local[1:]):
            assert env.step(text) == expected  # observation, reward, terminated, truncated, every info field
            assert env.unwrapped.messages[-1] == messages[len(env.unwrapped.messages) - 1]
        _, _, _, _, info = expected
        assert jsonable(env.unwrapped.messages) == messages
        assert env.unwrapped.elapsed_steps == info["elapsed_steps"] and env.unwrapped.success == info["success"]
        # Branching over the wire: trials from a fork equal trials from a local branch.
        if not env.unwrapped.done:
            local_env = make_env(env_id, **kwargs)
            local_env.reset(seed=seed)
            for text in texts:
                local_env.step(text)
            remote_trials = try_actions(env, texts[:1] + ["<action>look</action>"])
            local_trials = try_actions(local_env, texts[:1] + ["<action>look</action>"])
            for r, lt in zip(remote_trials, local_trials):
                assert (r.observation, r.reward, r.terminated, r.truncated, r.info) == (
                    lt.observation,
                    lt.reward,
                    lt.terminated,
                    lt.truncated,
                    jsonable(lt.info),
                )
            assert env.unwrapped.elapsed_steps == len(texts), "the trials left the env untouched"
            local_env.close()
        env.close()


def _guided(env, selector, steps: int):
    env.reset(seed=2, options={"task_index": 5})
    log = []
    for _ in range(steps):
        action = selector(env)
        obs, reward, terminated, truncated, info = env.step(action)
        keys = ("ttg", "ttg_cost", "ttg_delta", "success", "state_key", "assistant_tokens")
        log.append((action.text, list(selector.last.deltas), obs, reward, terminated, truncated, {k: info.get(k) for k in keys}))
        if terminated or truncated:
            break
    return log


def test_guided_4_over_the_wire_equals_the_local_episode():
    kwargs = {"split": "valid_seen", "max_steps": 8}
    meter = load_meter("ttg/ALFWorld-v0")
    local = _guided(
        make_env("ttg/ALFWorld-v0", meter=meter, **kwargs), GuidedSelector(load_actor("scripted:noisy_expert:0.75", seed=7), k=4), 8
    )
    assert any(len(set(step[1])) > 1 for step in local), "the meter ranked candidates differently somewhere"
    with ServerThread(ServeConfig("ttg/ALFWorld-v0", kwargs, port=0, max_sessions=8)) as url:
        remote_env = make_env("ttg/Remote-v0", url=url, env_id="ttg/ALFWorld-v0", meter=meter)  # meter on the client
        remote = _guided(remote_env, GuidedSelector(load_actor("scripted:noisy_expert:0.75", seed=7), k=4), 8)
        remote_env.close()
    assert [step[:6] for step in remote] == [step[:6] for step in local]
    assert [step[6] for step in remote] == [jsonable(step[6]) for step in local]
    # The meter on the server (ttg serve --meter): the fields arrive in info, and the selector uses them.
    with ServerThread(ServeConfig("ttg/ALFWorld-v0", kwargs, meter="ttg/ALFWorld-v0", port=0, max_sessions=8)) as url:
        remote_env = gym.make("ttg/Remote-v0", url=url, env_id="ttg/ALFWorld-v0")
        served = _guided(remote_env, GuidedSelector(load_actor("scripted:noisy_expert:0.75", seed=7), k=4), 8)
        remote_env.close()
    assert [step[0] for step in served] == [step[0] for step in local]
    assert all(step[6]["ttg_cost"] is not None for step in served)


def test_remote_env_refuses_a_server_of_another_env():
    with ServerThread(ServeConfig("ttg/PaperSearchQA-v0", {"split": "test"}, port=0)) as url:
        with pytest.raises(Exception, match="serves 'ttg/PaperSearchQA-v0', not 'ttg/ALFWorld-v0'"):
            RemoteEnv(url, "ttg/ALFWorld-v0")


def test_ttg_eval_env_url_gives_the_local_results():
    from ttg_envs.eval.evaluate import evaluate

    kwargs = {"max_steps": 8}
    common = dict(seeds=[0, 1], limit=1, workers=1)
    local = evaluate("ttg/ALFWorld-v0", ["valid_seen"], ["natural"], "scripted:noisy_expert:0.5", env_kwargs=kwargs, **common)
    with ServerThread(ServeConfig("ttg/ALFWorld-v0", {"split": "valid_seen", **kwargs}, port=0)) as url:
        remote_kwargs = {"url": url, "env_id": "ttg/ALFWorld-v0"}  # what `ttg eval --env-url URL` passes
        remote = evaluate("ttg/Remote-v0", ["valid_seen"], ["natural"], "scripted:noisy_expert:0.5", env_kwargs=remote_kwargs, **common)
        with pytest.raises(Exception, match="serves split 'valid_seen'"):
            evaluate("ttg/Remote-v0", ["valid_unseen"], ["natural"], "scripted:expert", env_kwargs=remote_kwargs, seeds=[0], limit=1)
    assert remote == local and len(local) == 2


@pytest.mark.parametrize("env_id", list(GENERIC))
def test_ttg_serve_with_openenvs_generic_client(env_id, ttg_serve_processes):
    kwargs, policy, options = GENERIC[env_id]
    texts, local, _ = _local_episode(env_id, kwargs, policy, seed=0, options=options)
    assert local[-1][4]["success"], "the scripted policy wins locally"
    url = _url_of(ttg_serve_processes[env_id])
    import httpx

    schema = httpx.get(url + "/schema", timeout=10).json()
    assert "text" in schema["action"]["properties"] and "info" in schema["observation"]["properties"]
    with GenericEnvClient(base_url=url).sync() as client:  # OpenEnv's client, no ttg code
        result = client.reset(seed=0, options=options)
        assert result.observation["text"] == local[0][0] and result.observation["info"] == local[0][1]
        for i, (text, (obs, reward, terminated, truncated, info)) in enumerate(zip(texts, local[1:])):
            if i == 1:  # a fork, by OpenEnv's own client too: its own future, the original's untouched
                with GenericEnvClient(base_url=url).sync() as fork:
                    forked = fork.reset(fork=result.observation["session"])
                    assert forked.observation["info"]["state_key"] == local[1][4]["state_key"]
                    assert fork.step({"text": texts[1]}).observation["info"] == info
                    fork.step({"text": "<action>look</action>"})
            result = client.step({"text": text})
            assert result.observation["text"] == obs and result.reward == reward and result.observation["info"] == info
            assert result.done == (terminated or truncated)
        assert result.done and result.observation["info"]["success"] and result.observation["terminated"]
