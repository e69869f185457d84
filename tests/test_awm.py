"""ttg/AWM-v0: the AWM-1K format, SQLite episodes, the sandbox, gold replays, verifiers and branching."""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import shutil
import sqlite3
import warnings
from pathlib import Path

import gymnasium as gym
import pytest
from gymnasium.utils.env_checker import check_env
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ttg_envs.envs.awm import AWMEnv, load_scenarios
from ttg_envs.envs.awm.bundle import SCENARIOS, build
from ttg_envs.envs.awm.env import BUNDLED_DATA_DIR
from ttg_envs.envs.awm.policies import call_text, load_gold, make_policy
from ttg_envs.envs.awm.sandbox import host_db as db
from ttg_envs.wrappers import branch

GOLD = load_gold()


@pytest.fixture(scope="module")
def env():
    env = gym.make("ttg/AWM-v0")
    yield env
    env.close()


def _task(env, task_id: str):
    return env.reset(options={"task_id": task_id})


def _replay(env, task_id: str, calls, answer: str):
    _task(env, task_id)
    observations = [env.step(call_text(c["name"], c["arguments"]))[0] for c in calls]
    *_, info = env.step(answer)
    return observations, info


# ----------------------------------------------------------------- format and bundle
def test_bundle_has_eight_domains_with_verified_tasks():
    scenarios = load_scenarios(BUNDLED_DATA_DIR)
    assert [s.name for s in scenarios] == sorted(SCENARIOS) and len({s.name.rsplit("_", 1)[0] for s in scenarios}) == 8
    for s in scenarios:
        assert len(s.tasks) >= 5 and set(s.verifiers) == set(range(len(s.tasks)))
        assert all("def verify_task_completion(initial_db_path, final_db_path, final_answer" in v for v in s.verifiers.values())
        assert "create_engine(" in s.env_code and s.description and s.api_spec["api_groups"]
        assert all(f"{s.name}/{i}" in GOLD for i in range(len(s.tasks)))


def test_bundle_rebuilds_byte_identically(tmp_path):
    hashes = build(tmp_path)
    for name, sha in hashes.items():
        assert hashlib.sha256((BUNDLED_DATA_DIR / name).read_bytes()).hexdigest() == sha, name


def _copy_dataset(tmp_path: Path) -> Path:
    folder = tmp_path / "awm"
    shutil.copytree(BUNDLED_DATA_DIR, folder)
    return folder


def test_loader_joins_by_scenario_not_line_order(tmp_path):
    folder = _copy_dataset(tmp_path)
    envs = folder / "gen_envs.jsonl"
    envs.write_text("".join(reversed(envs.read_text().splitlines(keepends=True))))
    verifiers = folder / "gen_verifier.pure_code.jsonl"
    first = verifiers.read_text().splitlines()[0]
    duplicate = json.loads(first)
    duplicate["verification"]["code"] = "def verify_task_completion(a, b, c=None):\n    return {'result': 'complete'}\n"
    verifiers.write_text(verifiers.read_text() + json.dumps(duplicate) + "\n")
    with gzip.open(folder / "gen_tasks.jsonl.gz", "wt") as f:
        f.write((folder / "gen_tasks.jsonl").read_text())
    (folder / "gen_tasks.jsonl").unlink()
    (folder / "gen_spec.jsonl").unlink()  # optional, as in OpenEnv's download
    by_name = {s.name: s for s in load_scenarios(folder, ["helpdesk_1", "crm_1"])}
    assert sorted(by_name) == ["crm_1", "helpdesk_1"]
    bundled = {s.name: s for s in load_scenarios(BUNDLED_DATA_DIR)}
    assert by_name["crm_1"].env_code == bundled["crm_1"].env_code
    first_row = json.loads(first)
    assert (
        by_name.get(first_row["scenario"], bundled[first_row["scenario"]]).verifiers[0] == bundled[first_row["scenario"]].verifiers[0]
    )  # the first duplicate wins


