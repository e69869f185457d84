"""``ttg/AWM-v0``: AgentWorldModel environments, a SQLite database behind each scenario's tool API.

An episode builds a fresh database from the scenario's schema and sample rows and serves the
scenario's FastAPI app over it in a sandboxed child process (:mod:`.sandbox.inside_app`). The tools are the
app's routes (named by ``operationId``), listed in the system prompt and ``info["tools"]``. An
assistant response without tool calls is the final answer: the scenario's verifier then compares
the initial and final databases (and the answer) in another sandboxed child and sets ``success``.
Branches and resets fork warm apps in a sandbox that holds only one scenario's code
(:class:`_Sandbox`: how, and when a branch replays instead). The parent reads the episode folder only through a directory descriptor
(:mod:`.sandbox.host_folder`): a database the app replaced by a link, a directory or nothing is an error, never a
file read or written outside.
"""

from __future__ import annotations

import atexit
import hashlib
import json
import os
import threading
import weakref
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from ..._optional import require
from ...core import Generation, StepOutcome
from ...registry import turn_limit
from ...tools import ParsedResponse, Tool, ToolCall, ToolEnv
from ...tools.bounds import MAX_CALLS_PER_STEP, BoundExceeded
from .format import Scenario, load_scenarios
from .openapi import Route, tools_from_openapi
from .sandbox import host_bwrap, host_cgroup, host_db, host_folder
from .sandbox.host_cgroup import SandboxCgroup
from .sandbox.host_folder import EpisodeFolder, remove_abandoned, scratch_folder
from .sandbox.host_process import AppProcess, SandboxError, SandboxTimeout, Verdict, Zygote, copy_out, run_verifier

BUNDLED_DATA_DIR = Path(__file__).parent / "data"
INSTRUCTIONS = (
    "You are an agent that completes the user's task in the application described below by calling its "
    "tools. You act for the signed-in user (user id 1). Call tools as needed, one step at a time, and "
    "read each result before the next step. When the task is done, or cannot be done, reply with a "
    "short final answer and no tool call; that ends the episode."
)


@dataclass(frozen=True)
class AWMTask:
    """One task: the scenario it runs in, its index there, and its text."""

    scenario: str
    index: int
    text: str
    source: str

    @property
    def id(self) -> str:
        """``<scenario>/<task index>``."""
        return f"{self.scenario}/{self.index}"

    def info(self) -> dict[str, Any]:
        """The ``info["task"]`` dict."""
        domain = self.scenario.rstrip("0123456789").rstrip("_") or self.scenario
        return {"id": self.id, "type": domain, "split": "train", "source": self.source, "scenario": self.scenario, "index": self.index}


@dataclass
class _Prepared:
    """What every episode of a scenario shares: the initial database and the tools."""

    initial: bytes
    initial_digest: str = ""
    tools: list[Tool] | None = None
    routes: dict[str, Route] | None = None


@dataclass
class _Armed:
    """A branch's first call sent to its app before the step asked for it (:meth:`AWMEnv.start_trials`).

    ``key``: the request (:func:`_request_key`); ``data``: the database the branch started from,
    loaded again when the step turns out not to make that call; ``error``: what sending it raised,
    raised again where the step would have met it.
    """

    key: str
    data: bytes
    error: Exception | None = None


def _request_key(method: str, path: str, query: dict[str, Any], body: Any, has_body: bool) -> str:
    return json.dumps([method, path, query, body if has_body else None, has_body], sort_keys=True)


def trust_domain(scenario: Scenario) -> str:
    """The digest of all of ``scenario``'s code (app and verifiers, with its name): what may share a sandbox."""
    verifiers = sorted(scenario.verifiers.items())
    return hashlib.sha256(json.dumps([scenario.name, scenario.env_code, verifiers]).encode()).hexdigest()


