"""BFCL's multi-turn function backends (GorillaFileSystem, TradingBot, ...), one set per episode.

bfcl-eval's harness keeps instances in module globals keyed by model name and entry id and calls
them through ``eval``. Here every episode (and every branch) owns its instances, built the way the
harness builds them (``Class()`` then ``_load_scenario(deepcopy(initial_config[cls]), long_context)``),
and a call reaches a backend only through the name -> public-method table of those instances.
"""

from __future__ import annotations

import ast
import contextlib
import copy
import datetime
import hashlib
import importlib
import inspect
import json
import random
import re
import time
from typing import Any, Callable, Iterator, Mapping, Sequence

from ...core import cap_text
from ...tools import ToolCall
from ...tools.bounds import MAX_RESULT_CHARS, STATE_BOUNDS, BoundExceeded, StateBounds, state_problem, value_problem
from ...tools.limits import ToolCrashed, ToolTimeout, preserved_numeric_state, run_limited
from ...tools.statecopy import copy_state
from ...tools.worker import call_with_deadline
from .data import bfcl_module

#: Identifier-like words of a call source (what :meth:`Backends.execute_source` may reach).
_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


class Backends:
    """The involved backend instances of one episode and the table of their public methods.

    A stateless backend's call (``MathAPI``) runs in a child process with a time limit of
    :attr:`call_timeout` seconds (:mod:`ttg_envs.tools.limits`); a stateful one runs here, with the
    caller's ``decimal`` context and mpmath precision restored after it, and its instance is then
    checked against :attr:`state_bounds` (:func:`~ttg_envs.tools.bounds.state_problem`): a call that
    crosses one is undone (every instance back to where the step began, see :meth:`atomic`) and
    raises :class:`~ttg_envs.tools.bounds.BoundExceeded`. Bounded state also bounds the time of the
    backends' own calls, which walk it (``find``, ``du``, ``MessageAPI``'s id draw).
    """

    #: Seconds a stateless call may run; ``None`` runs it in this process without a limit.
    call_timeout: float | None = 10.0
    #: Limits on each stateful instance after a call.
    state_bounds: StateBounds = STATE_BOUNDS
    #: Seconds the calls of one step (:meth:`atomic`) may take together: a call that would start
    #: later is not run and the step is undone. One call's own time is bounded by the state bounds
    #: (stateful) or :attr:`call_timeout` (stateless).
    step_seconds: float = 10.0
    #: Seconds one stateful call may run, in this process's call worker (:mod:`ttg_envs.tools.worker`:
    #: the instances it needs go there and come back, about 0.2-0.5 ms a call); a late call's worker
    #: is killed and the step undone, a bound naming the limit. ``None`` (the default): the call
    #: runs here, bounded by the state bounds and :attr:`step_seconds` only.
    stateful_timeout: float | None = None

    def __init__(self, involved_classes: Sequence[str], initial_config: Mapping[str, Any], *, long_context: bool):
        config = bfcl_module("bfcl_eval.constants.executable_backend_config")
        self.stateless = set(config.STATELESS_CLASSES)
        self.instances: dict[str, Any] = {}
        self.owner: dict[str, str] = {}
        self._saved: dict[str, dict[str, Any]] | None = None
        self._step_start: float | None = None
        #: Instances shared with a :meth:`fork` (or the backends it came from): never changed in
        #: place; copied here before this side's first call into them.
        self._borrowed: set[str] = set()
        for class_name in involved_classes:
            cls = getattr(importlib.import_module(config.CLASS_FILE_PATH_MAPPING[class_name]), class_name)
            instance = cls()
            if class_name not in config.STATELESS_CLASSES:
                instance._load_scenario(copy.deepcopy(initial_config.get(class_name, {})), long_context=long_context)
            self.instances[class_name] = instance
            # Later classes win a name clash, as in bfcl-eval's method mapping.
            for name, _ in inspect.getmembers(instance, predicate=inspect.ismethod):
                if not name.startswith("_"):
                    self.owner[name] = class_name

    def execute(self, call: ToolCall) -> str:
        """Run one call and return its result as bfcl-eval's harness writes it (errors included)."""
        class_name = self.owner.get(call.name)
        if class_name is None:
            return f"Error during execution: no backend function named {call.name!r}"
        self._check_step_time()
        method = getattr(self.instances[class_name], call.name)
        if class_name in self.stateless and self.call_timeout is not None:
            try:
                status, value = run_limited(lambda: self._run(method, call.arguments), self.call_timeout)
            except (ToolTimeout, ToolCrashed) as exc:
                return f"Error during execution: {exc}"
            return value if status == "ok" else f"Error during execution: {value[1]}"
        problem = value_problem(call.arguments)
        if problem:
            raise BoundExceeded(f"the call was not run: {problem}")
        # The method of the instance as it is when the call runs (this side's own copy by then).
        return self._stateful(
            [class_name],
            lambda: self._run(getattr(self.instances[class_name], call.name), call.arguments),
            ("method", class_name, call.name, call.arguments),
        )

    def execute_source(self, source: str) -> str:
        """Run one harness call string (official scoring, :func:`.harness.execute_call_source`) under the
        same rules as :meth:`execute`: a call that touches only stateless backends runs in a child with
        the time limit, anything else here with the caller's numeric state restored."""
        from .harness import _INSTANCE_PREFIX, execute_call_source, private_name, refusal

        self._check_step_time()
        private = private_name(source)
        if private is not None:  # it would reach past the method table: the undo copy and the state bounds
            self._undo(self._saved)
            raise BoundExceeded(refusal(private))
        run = lambda: execute_call_source(source, self.instances, self.owner)  # noqa: E731
        names = _called_names(source)
        if names and self.call_timeout is not None and all(self.owner.get(n) in self.stateless for n in names):
            try:
                status, value = run_limited(run, self.call_timeout)
            except (ToolTimeout, ToolCrashed) as exc:
                return f"Error during execution: {exc}"
            return value if status == "ok" else f"Error during execution: {value[1]}"
        classes = sorted({self.owner[n] for n in names if self.owner.get(n) not in (None, *self.stateless)})
        if self._borrowed:
            # Whatever else the source could reach (a method named anywhere in it, passed on
            # uncalled, or an instance named outright) is this side's own before it runs.
            words = set(_WORD.findall(source))
            reached = {self.owner[w] for w in words if w in self.owner} | {
                c for c in self.instances if c in words or _INSTANCE_PREFIX + c in words
            }
            self._own(sorted((reached & self._borrowed) - set(classes)))
        return self._stateful(classes, run, ("source", source))

    @contextlib.contextmanager
    def atomic(self) -> Iterator[None]:
        """Make the calls inside the block one step: when one crosses a bound, every instance is put
        back to its state before the block (not only before that call)."""
        self._saved, self._step_start = {}, time.monotonic()
        try:
            yield
        finally:
            self._saved = self._step_start = None

    def _check_step_time(self) -> None:
        if self._step_start is not None and time.monotonic() - self._step_start > self.step_seconds:
            self._undo(self._saved)
            raise BoundExceeded(f"the step's calls took more than {self.step_seconds:g} s (the bound on a step's time); it was undone")

    def _undo(self, saved: Mapping[str, dict[str, Any]] | None) -> None:
        for name, attributes in (saved or {}).items():
            live = vars(self.instances[name])
            live.clear()
            live.update(copy_state(attributes))

    def _stateful(self, classes: Sequence[str], run: Callable[[], str], op: tuple) -> str:
        saved = self._saved if self._saved is not None else {}
        for name in classes:
            if name not in saved:
                shared = self._own([name])
                # A shared instance never changes: its attributes are the state to undo to.
                saved[name] = vars(shared[name]) if name in shared else copy_state(vars(self.instances[name]))
        if self.stateful_timeout is not None and classes:
            result = self._in_worker(classes, op, saved)
        else:
            with preserved_numeric_state():
                result = run()
        for name in classes:
            problem = state_problem(self.instances[name], self.state_bounds, where=f"{name}'s state")
            if problem:
                self._undo(saved)
                raise BoundExceeded(f"the step was undone: {problem}")
        return cap_text(result, MAX_RESULT_CHARS)

    def _in_worker(self, classes: Sequence[str], op: tuple, saved: Mapping[str, dict[str, Any]]) -> str:
        """Run ``op`` on copies of the instances in the call worker, within :attr:`stateful_timeout`;
        the stateful ``classes`` take the state the call left (the others are stateless)."""
        names = set(classes) if op[0] == "method" else set(classes) | {self.owner[n] for n in _called_names(op[1]) if n in self.owner}
        try:
            instances, result = call_with_deadline(_run_op, ({n: self.instances[n] for n in names}, self.owner, op), self.stateful_timeout)
        except (ToolTimeout, ToolCrashed) as exc:
            self._undo(saved)
            raise BoundExceeded(
                f"the step was undone: a call ran past {self.stateful_timeout:g} s (the bound on a call's time; {exc})"
            ) from None
        for name in classes:
            self.instances[name] = instances[name]
        return result

    @staticmethod
    def _run(method: Any, arguments: dict[str, Any]) -> str:
        try:
            result = method(**arguments)
        except Exception as exc:  # the harness reports any backend exception as the call's result
            return f"Error during execution: {exc}"
        if isinstance(result, str):
            return result
        if isinstance(result, dict):
            try:
                return json.dumps(result)
            except (TypeError, ValueError, RecursionError):
                return str(result)
        return str(result)

    def copy(self) -> Backends:
        """An independent deep copy (instances and method table), made without recursion."""
        return copy_state(self)

    def fork(self) -> Backends:
        """An independent copy that shares every stateful instance with this one until either side
        calls into it (each side copies an instance before its first call: copy on write), so a
        branch costs the instances its steps touch, not all of them."""
        clone = copy.copy(self)
        clone.instances = dict(self.instances)
        clone._saved = clone._step_start = None
        shared = set(self.instances) - self.stateless
        self._borrowed = self._borrowed | shared
        clone._borrowed = set(shared)
        return clone

    def _own(self, names: Sequence[str]) -> dict[str, Any]:
        """Copy the shared ones of ``names`` for this side; the shared objects they replaced, by name."""
        replaced = {}
        for name in names:
            if name in self._borrowed:
                replaced[name] = self.instances[name]
                self.instances[name] = copy_state(replaced[name])
                self._borrowed.discard(name)
        return replaced

    def state_digest(self) -> str:
        """A hash of every instance's attributes, wall-clock timestamps left out (they differ between
        branches that took the same actions), RNG states included. Iterative, so state nested
        however deep (a tweet holding a 600-deep list) hashes instead of raising, and linear in the
        number of objects (a part shared by two folders is hashed once, then referenced)."""
        h = hashlib.sha256()
        for class_name in sorted(self.instances):
            h.update(class_name.encode())
            _feed(h, self.instances[class_name])
        return h.hexdigest()