def test_loader_errors_name_the_file(tmp_path):
    folder = _copy_dataset(tmp_path)
    (folder / "gen_sample.jsonl").write_text(json.dumps({"scenario": "crm_1", "sample_data": {"tables": []}}) + "\n")
    with pytest.raises(KeyError, match="helpdesk_1.*gen_sample.jsonl"):
        load_scenarios(folder, ["helpdesk_1"])
    (folder / "gen_envs.jsonl").unlink()
    with pytest.raises(FileNotFoundError, match="gen_envs.jsonl"):
        load_scenarios(folder)
    with pytest.raises(KeyError, match="nope"):
        load_scenarios(BUNDLED_DATA_DIR, ["nope"])


# ----------------------------------------------------------------- the database
def test_database_build_snapshot_restore(tmp_path):
    tables = [{"name": "t", "ddl": "CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT UNIQUE)", "indexes": []}]
    report = db.build_database(
        tmp_path / "a.db",
        tables,
        [
            "INSERT INTO t VALUES (1, 'x');",
            "INSERT INTO t VALUES (2, 'x');",
            f"ATTACH DATABASE '{tmp_path / 'evil.db'}' AS evil;",
            "INSERT INTO t VALUES (3, 'y');",
        ],
    )
    assert report.executed == 3 and [why for _, why in report.failed] == ["UNIQUE constraint failed: t.v", "not authorized"]
    assert not (tmp_path / "evil.db").exists()
    before = db.digest(tmp_path / "a.db")
    snap = db.snapshot(tmp_path / "a.db")
    conn = sqlite3.connect(tmp_path / "a.db")
    conn.execute("UPDATE t SET v = 'z' WHERE id = 3")
    conn.commit()
    conn.close()
    assert db.digest(tmp_path / "a.db") != before
    db.restore(tmp_path / "a.db", snap)
    assert db.digest(tmp_path / "a.db") == before


def test_snapshot_memo_parses_and_digests_each_database_once(tmp_path, monkeypatch):
    tables = [{"name": "t", "ddl": "CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT)", "indexes": []}]
    db.build_database(tmp_path / "a.db", tables, ["INSERT INTO t VALUES (1, 'x');"])
    first = (tmp_path / "a.db").read_bytes()
    conn = sqlite3.connect(tmp_path / "a.db")
    conn.execute("UPDATE t SET v = 'y' WHERE id = 1")
    conn.commit()
    conn.close()
    second = (tmp_path / "a.db").read_bytes()
    parses, dumps = [], []
    real_parse, real_dump = db.from_files, db._digest
    monkeypatch.setattr(db, "from_files", lambda *files: parses.append(1) or real_parse(*files))
    monkeypatch.setattr(db, "_digest", lambda conn: dumps.append(1) or real_dump(conn))
    memo = db.SnapshotMemo(size=2)
    snaps = [memo.from_files(first), memo.from_files(bytes(first)), memo.from_files(second), memo.from_files(first, None, None)]
    assert len(parses) == 2 and snaps[0] == snaps[1] == snaps[3] == real_parse(first) and snaps[2] == real_parse(second)
    assert memo.from_files(first, b"") == real_parse(first, b"") and len(parses) == 3  # another input (an empty WAL): parsed
    keys = [memo.digest(snaps[0]), memo.digest(bytes(snaps[0])), memo.digest(snaps[2])]
    assert len(dumps) == 2 and keys[0] == keys[1] == db.digest_snapshot(snaps[0]) != keys[2] == db.digest_snapshot(snaps[2])
    assert len(memo._snapshots) == 2  # the oldest went first
    with pytest.raises(sqlite3.DatabaseError):
        memo.from_files(b"not a database" * 100)
    with pytest.raises(sqlite3.DatabaseError):  # an error is never remembered
        memo.from_files(b"not a database" * 100)
    small = db.SnapshotMemo(max_bytes=len(snaps[0]))
    small.from_files(first), small.from_files(second)
    assert len(small._snapshots) == 1 and small._bytes == len(snaps[2])