class _Sandbox:
    """One OS sandbox of one scenario's code (``domain``, :func:`trust_domain`): its fork server, its
    folder, and warm app processes, shared by an episode and its branches (each in a subfolder of
    its own) and later episodes of that scenario, never by another scenario's code.

    ``warm`` holds up to :data:`WARM_APPS` apps that loaded the scenario's code over its initial
    database and never served a request: a reset forks one of them instead of loading the code again.
    When the last user closes, the sandbox (fork server and warm apps; every other process stopped,
    the episode folders gone) waits in a pool for the next env of this process that runs the same
    scenario: at most :data:`POOL` per scenario and :data:`POOL_TOTAL` per mode (the least recently
    released closed first); what is left there is closed at exit (:func:`close_idle_sandboxes`).

    Branches (where the app keeps its state in the database: the bundled apps) copy the database
    with SQLite's backup API into a subfolder of the same sandbox and fork the running app there;
    otherwise they replay the episode, so an app's in-memory state is rebuilt too. A reset to
    another scenario moves the episode to a sandbox of that scenario's own.
    """

    WARM_APPS = 4
    POOL = 2
    POOL_TOTAL = 8
    # Keyed by the owning process too: a forked process must not take (or delete) its parent's.
    # Each list holds the idle sandboxes of every scenario, the least recently released first.
    _pool: ClassVar[dict[tuple[int, str], list[_Sandbox]]] = {}
    _lock: ClassVar[threading.Lock] = threading.Lock()

    def __init__(self, mode: str, domain: str) -> None:
        self.mode, self.domain = mode, domain
        # As root, a uid of its own: its process limit is not shared with any other sandbox.
        self.lease = host_bwrap.UidLease() if mode == "bwrap" and host_bwrap.needs_lease() else None
        self.uid = self.lease.uid if self.lease is not None else None
        try:
            self.folder = EpisodeFolder.locked(owner=host_bwrap.owner(self.uid), kernel_bounded=True)
        except BaseException:
            if self.lease is not None:
                self.lease.close()
            raise
        # And, where the host can make one, a cgroup bounding its CPU, memory and tasks in all.
        self.cgroup = SandboxCgroup.create(f"ttg-awm-{self.uid}") if self.uid is not None else None
        if mode == "bwrap" and self.uid is None:
            host_cgroup.warn_unavailable("the host is not root")
        self.zygote = Zygote(self.folder.path, mode, self.uid, self.cgroup)
        self.users = 0
        self.warm: OrderedDict[tuple, tuple[EpisodeFolder, AppProcess]] = OrderedDict()

    @classmethod
    def take(cls, mode: str, domain: str) -> _Sandbox:
        """An idle sandbox of ``mode`` for the scenario ``domain`` from the pool, else a new one (started on first use).

        First the folders that dead hosts (``kill -9``) left are deleted.
        """
        remove_abandoned()
        dead = []
        try:
            with cls._lock:
                pool = cls._pool.get((os.getpid(), mode), [])
                for i in reversed(range(len(pool))):
                    if pool[i].domain != domain:
                        continue
                    sandbox = pool.pop(i)
                    if sandbox.zygote.running:
                        return sandbox
                    dead.append(sandbox)
        finally:
            for sandbox in dead:
                sandbox.close()
        return cls(mode, domain)

    def release(self) -> None:
        """One user fewer; the last one puts the sandbox in the pool (closing what that leaves over its bounds)."""
        self.users -= 1
        if self.users > 0:
            return
        evicted = [self]
        with self._lock:
            pool = self._pool.setdefault((os.getpid(), self.mode), [])
            if self.zygote.running and self.zygote.sweep() and self.zygote.clear_tmp():
                pool.append(self)
                evicted = []
                same = [s for s in pool if s.domain == self.domain]
                evicted += same[: max(0, len(same) - self.POOL)]
                pool[:] = [s for s in pool if s not in evicted]
                evicted += pool[: max(0, len(pool) - self.POOL_TOTAL)]
                pool[:] = [s for s in pool if s not in evicted]
        for sandbox in evicted:
            sandbox.close()

    def warm_app(
        self, scenario: Scenario, prepared: _Prepared, *, start_timeout: float, limits: dict[str, int]
    ) -> tuple[EpisodeFolder, AppProcess]:
        """The warm app of ``scenario`` under ``limits`` (started now when there is none or it died)."""
        if trust_domain(scenario) != self.domain:
            raise ValueError(f"scenario {scenario.name!r}'s code may not run in another scenario's sandbox")
        key = (prepared.initial_digest, tuple(sorted(limits.items())))
        entry = self.warm.get(key)
        if entry is not None and entry[1].alive:
            self.warm.move_to_end(key)
            return entry
        self.drop_warm(key)
        while len(self.warm) >= self.WARM_APPS:
            self.drop_warm(next(iter(self.warm)))
        sub = self.folder.subfolder("warm-")
        try:
            sub.write(_Workspace.DATABASE, prepared.initial)
            app = AppProcess(
                self.zygote,
                sub.path,
                sub.path / _Workspace.DATABASE,
                scenario.env_code,
                start_timeout=start_timeout,
                limits=limits,
                openapi=prepared.tools is None,
            )
        except BaseException:
            sub.close()
            raise
        self.warm[key] = (sub, app)
        return sub, app

    def drop_warm(self, key: tuple) -> None:
        """Stop the warm app under ``key``, if any."""
        entry = self.warm.pop(key, None)
        if entry is not None:
            entry[1].close()
            entry[0].close()

    def close(self) -> None:
        """Stop every process of the sandbox and delete its folder."""
        for key in list(self.warm):
            self.drop_warm(key)
        self.zygote.close()
        self.folder.close()
        if self.cgroup is not None:
            self.cgroup.close()
        if self.lease is not None:
            self.lease.close()