def _run_op(instances: dict[str, Any], owner: Mapping[str, str], op: tuple) -> tuple[dict[str, Any], str]:
    """The call worker's side of :meth:`Backends._in_worker`: the instances after ``op``, and its result."""
    if op[0] == "method":
        _, class_name, name, arguments = op
        result = Backends._run(getattr(instances[class_name], name), arguments)
    else:
        from .harness import execute_call_source

        result = execute_call_source(op[1], instances, {n: c for n, c in owner.items() if c in instances})
    return instances, result


def _called_names(source: str) -> list[str]:
    """Names of every function the call string calls (empty when it does not parse)."""
    try:
        tree = ast.parse(source, mode="eval")
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return []
    names = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            func = node.func
            names.append(func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", ""))
    return names


_LEAVE = object()


def _feed(h: Any, root: Any) -> None:
    """Hash ``root``'s canonical content (timestamps dropped) without recursion, in time linear in
    the number of objects: a mutable container or object met again (shared by two folders, or a
    cycle) is written as a reference to its first visit, as pickle's memo does, so folders copied
    into themselves cost one visit per object, not one per path to it."""
    stack: list[Any] = [root]
    seen: dict[int, int] = {}
    while stack:
        value = stack.pop()
        if value is _LEAVE:
            h.update(b")")
            continue
        if value is None or isinstance(value, (bool, float)):
            h.update(f"{type(value).__name__}:{value!r};".encode())
        elif isinstance(value, int):
            h.update(f"int:{value:x};".encode())
        elif isinstance(value, str):
            h.update(f"str:{len(value)}:".encode() + value.encode("utf-8", "surrogatepass"))
        elif isinstance(value, (datetime.datetime, datetime.date, datetime.time)):
            h.update(b"time;")
        elif isinstance(value, random.Random):
            h.update(repr(value.getstate()).encode())
        elif not isinstance(value, (tuple, frozenset)) and id(value) in seen:
            h.update(f"<ref {seen[id(value)]}>".encode())
        else:
            if isinstance(value, Mapping):
                items = sorted(((str(k), v) for k, v in value.items()), key=lambda kv: kv[0])
            elif isinstance(value, (list, tuple)):
                items = list(enumerate(value))
            elif isinstance(value, (set, frozenset)):
                items = sorted(((repr(v), v) for v in value), key=lambda kv: kv[0])
            elif hasattr(value, "__dict__"):
                items = [("__class__", type(value).__name__), *sorted(vars(value).items(), key=lambda kv: str(kv[0]))]
            else:
                h.update(f"{type(value).__name__}:{value!r};".encode("utf-8", "surrogatepass"))
                continue
            if not isinstance(value, (tuple, frozenset)):  # immutable: equal content, whatever its identity
                seen[id(value)] = len(seen)
            h.update(f"{type(value).__name__}(".encode())
            stack.append(_LEAVE)
            for key, item in reversed(items):
                stack += [item, str(key)]