# ----------------------------------------------------------------- gold replays and verifiers
@pytest.mark.slow  # a long integration test (CI runs it; -m 'not slow' leaves it out)
def test_every_gold_replay_succeeds_and_every_wrong_write_fails(env):
    assert env.unwrapped.num_tasks == len(GOLD) >= 40
    for task_id, gold in sorted(GOLD.items()):
        observations, info = _replay(env, task_id, gold["calls"], gold["final_answer"])
        assert not any(o.startswith("<tool_response>\nError") for o in observations), (task_id, observations)
        assert info["success"] and info["verifier_result"] == {"result": "complete"}, task_id
        _, info = _replay(env, task_id, gold["wrong_calls"], gold["final_answer"])
        assert not info["success"], task_id


def test_write_tasks_fail_without_the_write(env):
    writes = [
        t
        for t, g in GOLD.items()
        if "Reply with" not in env.unwrapped.tasks[env.unwrapped.task_index_of(t)].text
        and "?" not in env.unwrapped.tasks[env.unwrapped.task_index_of(t)].text
    ]
    assert len(writes) >= 30
    for task_id in writes:
        _, info = _replay(env, task_id, [], GOLD[task_id]["final_answer"])
        assert not info["success"], task_id


def test_tools_are_the_apps_routes(env):
    _, info = _task(env, "helpdesk_1/0")
    names = [t["function"]["name"] for t in info["tools"]]
    assert names[:2] == ["list_tickets", "create_ticket"] and "assign_ticket" in names
    create = next(t["function"] for t in info["tools"] if t["function"]["name"] == "create_ticket")
    assert create["parameters"]["required"] == ["subject", "description"]
    assert "# Tools" in env.unwrapped.messages[0]["content"] and "<tool_call>" in env.unwrapped.messages[0]["content"]
    obs, _, _, _, info = env.step(call_text("create_ticket", {"subject": "x"}))
    assert "missing required argument 'description'" in obs and not info["action_valid"]
    obs, *_ = env.step(call_text("get_ticket", {"ticket_id": 99}))
    assert obs == ('<tool_response>\nError calling get_ticket. Status code: 404. Response: {"detail":"Ticket not found"}\n</tool_response>')
    obs, *_ = env.step(call_text("delete_everything", {}))
    assert "Unknown tool 'delete_everything'" in obs
    messages = env.unwrapped.messages
    assert messages[-2]["tool_calls"][0]["function"]["name"] == "delete_everything" and messages[-1]["role"] == "tool"


# ----------------------------------------------------------------- the sandbox
CHAOS_APP = """
import os, socket, time
from fastapi import FastAPI
from sqlalchemy import create_engine, text
engine = create_engine("sqlite:///./outputs/databases/chaos.db", connect_args={"check_same_thread": False})
app = FastAPI()

@app.post("/count", operation_id="bump")
def bump():
    with engine.begin() as c:
        c.execute(text("UPDATE counter SET n = n + 1"))
    with engine.connect() as c:
        return {"n": c.execute(text("SELECT n FROM counter")).scalar()}

@app.get("/raise", operation_id="raises")
def raises():
    raise ValueError("model-written bug")

@app.get("/hang", operation_id="hangs")
def hangs():
    while True:
        time.sleep(0.01)

@app.get("/junk", operation_id="junk")
def junk():
    return "x" * 100000

@app.get("/exit", operation_id="exits")
def exits():
    os._exit(3)

@app.get("/net", operation_id="network")
def network():
    socket.create_connection(("127.0.0.1", 9), timeout=1)

@app.get("/write", operation_id="write_outside")
def write_outside(path: str):
    open(path, "w").write("x")

@app.get("/read", operation_id="read_outside")
def read_outside(path: str):
    return open(path).read()

@app.get("/spawn", operation_id="spawn")
def spawn():
    os.system("true")
"""