def close_idle_sandboxes() -> None:
    """Close the pooled AWM sandboxes no env uses (also run at interpreter exit)."""
    with _Sandbox._lock:
        mine = [key for key in _Sandbox._pool if key[0] == os.getpid()]
        idle = [s for key in mine for s in _Sandbox._pool.pop(key)]
    for sandbox in idle:
        sandbox.close()


atexit.register(close_idle_sandboxes)


class _Workspace:
    """An env's episode folder (holding the episode database) in a shared sandbox, and its app process."""

    DATABASE = "episode.db"

    def __init__(self, sandbox: _Sandbox, memo: host_db.SnapshotMemo | None = None) -> None:
        self.folder = sandbox.folder.subfolder("episode-")
        sandbox.users += 1
        self.sandbox = sandbox
        #: The env's (and its branches') snapshots and digests by their bytes.
        self.memo = memo if memo is not None else host_db.SnapshotMemo()
        self.app: AppProcess | None = None
        self._closed = False
        # The database as last copied out, until anything may change it (a request to the app, a
        # load, a stop): a guided step's branches all start from it instead of copying it four times.
        self._last_read: bytes | None = None

    @property
    def zygote(self) -> Zygote:
        return self.sandbox.zygote

    @property
    def database(self) -> Path:
        return self.folder.path / self.DATABASE

    def stop_app(self) -> None:
        self._last_read = None
        if self.app is not None:
            self.app.close()
            self.app = None

    def load(self, data: bytes) -> None:
        """Stop the app and make the folder hold only the database ``data``."""
        self.stop_app()
        self.folder.clear()
        self.folder.write(self.DATABASE, data)
        self._last_read = None

    def fork_from(self, app: AppProcess | None, timeout: float) -> None:
        """Serve this folder's database by a fork of ``app`` (a no-op when it is not running: the
        first call then starts a new app; so it does when the fork fails)."""
        if app is not None and app.alive:
            try:
                self.app = app.fork(self.zygote, self.folder.path, self.database, timeout=timeout)
            except SandboxError:
                self.app = None

    def read(self, reuse: bool = False) -> bytes:
        """A snapshot of the episode database (:class:`SandboxError` when the app broke it); with
        ``reuse``, the last one read when nothing that may change the database happened since."""
        if reuse and self._last_read is not None:
            return self._last_read
        self._last_read = None
        self._last_read = data = copy_out(self.folder, self.DATABASE, self.memo)
        return data

    def changing(self) -> None:
        """The database may change now (a request to the app): the next read copies it again."""
        self._last_read = None

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        try:
            self.stop_app()
            self.folder.close()
        finally:
            self.sandbox.release()


_INITIAL: OrderedDict[str, bytes] = OrderedDict()
#: Initial databases kept per process (the most recently used).
INITIAL_CACHE = 64


def _initial_database(scenario: Scenario) -> bytes:
    """The scenario's initial database, built once per process for each schema and sample rows."""
    key = hashlib.sha256(json.dumps([scenario.tables, scenario.inserts], sort_keys=True, default=str).encode()).hexdigest()
    if key in _INITIAL:
        _INITIAL.move_to_end(key)
    else:
        while len(_INITIAL) >= INITIAL_CACHE:
            _INITIAL.popitem(last=False)
        with scratch_folder("ttg-awm-build-") as scratch:
            host_db.build_database(scratch / "initial.db", scenario.tables, scenario.inserts)
            _INITIAL[key] = host_db.snapshot(scratch / "initial.db")
    return _INITIAL[key]


def _final_answer(content: str) -> str:
    # The verifier gets the answer the user would see: the text after the reasoning.
    return content.rsplit("</think>", 1)[-1].strip()