VERIFIERS = {
    0: "def verify_task_completion(initial_db_path, final_db_path, final_answer=None):\n    import sqlite3\n"
    "    n = sqlite3.connect(final_db_path).execute('SELECT n FROM counter').fetchone()[0]\n"
    "    return {'result': 'complete' if n == 2 else 'others', 'n': n}\n",
    1: "def verify_task_completion(initial_db_path, final_db_path, final_answer=None):\n    while True:\n        pass\n",
    2: "def verify_task_completion(initial_db_path, final_db_path, final_answer=None):\n"
    "    open('/tmp/ttg-awm-verifier-escape', 'w').write('x')\n",
    3: "def verify_task_completion(initial_db_path, final_db_path, final_answer=None):\n    return ['complete']\n",
    4: "def verify_task_completion(:\n",
}


@pytest.fixture(scope="module")
def chaos(tmp_path_factory):
    folder = tmp_path_factory.mktemp("chaos")
    rows = {
        "gen_scenario.jsonl": [{"name": "chaos_1", "description": "Misbehaving tools."}],
        "gen_tasks.jsonl": [{"scenario": "chaos_1", "tasks": [f"task {i}" for i in VERIFIERS]}],
        "gen_db.jsonl": [
            {
                "scenario": "chaos_1",
                "db_path": "x",
                "db_schema": {"tables": [{"name": "counter", "ddl": "CREATE TABLE counter (n INTEGER)", "indexes": []}]},
            }
        ],
        "gen_sample.jsonl": [
            {
                "scenario": "chaos_1",
                "sample_data": {"tables": [{"table_name": "counter", "insert_statements": ["INSERT INTO counter VALUES (0);"]}]},
            }
        ],
        "gen_envs.jsonl": [{"scenario": "chaos_1", "db_path": "x", "full_code": CHAOS_APP}],
        "gen_verifier.pure_code.jsonl": [
            {"scenario": "chaos_1", "task_idx": i, "task": "", "verification": {"code": c}} for i, c in VERIFIERS.items()
        ],
    }
    for name, lines in rows.items():
        (folder / name).write_text("".join(json.dumps(r) + "\n" for r in lines))
    env = AWMEnv(path=folder, tool_timeout=2, verifier_timeout=2)
    yield env
    env.close()


def _call(env, name, **arguments) -> str:
    return env.step(call_text(name, arguments))[0]


def test_misbehaving_tools_are_error_observations(chaos, tmp_path):
    chaos.reset(options={"task_index": 0})
    assert '"n":1' in _call(chaos, "bump")
    assert "Status code: 500" in _call(chaos, "raises")
    assert "did not answer within 2 s" in _call(chaos, "hangs")
    assert '"n":2' in _call(chaos, "bump")  # a fresh app process, same episode database
    junk = _call(chaos, "junk")
    assert "[truncated, 100002 characters in all]" in junk and len(junk) < 17_000
    assert "exited or broke the connection" in _call(chaos, "exits")
    outside = tmp_path / "escape.txt"
    for name, kwargs in [
        ("network", {}),
        ("write_outside", {"path": str(outside)}),
        ("read_outside", {"path": "/etc/hostname"}),
        ("spawn", {}),
    ]:
        assert "Status code: 500" in _call(chaos, name, **kwargs), name
    assert not outside.exists()
    *_, info = chaos.step("done")
    assert info["success"] and info["verifier_result"] == {"result": "complete", "n": 2}


@pytest.mark.parametrize("index, why", [(1, "no answer within 2 s"), (2, "sandbox: writing"), (3, None), (4, "SyntaxError")])
def test_misbehaving_verifiers_fail_the_task_not_the_caller(chaos, index, why):
    chaos.reset(options={"task_index": index})
    *_, info = chaos.step("done")
    assert info["success"] is False
    if why is None:
        assert info["verifier_result"] == ["complete"]
    else:
        assert why in info["verifier_result"]["error"]
    assert not os.path.exists("/tmp/ttg-awm-verifier-escape")


# ----------------------------------------------------------------- gymnasium contract
def test_check_env_passes_without_warnings():
    env = AWMEnv(scenarios=["crm_1"])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        check_env(env, skip_render_check=True)
    env.close()
    assert [str(w.message) for w in caught] == []


_JUNK = st.one_of(
    st.text(max_size=200),
    st.builds(lambda s: f"<tool_call>{s}</tool_call>", st.text(max_size=80)),
    st.builds(
        lambda n, a: f'<tool_call>{{"name": {json.dumps(n)}, "arguments": {json.dumps(a)}}}</tool_call>',
        st.sampled_from(["list_deals", "get_deal", "create_deal", "log_activity", "nope", ""]),
        st.dictionaries(
            st.sampled_from(["deal_id", "stage", "amount", "kind", "note", "x"]),
            st.one_of(st.integers(-5, 10**12), st.text(max_size=20), st.none(), st.booleans()),
            max_size=3,
        ),
    ),
    st.sampled_from(["<tool_call>", "</tool_call>", "<tool_call>{", '{"name": 1}', "[f(", "<think>"]),
    st.builds(lambda s: '<tool_call>{"name": "list_deals", "arguments": {}}' + s, st.text(max_size=20)),
)


@pytest.mark.slow  # a long integration test (CI runs it; -m 'not slow' leaves it out)
@settings(max_examples=1000, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(_JUNK)
def test_arbitrary_strings_raise_nothing(crm_env, text):
    if crm_env.unwrapped.task is None or crm_env.unwrapped.done:
        crm_env.reset(seed=0)
    obs, reward, _, _, info = crm_env.step(text)
    assert isinstance(obs, str) and obs and reward in (0.0, 1.0)
    if not info["action_valid"]:
        assert info["error"] in obs


@pytest.fixture(scope="module")
def crm_env():
    env = gym.make("ttg/AWM-v0", scenarios=["crm_1"], max_steps=8)
    yield env
    env.close()


_STEPS = st.lists(
    st.sampled_from(
        [
            call_text("update_deal_stage", {"deal_id": 1, "stage": "closed_won"}),
            call_text("update_deal_stage", {"deal_id": 2, "stage": "proposal"}),
            call_text("create_contact", {"company_id": 2, "name": "Mei Chen", "email": "m@x.io"}),
            call_text("list_deals", {}),
            "<tool_call>{bad json</tool_call>",
            "All done.",
        ]
    ),
    max_size=4,
)


@pytest.mark.slow  # a long integration test (CI runs it; -m 'not slow' leaves it out)
@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(prefix=_STEPS, suffix=_STEPS, method=st.sampled_from(["snapshot", "replay"]))
def test_branch_future_equals_original(crm_env, prefix, suffix, method):
    crm_env.reset(options={"task_id": "crm_1/0"})
    for action in prefix:
        if crm_env.step(action)[2]:
            return
    child = branch(crm_env, method)
    assert child.unwrapped.messages == crm_env.unwrapped.messages
    for action in suffix:
        if crm_env.unwrapped.done:
            break
        a, b = child.step(action), crm_env.step(action)
        assert (a[0], a[1], a[2], a[3], a[4]["state_key"]) == (b[0], b[1], b[2], b[3], b[4]["state_key"])
    child.close()


def test_branches_are_independent_and_keys_track_the_database(crm_env):
    base = crm_env.unwrapped
    crm_env.reset(options={"task_id": "crm_1/0"})
    start = base._state_key()
    crm_env.step(call_text("list_deals", {}))
    assert base._state_key() == start
    child = branch(crm_env)
    *_, info = child.step(call_text("update_deal_stage", {"deal_id": 1, "stage": "closed_won"}))
    assert info["state_key"] != start and base._state_key() == start
    *_, info = child.step("Done.")
    assert info["success"]
    *_, info = crm_env.step("Done.")
    assert not info["success"]
    child.close()


def test_branches_of_one_state_copy_its_database_once(crm_env, monkeypatch):
    """A guided step's trials start from the database as the last step left it, copied out once;
    a request to the app (a write among them) makes the next branch copy it again."""
    from ttg_envs.envs.awm import env as awm_env

    base = crm_env.unwrapped
    crm_env.reset(options={"task_id": "crm_1/0"})
    crm_env.step(call_text("update_deal_stage", {"deal_id": 1, "stage": "closed_won"}))  # its state key read it
    reads = []
    real = awm_env.copy_out
    monkeypatch.setattr(awm_env, "copy_out", lambda folder, name, *memo: reads.append(folder.path) or real(folder, name, *memo))
    children = [branch(crm_env) for _ in range(4)]
    assert base._workspace.folder.path not in reads
    crm_env.step(call_text("update_deal_stage", {"deal_id": 2, "stage": "closed_won"}))
    assert reads.count(base._workspace.folder.path) == 1  # the step's state key
    child = branch(crm_env)
    assert reads.count(base._workspace.folder.path) == 1
    for env in children:
        assert env.step(call_text("list_deals", {}))[4]["state_key"] != child.unwrapped._state_key()
    assert child.step(call_text("list_deals", {}))[4]["state_key"] == crm_env.step(call_text("list_deals", {}))[4]["state_key"]
    for env in [*children, child]:
        env.close()


def test_a_guided_steps_trials_parse_and_dump_each_database_once(crm_env, monkeypatch):
    """The trials' state keys share the env's snapshot memo: trials that leave the same database
    (a read-only call leaves the state's own) parse and dump it once between them."""
    base = crm_env.unwrapped
    crm_env.reset(options={"task_id": "crm_1/0"})
    crm_env.step(call_text("update_deal_stage", {"deal_id": 1, "stage": "closed_won"}))
    parses, dumps = [], []
    real_parse, real_dump = db.from_files, db.digest_snapshot
    monkeypatch.setattr(db, "from_files", lambda *files: parses.append(1) or real_parse(*files))
    monkeypatch.setattr(db, "digest_snapshot", lambda data: dumps.append(1) or real_dump(data))
    children = [branch(crm_env) for _ in range(4)]
    assert all(c.unwrapped._workspace.memo is base._workspace.memo for c in children)
    reads = [c.step(call_text("list_deals", {}))[4]["state_key"] for c in children]
    writes = [c.step(call_text("update_deal_stage", {"deal_id": 2, "stage": "closed_won"}))[4]["state_key"] for c in children]
    assert len(set(reads)) == 1 and len(set(writes)) == 1 and reads[0] != writes[0]
    assert len(parses) <= 2 and len(dumps) <= 2  # at most one of each per distinct database, of 8 state keys
    fresh = db.SnapshotMemo()  # the remembered digest is the one computed anew
    data = children[0].unwrapped._workspace.read()
    assert base._workspace.memo.digest(data) == fresh.digest(data) == real_dump(data)
    for env in children:
        env.close()


def test_branches_and_resets_fork_inside_one_sandbox(crm_env):
    """No branch or reset starts a sandbox: a branch forks the running app, a reset a warm one."""
    base = crm_env.unwrapped
    crm_env.reset(options={"task_id": "crm_1/0"})
    sandbox, zygote = base._workspace.sandbox, base._workspace.zygote._process
    assert base._workspace.app is not None  # forked from the warm app at the reset
    crm_env.step(call_text("update_deal_stage", {"deal_id": 1, "stage": "closed_won"}))
    users = sandbox.users
    children = [branch(crm_env) for _ in range(3)]
    grandchild = branch(children[0])
    for env in [*children, grandchild]:
        ws = env.unwrapped._workspace
        assert ws.sandbox is sandbox and ws.app is not None and ws.folder.path != base._workspace.folder.path
    assert sandbox.users == users + 4
    *_, info = children[1].step("Done.")
    assert info["success"]  # the branch's copy holds the write made before the branch
    children[2].step(call_text("update_deal_stage", {"deal_id": 2, "stage": "closed_won"}))
    assert base._state_key() != children[2].unwrapped._state_key()
    for env in children:
        env.close()
    assert grandchild.step(call_text("list_deals", {}))[4]["action_valid"]  # its parent's close leaves it running
    grandchild.close()
    assert sandbox.users == users and base._workspace.zygote._process is zygote
    crm_env.reset(options={"task_id": "crm_1/1"})
    assert base._workspace.zygote._process is zygote and base._workspace.app is not None


def test_a_closed_envs_sandbox_serves_the_next_env():
    first = AWMEnv(scenarios=["crm_1"])
    first.reset(options={"task_id": "crm_1/0"})
    sandbox = first._workspace.sandbox
    first.close()
    with AWMEnv(scenarios=["crm_1"]) as second:
        assert second._workspace.sandbox is sandbox  # from the pool, its warm app too
        second.reset(options={"task_id": "crm_1/0"})
        assert len(sandbox.warm) == 1
        assert second.step(call_text("list_deals", {}))[4]["action_valid"]


def test_the_pool_keeps_a_sandbox_only_for_its_own_scenario(monkeypatch):
    from ttg_envs.envs.awm.env import _Sandbox

    monkeypatch.setattr(_Sandbox, "_pool", {})
    released = []
    for domain in ["a", "a", "a", *"bcdefghij"]:  # sandboxes never started: nothing runs
        sandbox = _Sandbox("python", domain)
        sandbox.users = 1
        sandbox.release()
        released.append(sandbox)
    (pool,) = _Sandbox._pool.values()
    assert [s.domain for s in pool] == list("cdefghij")  # 2 of "a" at most, 8 in all, the oldest closed first
    assert not released[0].folder.path.exists() and pool[0].folder.path.exists()
    assert [s.folder.path.exists() for s in released[:4]] == [False] * 4  # a, a, a, b: over the bounds
    taken = [_Sandbox.take("python", "j"), _Sandbox.take("python", "j"), _Sandbox.take("python", "a")]
    assert taken[0] is released[-1] and taken[1] is not released[-1]  # the one idle "j", then a new one
    assert taken[2].domain == "a" and taken[2] not in released and len(pool) == 7  # never another scenario's
    for sandbox in [*pool, *taken]:
        sandbox.close()


def test_64_concurrent_envs_each_win_their_gold_replay():
    # A trainer's parallel rollouts: 64 envs open at once, each in a sandbox of its own, started and
    # played from 8 threads. Before, sandboxes shared uid 65534's 64 processes (from ~31 envs tool
    # calls failed with HTTP 500), and a sandbox started from a thread died when that thread ended.
    from concurrent.futures import ThreadPoolExecutor

    ids = sorted(GOLD)
    picked = [ids[(i * 7) % len(ids)] for i in range(64)]
    envs = [AWMEnv(scenarios=[t.split("/")[0]], tool_timeout=60) for t in picked]
    try:
        assert len({id(e._workspace.sandbox) for e in envs}) == 64

        def play(pair):
            env, task_id = pair
            return _replay(env, task_id, GOLD[task_id]["calls"], GOLD[task_id]["final_answer"])[1]["success"]

        with ThreadPoolExecutor(8) as pool:
            wins = list(pool.map(play, zip(envs, picked)))
        assert wins == [True] * 64
    finally:
        for env in envs:
            env.close()


def test_task_order_seeds_and_policies_are_deterministic():
    a, b = AWMEnv(scenarios=["library_1", "calendar_1"]), AWMEnv(scenarios=["calendar_1", "library_1"])
    assert [t.id for t in a.tasks] == [f"calendar_1/{i}" for i in range(6)] + [f"library_1/{i}" for i in range(5)]
    assert [a.reset(seed=s)[1]["task"]["id"] for s in range(6)] == [b.reset(seed=s)[1]["task"]["id"] for s in range(6)]
    noisy = make_policy("noisy_expert", seed=1, eps=0.5)
    outcomes = []
    for i in range(a.num_tasks):
        a.reset(options={"task_index": i})
        while True:
            _, _, terminated, truncated, info = a.step(noisy(a))
            if terminated or truncated:
                break
        outcomes.append(info["success"])
    assert 0 < sum(outcomes) < len(outcomes)
    with pytest.raises(ValueError, match="unknown AWM policy"):
        make_policy("gold")
    with pytest.raises(ValueError, match="one split"):
        AWMEnv(split="test")
    a.close()
    b.close()