class AWMEnv(ToolEnv):
    """AgentWorldModel scenarios with sandboxed app code and verifiers.

    Args:
        split: ``train`` (AWM is a training set; the paper does not test on it).
        source: ``bundled``: the project's offline scenarios in the AWM format.
        path: an AgentWorldModel-1K folder (``gen_*.jsonl``) instead of the bundle.
        scenarios: keep only these scenario names.
        tool_timeout: seconds a tool call may take before the app process is stopped.
        verifier_timeout: seconds a verifier may take.
        max_steps: truncation limit (paper table 4: 20).
        sandbox: ``"bwrap"`` (default): app and verifier code run in bubblewrap's namespaces as an
            unprivileged uid (:mod:`.sandbox.host_bwrap`); :class:`~.sandbox.host_bwrap.SandboxUnavailable` when it
            cannot run here. ``"python"``: only the in-process guard (warns).
        limits: hard resource limits of app and verifier processes (keys of
            :data:`~.sandbox.inside_guard.DEFAULT_LIMITS`: ``as``, ``fsize``, ``cpu``, ``nproc``, ``nofile``).
        state_in_database: whether the apps keep all their state in the database and per-request
            SQLAlchemy connections, so that a branch may copy the database and fork the running app
            (its memory comes along; default: true for the bundled apps, false for ``path``; false
            branches by replaying the episode).
    """

    default_max_steps = turn_limit("ttg/AWM-v0")

    def __init__(
        self,
        split: str = "train",
        *,
        source: str = "bundled",
        path: str | os.PathLike | None = None,
        scenarios: Iterable[str] | None = None,
        tool_timeout: float = 10.0,
        verifier_timeout: float = 60.0,
        start_timeout: float = 60.0,
        max_steps: int | None = None,
        render_mode: str | None = None,
        sandbox: str = "bwrap",
        limits: dict[str, int] | None = None,
        state_in_database: bool | None = None,
    ):
        super().__init__(max_steps=max_steps, render_mode=render_mode)
        for module in ("fastapi", "sqlalchemy", "httpx"):
            require(module, "awm")
        host_bwrap.check(sandbox)
        if split != "train":
            raise ValueError(f"AWM has one split, 'train'; got {split!r}")
        if path is None and source != "bundled":
            raise ValueError(f"source must be 'bundled' (or pass path=<AgentWorldModel-1K folder>), got {source!r}")
        folder = Path(path) if path is not None else BUNDLED_DATA_DIR
        label = "bundled" if path is None else "files"
        self.scenarios: dict[str, Scenario] = {s.name: s for s in load_scenarios(folder, scenarios)}
        self.tasks: list[AWMTask] = [
            AWMTask(s.name, i, text, label) for s in self.scenarios.values() for i, text in enumerate(s.tasks) if s.verifiers.get(i)
        ]
        self.tool_timeout = tool_timeout
        self.verifier_timeout = verifier_timeout
        self.start_timeout = start_timeout
        self.sandbox = sandbox
        self.limits = dict(limits or {})
        self.state_in_database = path is None if state_in_database is None else bool(state_in_database)
        self._prepared: dict[str, _Prepared] = {}
        self._domains: dict[str, str] = {}
        # A sandbox for the first task's scenario (the one of a single-scenario env); a reset to
        # another scenario moves to a sandbox of that one's.
        first = self._domain(self.scenarios[self.tasks[0].scenario]) if self.tasks else ""
        self._workspace = _Workspace(_Sandbox.take(sandbox, first), host_db.SnapshotMemo())
        self._finalizer = weakref.finalize(self, self._workspace.close)
        self._answer: str | None = None
        self._armed: _Armed | None = None
        # The database of this state while a trial branch holds this env's own workspace (start_trials).
        self._lent: bytes | None = None
        self._lend_next = False

    # ------------------------------------------------------------ ToolEnv hooks
    @property
    def current_task(self) -> AWMTask:
        """The task of the running episode."""
        return self.tasks[self.task_index]

    @property
    def scenario(self) -> Scenario:
        """The scenario of the running episode."""
        return self.scenarios[self.current_task.scenario]

    @property
    def tools(self) -> list[Tool]:
        """The scenario app's tools."""
        return list(self._prepared[self.scenario.name].tools or [])

    @property
    def instructions(self) -> str:
        """The agent instructions and the scenario's description."""
        description = self.scenario.description
        return f"{INSTRUCTIONS}\n\n# Application\n{description}" if description else INSTRUCTIONS

    def _prepare(self, scenario: Scenario) -> _Prepared:
        prepared = self._prepared.get(scenario.name)
        if prepared is None:
            initial = _initial_database(scenario)
            prepared = self._prepared[scenario.name] = _Prepared(initial, hashlib.sha256(initial).hexdigest())
        return prepared

    def _domain(self, scenario: Scenario) -> str:
        domain = self._domains.get(scenario.name)
        if domain is None:
            domain = self._domains[scenario.name] = trust_domain(scenario)
        return domain

    def _start(self, index: int) -> tuple[str, dict[str, Any]]:
        task = self.tasks[index]
        scenario = self.scenarios[task.scenario]
        prepared = self._prepare(scenario)
        self._settle()
        ws = self._workspace
        if ws.sandbox.domain == self._domain(scenario):
            try:
                before = ws.read() if self.task is not None else None
            except SandboxError:
                before = None
            try:
                warm = self._load_warm(ws, scenario, prepared)
                if ws.sandbox.users == 1:  # no branch of this env uses the sandbox: nothing of the last episode stays in /tmp
                    ws.zygote.clear_tmp()
            except BaseException:
                # A failed reset leaves the previous episode's database (its app restarts on the next call).
                ws.load(before) if before is not None else ws.stop_app()
                raise
        else:
            # Another scenario's code never runs in this sandbox: the episode moves to a sandbox of
            # its scenario's own (a failed reset leaves the previous episode where it was).
            ws = _Workspace(_Sandbox.take(self.sandbox, self._domain(scenario)), self._workspace.memo)
            try:
                warm = self._load_warm(ws, scenario, prepared)
            except BaseException:
                ws.close()
                raise
            old, self._workspace = self._workspace, ws
            self._finalizer.detach()
            self._finalizer = weakref.finalize(self, ws.close)
            old.close()
        ws.fork_from(warm, self.start_timeout)
        self._answer = None
        return task.text, {"tools": [tool.openai() for tool in prepared.tools]}

    def _load_warm(self, ws: _Workspace, scenario: Scenario, prepared: _Prepared) -> AppProcess:
        """Load the warm app's database into ``ws`` (its app stopped); the warm app, to fork."""
        warm_folder, warm = ws.sandbox.warm_app(scenario, prepared, start_timeout=self.start_timeout, limits=self.limits)
        if prepared.tools is None:
            prepared.tools, prepared.routes = tools_from_openapi(warm.openapi)
        # The warm app's database: the initial one, as its code left it at load.
        ws.load(copy_out(warm_folder, _Workspace.DATABASE))
        return warm

    def _app(self, scenario: Scenario) -> AppProcess:
        ws = self._workspace
        if ws.app is None or not ws.app.alive:
            ws.app = AppProcess(
                ws.zygote,
                ws.folder.path,
                ws.database,
                scenario.env_code,
                start_timeout=self.start_timeout,
                limits=self.limits,
                openapi=self._prepared[scenario.name].tools is None,
            )
        return ws.app

    def _apply(self, response: ParsedResponse) -> StepOutcome:
        if response.calls:
            turn = self._run_calls(response, self._execute)
            self._settle()  # a call sent early that the turn did not run is undone
            return turn.outcome()
        self._settle()
        if not _final_answer(response.content):
            # The same rule as every env: an empty reply is an invalid step, not an (empty) final answer.
            error = "Empty response: call a tool, or write the final answer (a reply without tool calls ends the episode)."
            return StepOutcome(observation=error, action_valid=False, error=error)
        self._answer = _final_answer(response.content)
        scenario, ws = self.scenario, self._workspace
        ws.stop_app()  # nothing of the app may run beside its verifier
        try:
            final = ws.read()
        except SandboxError as exc:
            verdict = Verdict(False, error=f"the verifier did not run: {exc}")
        else:
            limits = {"cpu": int(self.verifier_timeout) + 5, **self.limits}
            verdict = run_verifier(
                ws.zygote,
                ws.folder,
                scenario.verifiers[self.current_task.index],
                self._prepared[scenario.name].initial,
                final,
                self._answer,
                timeout=self.verifier_timeout,
                limits=limits,
            )
        result = verdict.result if verdict.error is None else {"error": verdict.error}
        return StepOutcome(
            observation="The episode is over.",
            reward=1.0 if verdict.success else 0.0,
            terminated=True,
            success=verdict.success,
            info={"verifier_result": result},
        )

    def _execute(self, call: ToolCall) -> str:
        scenario = self.scenario
        route = self._prepared[scenario.name].routes[call.name]
        method, path, query, body = route.request(call.arguments)
        armed, self._armed = self._armed, None
        if armed is not None and armed.key != _request_key(method, path, query, body, route.has_body):
            self._armed, armed = armed, None
        self._settle()  # another call sent early is undone; a lent workspace is taken back
        self._workspace.changing()
        try:
            if armed is None:
                status, text = self._app(scenario).request(method, path, query, body, has_body=route.has_body, timeout=self.tool_timeout)
            elif armed.error is not None:
                raise armed.error
            else:
                status, text = self._workspace.app.response(self.tool_timeout)
        except SandboxTimeout:
            self._workspace.app = None
            self._check_disk(call)
            return f"Error calling {call.name}: the tool did not answer within {self.tool_timeout:g} s."
        except SandboxError as exc:
            self._workspace.stop_app()
            self._check_disk(call)
            return f"Error calling {call.name}: {exc}"
        self._check_disk(call)
        if status >= 400:
            return f"Error calling {call.name}. Status code: {status}. Response: {text}"
        return text

    def _check_disk(self, call: ToolCall) -> None:
        """:class:`BoundExceeded` when the sandbox's files add up past :data:`~.sandbox.host_folder.DISK_BYTES`
        or :data:`~.sandbox.host_folder.DISK_FILES`: the app is stopped and every file but the episode
        database removed from the episode's folder (and what the host did not make from the sandbox's);
        the database keeps the call's writes."""
        ws = self._workspace
        used, files = ws.sandbox.folder.usage()
        if used <= host_folder.DISK_BYTES and files <= host_folder.DISK_FILES:
            return
        ws.stop_app()
        ws.changing()
        keep = {_Workspace.DATABASE, f"{_Workspace.DATABASE}-wal", f"{_Workspace.DATABASE}-journal"}
        ws.folder.prune(keep)
        ws.sandbox.folder.prune(set())
        raise BoundExceeded(
            f"{call.name} left the sandbox's files at {used} bytes in {files} entries; the bound is "
            f"{host_folder.DISK_BYTES} bytes and {host_folder.DISK_FILES} entries, so the app was stopped and "
            "its files but the database removed"
        )

    def start_trials(self, actions: Sequence[str | Generation], method: str = "auto") -> list[AWMEnv] | None:
        """A branch per action, each sent its action's first tool call at once, so that its app works
        on the call while the next branch forks (on a machine of several cores, the trials' calls
        overlap). Stepped with its action, a branch takes that call's answer as its own; with
        anything else it first undoes the call (its database loaded again, its app started anew).

        The last branch forks nothing: it takes this env's own workspace (folder, database and
        running app) and this env keeps the database bytes. The guided step that follows adopts one
        of the branches, which replaces this env's workspace anyway; if this env is used otherwise
        first, it loads those bytes into a new workspace served by a fork of the scenario's warm app
        (as a reset does). None (one after another) where branches replay."""
        snapshot = self._snapshot() if method != "replay" else None
        if snapshot is None:
            return None
        branches: list[AWMEnv] = []
        try:
            for i, action in enumerate(actions):
                self._lend_next = i == len(actions) - 1 and self._answer is None
                try:
                    child = self.branch(method)
                finally:
                    self._lend_next = False
                branches.append(child)
                child._arm(action.text if isinstance(action, Generation) else action, snapshot[0])
        except BaseException:
            for child in branches:
                child.close()
            raise
        return branches

    def _arm(self, text: Any, data: bytes) -> None:
        """Send the first tool call that a step with ``text`` would make to the app, if it makes one
        (``data``: the database this branch holds now)."""
        if not isinstance(text, str) or len(text) > self.max_action_chars or self._answer is not None:
            return
        parsed = self.parse_action(text)
        calls = parsed.command.calls if parsed.error is None else []
        if not calls or len(calls) > MAX_CALLS_PER_STEP:
            return
        call = calls[0].with_id(f"call_{self.elapsed_steps}_0")
        route = (self._prepared[self.scenario.name].routes or {}).get(call.name)
        if route is None or self.call_error(call) is not None:
            return
        try:
            method, path, query, body = route.request(call.arguments)
            key = _request_key(method, path, query, body, route.has_body)
        except Exception:  # the step meets it itself
            return
        self._armed = armed = _Armed(key, data)
        self._workspace.changing()
        try:
            self._app(self.scenario).send_request(method, path, query, body, has_body=route.has_body)
        except Exception as exc:  # raised again by the step's call, where sending it would have raised it
            armed.error = exc

    def _settle(self) -> None:
        """Undo a call sent early (:meth:`_arm`) that no step took (the database it started from, no
        app), and take a workspace of this state again where this env lent its own (:meth:`start_trials`)."""
        armed, self._armed = self._armed, None
        if armed is not None:
            self._workspace.load(armed.data)
        lent, self._lent = self._lent, None
        if lent is not None:
            ws, scenario = self._workspace, self.scenario
            ws.load(lent)
            try:
                _, warm = ws.sandbox.warm_app(scenario, self._prepare(scenario), start_timeout=self.start_timeout, limits=self.limits)
            except SandboxError:
                return  # the next call starts an app
            ws.fork_from(warm, self.start_timeout)

    def _state_key(self) -> str:
        self._settle()
        h = hashlib.sha256(self.current_task.id.encode())
        try:
            h.update(self._workspace.memo.digest(self._workspace.read(reuse=True)).encode())
        except SandboxError as exc:
            h.update(f"unusable: {exc}".encode())
        h.update(b"answered" if self._answer is not None else b"open")
        return h.hexdigest()[:32]

    def _snapshot(self) -> tuple[bytes, str | None, _Workspace, AWMEnv | None] | None:
        # A copy of the database (and of the app's process, when it runs) is the whole state only
        # when the app keeps nothing in memory that a restart would not rebuild.
        if not self.state_in_database:
            return None
        self._settle()
        try:
            # Last: the env that lends the branch made of this snapshot its own workspace (start_trials).
            return self._workspace.read(reuse=True), self._answer, self._workspace, self if self._lend_next else None
        except SandboxError:
            return None

    def _fallback_snapshot(self) -> tuple[bytes, str | None, _Workspace] | None:
        # A replay diverged (an app whose state is not all in its database): a fork of the running
        # app carries its memory, so it is this state; without a running app there is no copy.
        self._settle()
        if self._workspace.app is None or not self._workspace.app.alive or self._answer is not None:
            return None
        try:
            return self._workspace.read(), self._answer, self._workspace
        except SandboxError:
            return None

    def _restore(self, snapshot: tuple) -> None:
        data, self._answer, source, *lender = snapshot
        if lender and lender[0] is not None and lender[0]._workspace is source:
            self._borrow(lender[0], data)
            return
        self._workspace.load(data)
        if source.sandbox is self._workspace.sandbox and self._answer is None:
            self._workspace.fork_from(source.app, self.tool_timeout)

    def _borrow(self, lender: AWMEnv, data: bytes) -> None:
        """Take ``lender``'s workspace (in state ``data``); ``lender`` gets this clone's empty one and keeps ``data``."""
        mine, theirs = self._workspace, lender._workspace
        self._finalizer.detach()
        lender._finalizer.detach()
        self._workspace, lender._workspace = theirs, mine
        self._finalizer = weakref.finalize(self, theirs.close)
        lender._finalizer = weakref.finalize(lender, mine.close)
        lender._lent = data

    def _adopt(self, branch: AWMEnv) -> bool:
        # The branch's workspace (its episode folder, database and running app, in the same
        # sandbox) becomes this env's; this env's own is closed, as the branch's close would have.
        branch._settle()
        ws = branch._workspace
        if ws.sandbox is not self._workspace.sandbox or ws._closed:
            return False
        branch._finalizer.detach()
        self._finalizer.detach()
        old, self._workspace = self._workspace, ws
        self._finalizer = weakref.finalize(self, ws.close)
        self._answer = branch._answer
        self._lent = None  # a lent workspace is the branch's now, or closed with it
        old.close()
        return True

    def _clone(self) -> AWMEnv:
        clone = super()._clone()
        clone._workspace = _Workspace(self._workspace.sandbox, self._workspace.memo)
        clone._armed = clone._lent = None
        clone._lend_next = False
        clone._finalizer = weakref.finalize(clone, clone._workspace.close)
        return clone

    def close(self) -> None:
        """Stop the app process and delete the episode folder."""
        self._armed = self._lent = None
        self._finalizer()
        super().close()
