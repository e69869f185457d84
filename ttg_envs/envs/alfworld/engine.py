"""ALFWorld's real engine: textworld's ``PddlEnv`` wrapped by alfworld's ``AlfredDemangler`` and
``AlfredInfos``, made fast around the engine and shared by an episode, its resets and branches.

:class:`AlfredEngine` translates each game once (:mod:`.translation`), derives text without
re-parsing (:mod:`.textgen`), caches successors by state, bounds the planner (:mod:`.planner`),
repairs plans before it searches, and has a fast expert (:mod:`.expert`) that never searches; its
docstring says how. ``AlfredEngine(cached=False, fast_text=False)`` is textworld's own path: the
reference the equality tests compare against.
"""

from __future__ import annotations

import ctypes
import hashlib
import re
import threading
import weakref
from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..._optional import require
from . import translation as _translation


@dataclass(frozen=True)
class EngineSnapshot:
    """One engine state within one game load: the engine's state number and the last feedback."""

    generation: int
    state: int
    feedback: str


class PlannerTimeout(RuntimeError):
    """The planner did not finish within the engine's ``planner_timeout``."""


def _cached_pddl_env_class():
    textworld = require("textworld", "alfworld")
    pddl_mod = require("textworld.envs.pddl.pddl", "alfworld")
    pddl_logic = require("textworld.envs.pddl.logic", "alfworld")
    fast_downward = require("fast_downward", "alfworld")
    Placeholder = textworld.logic.Placeholder
    from .textgen import FastDeriver

    def atom_fact(atom, name2type):
        if isinstance(atom, fast_downward.translate.pddl.conditions.Atom):
            if atom.predicate == "=":
                return None
            return textworld.logic.Proposition(atom.predicate, [textworld.logic.Variable(a, name2type[a]) for a in atom.args])
        if isinstance(atom, fast_downward.translate.pddl.f_expression.Assign):
            name = f"{atom.expression.value}"
            if atom.fluent.symbol == "total-cost" or name.isdigit():  # costs and distances are not facts
                return None
            return textworld.logic.Proposition(name, [textworld.logic.Variable(a, name2type[a]) for a in atom.fluent.args])
        return None

    class CachedPddlState(pddl_logic.PddlState):
        """textworld's ``PddlState`` built from a cached translation (same facts, same SAS task)."""

        def __init__(self, downward_lib, pddl_problem: str, logic, cached) -> None:
            self._facts = defaultdict(set)
            self._vars_by_name = {}
            self._vars_by_type = defaultdict(set)
            self._var_counts = Counter()
            self._logic = logic
            self.downward_lib = downward_lib
            self.pddl_problem = pddl_problem
            self.task, self.sas = cached.task, cached.sas
            self.sas_replan = None  # loaded by the engine when a plan is first asked for
            self._actions = {a.name: a for a in self.task.actions}
            for type_ in self.task.types:
                try:
                    logic.types.add(textworld.logic.Type(type_.name, type_.supertype_names))
                except ValueError:
                    pass
            downward_lib.load_sas(self.sas.encode("utf-8"))
            self.name2type = {o.name: o.type_name for o in self.task.objects}
            self.add_facts([f for f in (atom_fact(a, self.name2type) for a in self.task.init) if f is not None])
            atoms = (pddl_logic.Atom * downward_lib.get_state_size())()
            downward_lib.get_state(atoms)
            self.add_facts([f for f in (a.get_fact(self.name2type) for a in atoms) if not f.is_negation])
            #: Operator name (bytes) -> (action name, mapping, command template, feedback rule).
            self._operator_actions: dict[bytes, tuple] = {}

        def all_applicable_actions(self):
            """textworld's ``PddlState.all_applicable_actions`` (same actions, same order), each
            operator's name parsed and its mapping built once per game."""
            operators = (fast_downward.Operator * self.downward_lib.get_applicable_operators_count())()
            self.downward_lib.get_applicable_operators(operators)
            self._operators = {op.id: op for op in operators}
            actions = []
            seen = set()
            for operator in operators:
                key = operator._name
                if key in seen:
                    continue
                seen.add(key)
                parsed = self._operator_actions.get(key)
                if parsed is None:
                    name, *arguments = key.decode("cp1252").split()
                    parameters = self._actions[name].parameters
                    mapping = {
                        Placeholder(p.name.strip("?"), p.type_name): textworld.logic.Variable(arg, p.type_name)
                        for p, arg in zip(parameters, arguments)
                    }
                    logic_action = self._logic.actions[name]
                    parsed = self._operator_actions[key] = (name, mapping, logic_action.template, logic_action.feedback_rule)
                name, mapping, template, feedback_rule = parsed
                action = textworld.logic.Action(name=name, preconditions=[], postconditions=[])
                action.id = operator.id
                action.mapping = dict(mapping)
                action.command_template = template
                action.feedback_rule = feedback_rule
                actions.append(action)
            return actions

    class CachedPddlEnv(pddl_mod.PddlEnv):
        """``PddlEnv`` that loads from the translation cache and derives text with ``FastDeriver``.

        ``fast_text=False`` keeps textworld's own ``step`` and ``_gather_infos`` (the reference).
        """

        def __init__(self, infos=None, fast_text: bool = True) -> None:
            super().__init__(infos)
            self.fast_text = fast_text
            self.translation = None
            self._fresh = False

        def load(self, data: Mapping[str, Any]) -> None:
            """Load a game dict (``PddlEnv.load`` without translating a game seen before)."""
            self._game_file = None
            self._game_data = data
            self.walkthrough = data.get("walkthrough", None)
            self.translation = _translation.translation_for(data)
            self._logic = self.translation.new_logic()
            self._pddl_state = CachedPddlState(self.downward_lib, data["pddl_problem"], self._logic, self.translation)
            self._entity_infos = self._get_entity_infos()
            self._deriver = FastDeriver(self._logic.grammar)
            #: (command template, action mapping) -> (derived template, what it read of the state:
            #: FastDeriver.derive_with_reads), for templates that read facts only.
            self._commands = {}
            self._command_templates = sorted({a.template for a in self._logic.actions.values()})
            self._fresh = True

        def reset(self):
            """The initial state; only valid right after ``load`` (the engine restores snapshots)."""
            if not self._fresh:
                raise RuntimeError("CachedPddlEnv resets only right after load; restore the engine's initial snapshot")
            self._fresh = False
            self.prev_state = None
            self.state = textworld.core.GameState()
            self._last_action = None
            self._moves = 0
            context = {
                "state": self._pddl_state,
                "facts": list(self._pddl_state.facts),
                "variables": {},
                "mapping": {},
                "entity_infos": self._entity_infos,
            }
            self.state.feedback = self._derive("#intro#", context)
            self.state.raw = self.state.feedback
            self._gather_infos()
            return self.state

        def load_replan_task(self) -> None:
            """Load the planner's SAS task (translated on first use, then cached on disk)."""
            if self._pddl_state.sas_replan is None:
                sas = _translation.replan_sas(self.translation, self._game_data)
                self.downward_lib.load_sas_replan(sas.encode("utf-8"))
                self._pddl_state.sas_replan = sas

        def _derive(self, start: str, context) -> str:
            if self.fast_text:
                return self._deriver.derive(start, context)
            return self._logic.grammar.derive(start, context)

        def step(self, command: str):
            """textworld's ``PddlEnv.step``, with the feedback from ``FastDeriver``."""
            if not self.fast_text:
                return super().step(command)
            command = command.strip()
            self.prev_state = self.state
            self.state = textworld.core.GameState()
            self.state.last_command = command
            self._last_action = None
            try:
                idx = self.prev_state["_valid_commands"].index(command)
            except ValueError:
                self.state.feedback = "Nothing happens."  # what PddlEnv answers to a command it does not know
            else:
                action = self._last_action = self.prev_state["_valid_actions"][idx]
                self._pddl_state.apply(action)
                context = {
                    "state": self._pddl_state,
                    "facts": list(self._pddl_state.facts),
                    "variables": {ph.name: self._entity_infos[v.name] for ph, v in action.mapping.items()},
                    "mapping": action.mapping,
                    "entity_infos": self._entity_infos,
                }
                self.state.feedback = self._deriver.derive(action.feedback_rule, context)
                self._moves += 1
            self.state.raw = self.state.feedback
            self._gather_infos()
            self.state["score"] = 1 if self.state["won"] else 0
            self.state["done"] = self.state["won"] or self.state["lost"]
            return self.state, self.state["score"], self.state["done"]

        def _gather_infos(self):
            if not self.fast_text:
                return super()._gather_infos()
            pstate, infos = self._pddl_state, self._entity_infos
            state = self.state
            state["command_templates"] = list(self._command_templates)
            state["won"] = pstate.check_goal()
            state["lost"] = False
            state["_entity_infos"] = dict(infos)
            facts = state["_facts"] = list(pstate.facts)
            state["last_action"] = None
            state["_last_action"] = self._last_action
            actions = state["_valid_actions"] = list(pstate.all_applicable_actions())
            names = {k: info.name for k, info in infos.items()}
            commands = state["_valid_commands"] = []
            deriver, memo, current = self._deriver, self._commands, {}
            for action in actions:
                key = (action.command_template, tuple(action.mapping.items()))
                found = memo.get(key)
                if found is not None:
                    text, reads = found
                    for signature, read in reads:
                        now = current.get(signature)
                        if now is None:
                            now = current[signature] = deriver.facts_of(pstate, signature)
                        if read is not now and read != now:
                            found = None
                            break
                if found is None:
                    context = {
                        "state": pstate,
                        "facts": facts,
                        "variables": {ph.name: infos[v.name] for ph, v in action.mapping.items()},
                        "mapping": action.mapping,
                        "entity_infos": infos,
                    }
                    text, reads = deriver.derive_with_reads(action.command_template, context)
                    if reads is not None:
                        memo[key] = (text, reads)
                action.command_template = text
                commands.append(action.format_command(names))
            state["admissible_commands"] = sorted(set(commands))
            if self.request_infos.moves:
                state["moves"] = self._moves
            if self.request_infos.policy_commands:
                state["policy_commands"] = pstate.replan(infos)

    return CachedPddlEnv


_CLASSES: dict[str, Any] = {}


def cached_pddl_env(infos=None, fast_text: bool = True):
    """A new :class:`CachedPddlEnv` (the class is built on first use: textworld imports lazily)."""
    if "env" not in _CLASSES:
        _CLASSES["env"] = _cached_pddl_env_class()
    return _CLASSES["env"](infos, fast_text=fast_text)


#: How many earlier plans :meth:`AlfredEngine.repair` checks before the planner searches.
REPAIR_TRIES = 3

#: Predicates of alfworld's domain (``alfred.pddl``) that only keep a record: ``look``, ``inventory``,
#: ``examine``, ``help`` and ``open`` set ``checked``; nothing sets ``examined``. No action's
#: precondition and no goal reads either, so two states that differ only in them have the same plans.
BOOKKEEPING_FACTS = frozenset({"checked", "examined"})

_UNDO = (
    (re.compile(r"take (.+) from (.+)"), "move {0} to {1}"),
    (re.compile(r"move (.+) to (.+)"), "take {0} from {1}"),
    (re.compile(r"open (.+)"), "close {0}"),
    (re.compile(r"close (.+)"), "open {0}"),
    (re.compile(r"use (.+)"), "use {0}"),
)


def undo_command(commands: Sequence[str]) -> str | None:
    """The ALFWorld command that undoes the last of ``commands`` (None when there is none):
    ``take``/``move`` and ``open``/``close`` swap, ``use`` (a lamp) toggles back, and ``go to``
    returns to the location of the ``go to`` before it."""
    last = commands[-1]
    if last.startswith("go to "):
        return next((c for c in reversed(commands[:-1]) if c.startswith("go to ")), None)
    for pattern, inverse in _UNDO:
        match = pattern.fullmatch(last)
        if match:
            return inverse.format(*match.groups())
    return None


def _taken_from(held: str | None, came_through: Sequence[tuple[int, str | None]] | None, names: Mapping[str, str]) -> str | None:
    """The PDDL name of the receptacle the held object was last taken from (None if unknown)."""
    if held is None or not came_through:
        return None
    prefix = f"take {names[held]} from "
    for _, command in reversed(came_through):
        if command and command.startswith(prefix):
            wanted = command[len(prefix) :]
            return next((k for k, v in names.items() if v == wanted), None)
    return None


def _shared(items, before: tuple) -> tuple:
    """``((key, frozenset(values)), ...)`` of ``items`` in their order, with the pairs of ``before``
    (the same shape) reused where a key's values are unchanged."""
    previous = {pair[0]: pair for pair in before}
    out = []
    for key, values in items:
        pair = previous.get(key)
        if pair is None or pair[1] != values:
            pair = (key, frozenset(values))
        out.append(pair)
    return tuple(out)


class _StateInfo:
    """What the engine keeps of one visited state: the fact sets textworld needs to step or plan
    from it, its GameState (valid commands and actions) and the operators the actions refer to."""

    __slots__ = (
        "admissible",
        "facts",
        "game_state",
        "identity",
        "key",
        "task_key",
        "operators",
        "sid",
        "var_counts",
        "vars_by_name",
        "vars_by_type",
        "won",
    )

    def __init__(self, pddl, sid: int, like: _StateInfo | None = None) -> None:
        """``like``: the state stepped from; what is unchanged is shared with it (the same
        values in fewer objects: an engine keeps every state it meets, and the garbage collector
        walks them all)."""
        pstate = pddl._pddl_state
        self.sid = sid
        self.facts = _shared(pstate._facts.items(), like.facts if like is not None else ())
        #: What makes two records the same engine state.
        self.identity = (sid, frozenset(f for _, fs in self.facts for f in fs))
        self.var_counts = dict(pstate._var_counts)
        self.vars_by_name = dict(pstate._vars_by_name)
        if like is not None:
            if self.var_counts == like.var_counts:
                self.var_counts = like.var_counts
            if self.vars_by_name == like.vars_by_name:
                self.vars_by_name = like.vars_by_name
        self.vars_by_type = _shared(pstate._vars_by_type.items(), like.vars_by_type if like is not None else ())
        self.operators = pstate._operators
        self.game_state = pddl.state
        self.admissible = tuple(pddl.state["admissible_commands"])
        self.won = bool(pddl.state["won"])
        self.key: str | None = None
        self.task_key: str | None = None


class _Core:
    """A ``CachedPddlEnv`` + ``AlfredDemangler`` + ``AlfredInfos`` stack, its private libdownward
    copy, and the caches of the game loaded in it."""

    def __init__(self, fast_text: bool = True) -> None:
        textworld = require("textworld", "alfworld")
        wrappers = require("alfworld.agents.environment.alfred_tw_env", "alfworld")
        self.fast_text = fast_text
        self.pddl = cached_pddl_env(textworld.EnvInfos(admissible_commands=True, won=True), fast_text=fast_text)
        self.env = wrappers.AlfredInfos(wrappers.AlfredDemangler(self.pddl, shuffle=False))
        self.lib = self.pddl.downward_lib
        self.lib.get_state_id.argtypes = []
        self.lib.get_state_id.restype = ctypes.c_int
        self.lib.set_state_id.argtypes = [ctypes.c_int]
        self.lib.set_state_id.restype = None
        self.game_id: str | None = None
        #: Bumped on every load: fast-downward state ids are only valid within one loaded game.
        self.generation = 0
        self.initial: EngineSnapshot | None = None
        #: Visited states of the loaded game, numbered in the order they were met.
        self.states: list[_StateInfo] = []
        self.numbers: dict[tuple, int] = {}
        #: (state, command) -> (successor state, feedback).
        self.successors: dict[tuple[int, str], tuple[int, str]] = {}
        #: The state textworld's Python-side state currently describes.
        self.materialized: int | None = None
        #: str() of each fact seen in the loaded game: state keys sort fact names.
        self.fact_names: dict[Any, str] = {}
        #: Plans by state (None: the planner timed out there), from the planner or repaired
        #: (see AlfredEngine.plan). The engine is deterministic, so a plan and all its suffixes
        #: stay valid for their states.
        self.plans: dict[int, tuple[str, ...] | None] = {}
        #: Plans by state from the fast domain expert (see AlfredEngine.fast_plan), kept apart from
        #: ``plans`` so that the exact path never reads them.
        self.fast_plans: dict[int, tuple[str, ...]] = {}
        #: The loaded game's goal, unchanging facts and display names as the domain expert reads
        #: them (on first use).
        self.goal = None
        self.world = None
        self.names: dict[str, str] = {}

    def clear_game(self) -> None:
        """Forget the loaded game's caches (its states hold textworld objects)."""
        self.game_id = None
        self.initial = None
        self.states, self.numbers, self.successors, self.plans, self.fact_names = [], {}, {}, {}, {}
        self.fast_plans, self.goal, self.world, self.names = {}, None, None, {}
        self.materialized = None

    def number(self, info: _StateInfo) -> int:
        """The number of the state ``info`` describes (a new one for a state not met before)."""
        n = self.numbers.get(info.identity)
        if n is None:
            n = self.numbers[info.identity] = len(self.states)
            self.states.append(info)
        return n


# Cores of engines that were closed or garbage-collected, for reuse by the next engine. Each core
# holds a dlopen'ed copy of libdownward; dlclose'ing one and loading another crashes the process,
# so they are recycled instead. At most MAX_IDLE_CORES wait; the rest are dropped after freeing
# their game caches and fast-downward's tasks (the library copy stays mapped: dlclose is unsafe).
# fast_downward.load_lib deletes its temp copy right after dlopen, so nothing piles up on disk.
_IDLE_CORES: list[_Core] = []
MAX_IDLE_CORES = 4
_POOL_LOCK = threading.Lock()


def _release(core: _Core) -> None:
    core.clear_game()
    with _POOL_LOCK:
        if len(_IDLE_CORES) < MAX_IDLE_CORES:
            _IDLE_CORES.append(core)
            return
    core.lib.cleanup()  # frees fast-downward's loaded tasks; the library itself stays mapped


def _acquire(fast_text: bool) -> _Core:
    with _POOL_LOCK:
        for i in range(len(_IDLE_CORES) - 1, -1, -1):  # the most recently released first
            if _IDLE_CORES[i].fast_text == fast_text:
                return _IDLE_CORES.pop(i)
    return _Core(fast_text)


class AlfredEngine:
    """One loaded ALFWorld game on an engine core, shared by an episode, its resets and its branches.

    - **Translate once.** :class:`CachedPddlEnv` is a ``PddlEnv`` that takes its parsed game logic and
      SAS task from :mod:`.translation` (content-keyed, on disk), loads each into fast-downward once
      per game, and resets by restoring the initial state instead of re-translating. The planner's
      translation is made the first time a plan is asked for.
    - **Text without re-parsing.** Its feedback and admissible commands come from
      :class:`~.textgen.FastDeriver` over the game's own grammar.
    - **Deterministic caches.** The engine is deterministic given the loaded game and its state:
      fast-downward's state (one registry id per distinct state and load) plus textworld's
      Python-side facts, which also keep the ``not_*`` facts of past effects (the grammar queries
      them, so they are part of the state: the same fast-downward state reached by two paths can read
      differently). Per loaded game the engine numbers each distinct (state id, facts) pair it meets
      and keeps its admissible commands, win flag and Python-side state, and, by (state, command),
      the successor and its feedback. A cached step is a dict lookup; the Python-side state is put
      back only when an uncached step or the planner needs it. Branches and resets are (state,
      feedback) pairs, so a branch costs the same at any step.
    - **Bounded planner.** :meth:`AlfredEngine.plan` runs fast-downward's ``replan`` (a C call that
      nothing can interrupt in-process) in a forked child that is killed after ``planner_timeout``
      seconds; see :mod:`.planner`.
    - **Plan repair.** ``plan(came_through=...)`` (the expert's) first checks whether the plan of a
      state the episode came through still reaches the goal, by stepping it through the engine (also
      after undoing the last one or two commands); only when none does is there a search. This is
      the exact path (``PlanLength``, planner-k).
    - **Fast expert.** :meth:`AlfredEngine.fast_plan` (the scripted policies') never searches: the
      state's known plan, else the domain expert of :mod:`.expert` over the current facts, kept in a
      cache of its own that the exact path never reads. Its answers do not depend on time or load.

    Args:
        cached: reuse the successors of (state, command) pairs seen before in the loaded game.
        fast_text: derive text with :class:`~.textgen.FastDeriver`; False runs textworld's own
            ``step``/``_gather_infos`` (both False: the reference for equality tests).
        planner_timeout: seconds the planner may search from one state (None: no limit).
    """

    def __init__(self, cached: bool = True, planner_timeout: float | None = 30.0, fast_text: bool = True) -> None:
        core = _acquire(fast_text)
        self._finalizer = weakref.finalize(self, _release, core)
        self._core = core
        self._pddl = core.pddl
        self._env = core.env
        self._lib = core.lib
        self.cached = cached
        self.planner_timeout = planner_timeout
        self.lock = threading.RLock()
        #: True once a branch shares this engine: loading another game would invalidate its states.
        self.shared = False
        self._owner: weakref.ref | None = None
        self._sid = 0
        self._feedback = ""
        #: Set by plan() when the planner timed out from the state it was asked about.
        self.last_plan_timed_out = False
        #: How often the planner timed out on this engine.
        self.planner_timeouts = 0
        #: Set by plan() when the current state's plan came from :meth:`repair`.
        self.last_plan_repaired = False
        #: How often :meth:`fast_plan` fell back to the planner (its domain plan did not reach the goal).
        self.fast_fallbacks = 0

    def close(self) -> None:
        """Give the core back to the idle pool with its game caches cleared (idempotent)."""
        self._finalizer()

    # -------------------------------------------------------------- episode
    @property
    def game_id(self) -> str | None:
        """Id of the loaded game."""
        return self._core.game_id

    @property
    def generation(self) -> int:
        """Load counter of the core; snapshots are only valid within one generation."""
        return self._core.generation

    @property
    def translation(self):
        """The loaded game's :class:`~.translation.Translation` (its ``origin`` says where it came from)."""
        return self._pddl.translation

    def load(self, game: Mapping[str, Any] | str, game_id: str, plan: Sequence[str] | None = None) -> None:
        """Load a game (a ``.tw-pddl`` path or its JSON dict) and record its initial state.

        ``plan``: the planner's plan from the initial state, if already known.
        """
        if isinstance(game, str):
            import json

            with open(game, encoding="utf-8") as f:
                game = json.load(f)
        core = self._core
        core.clear_game()
        self._env.load(dict(game))
        state = self._env.reset()
        core.game_id = game_id
        core.generation += 1
        sid = core.number(_StateInfo(self._pddl, self._lib.get_state_id()))
        core.materialized = sid
        core.initial = EngineSnapshot(core.generation, sid, state.feedback)
        self._sid, self._feedback = sid, state.feedback
        if plan is not None:
            core.plans[sid] = tuple(plan)
        self._owner = None

    def reset(self, owner: Any) -> str:
        """Back to the initial state; ``owner`` becomes the env whose state the engine holds.
        Returns the initial feedback."""
        self._hand_over(owner, self._core.initial)
        return self._feedback

    def step(self, command: str) -> str:
        """Apply an admissible command; returns the feedback."""
        core = self._core
        before = self._sid
        hit = core.successors.get((before, command)) if self.cached else None
        if hit is None:
            self._materialize()
            state, _, _ = self._env.step(command)
            sid = core.number(_StateInfo(self._pddl, self._lib.get_state_id(), like=core.states[before]))
            core.materialized = sid
            hit = (sid, state.feedback)
            if self.cached:
                core.successors[(before, command)] = hit
        self._sid, self._feedback = hit
        for plans in (core.plans, core.fast_plans):
            plan = plans.get(before)
            if plan and plan[0] == command:
                plans.setdefault(self._sid, plan[1:])
        return self._feedback

    def plan(self, came_through: Sequence[tuple[int, str | None]] | None = None) -> list[str]:
        """The planner's command sequence from the current state to the goal ([] if none).

        ``came_through``: the episode's path here, (:attr:`state_id`, command) pairs oldest first.
        Given, the plans met on it are tried before searching (:meth:`repair`), and one that still
        reaches the goal from here is used without a search.
        Raises :class:`PlannerTimeout` when the search ran past ``planner_timeout`` (the timeout
        is remembered for the state: asking again raises at once).
        """
        from .planner import run_replan

        core = self._core
        self.last_plan_timed_out = False
        self.last_plan_repaired = False
        if self._sid not in core.plans and came_through and self.repair(came_through) is not None:
            self.last_plan_repaired = True
        if self._sid not in core.plans:
            self._materialize()
            self._pddl.load_replan_task()
            pstate = self._pddl._pddl_state
            names = run_replan(self._lib, self.planner_timeout)
            core.plans[self._sid] = None if names is None else tuple(pstate.plan_to_templated_actions(names, self._pddl._entity_infos))
            if names is None:
                self.planner_timeouts += 1
        plan = core.plans[self._sid]
        if plan is None:
            self.last_plan_timed_out = True
            raise PlannerTimeout(f"the planner found no plan within {self.planner_timeout} s")
        return list(plan)

    def repair(self, came_through: Sequence[tuple[int, str | None]], max_tries: int = REPAIR_TRIES) -> tuple[str, ...] | None:
        """A plan of an earlier state that still reaches the goal from the current one, or None.

        ``came_through``: (state id, command that led there; None for the first) pairs of the
        episode so far, oldest first. Walking them back from the latest, the first ``max_tries``
        distinct plans found are checked by stepping them through the engine from here (every
        command admissible in turn, the goal reached at the end). When none passes, the same is
        tried after undoing the last one or two commands (:func:`undo_command`: ``take`` <->
        ``move``, ``open`` <-> ``close``, ``go to`` back to the location before, ``use`` again).
        A plan that passes is stored for the current state and the states it passes through.
        The result depends on the episode's path and the engine only, not on time or load.
        """
        candidates: list[tuple[str, ...]] = []
        for sid, _ in reversed(came_through):
            plan = self._core.plans.get(sid)
            if plan and plan not in candidates:
                candidates.append(plan)
                if len(candidates) == max_tries:
                    break
        commands = [c for _, c in came_through if c is not None]
        undos: list[tuple[str, ...]] = [()]
        for k in (1, 2):
            if len(commands) >= k:
                undo = tuple(undo_command(commands[: len(commands) - i]) for i in range(k))
                if all(undo) and undo not in undos:
                    undos.append(undo)
        for undo in undos:
            for plan in candidates:
                if self._plan_reaches_goal(undo + plan):
                    return undo + plan
        return None

    def fast_plan(self, came_through: Sequence[tuple[int, str | None]] | None = None) -> list[str]:
        """The scripted expert's plan from the current state, without waiting on a search.

        The state's known plan when there is one: first the exact cache that :meth:`plan` fills
        (stored walkthrough, planner, plan repair, and their suffixes), then the fast cache;
        otherwise the domain expert's (:meth:`domain_plan`: the hands freed first, the held object
        put back where it was taken from at equal cost, an undo; then the cheapest of the goal's
        few choices), kept in the fast cache (never read by :meth:`plan`) and passed on command by
        command as the episode follows it. A fast plan is not stepped through the engine up front
        (that would cost more than the rest of the call); each of its commands is checked to be
        admissible when it comes up, and the domain expert answers again from any state where the
        rest of its plan does not apply. Only when the domain expert has no admissible answer
        (not seen on any bundled game) does this fall back to :meth:`plan` (a search), counted in
        :attr:`fast_fallbacks`. The answer depends on the state and the episode's path only.
        """
        core = self._core
        info = core.states[self._sid]
        for plans in (core.plans, core.fast_plans):
            known = plans.get(self._sid)
            if known is not None and (known[0] in info.admissible if known else info.won):
                return list(known)
        plan = self.domain_plan(came_through)
        if plan and plan[0] in info.admissible:
            core.fast_plans[self._sid] = tuple(plan)
            return plan
        self.fast_fallbacks += 1
        return self.plan(came_through)

    def domain_plan(self, came_through: Sequence[tuple[int, str | None]] | None = None) -> list[str] | None:
        """The domain expert's plan from the current state's facts (:func:`~.expert.expert_plan`;
        None when it finds none), not checked and not cached. ``came_through`` only says where the
        held object was taken from."""
        from . import expert

        core = self._core
        info = core.states[self._sid]
        if core.goal is None:
            core.goal = expert.parse_goal(self._pddl._game_data["pddl_problem"])
            core.world = expert.World((f.name, tuple(v.name for v in f.arguments)) for _, fs in info.facts for f in fs)
            core.names = {k: v.name for k, v in self._pddl._entity_infos.items()}
        facts = ((f.name, tuple(v.name for v in f.arguments)) for sig, fs in info.facts if sig.name in expert.DYNAMIC for f in fs)
        world = expert.World(facts, base=core.world)
        names = core.names
        return expert.expert_plan(world, core.goal, names, origin=_taken_from(world.holding, came_through, names))

    def _plan_reaches_goal(self, plan: tuple[str, ...], store: dict | None = None) -> bool:
        """Step ``plan`` from the current state; on success store its suffixes as the plans of the
        states it passes (in ``store``, default the exact cache). The engine's state is put back
        either way."""
        core = self._core
        start = self.save()
        path = [self._sid]
        try:
            for command in plan:
                if command not in core.states[self._sid].admissible:
                    return False
                self.step(command)
                path.append(self._sid)
            if not core.states[self._sid].won:
                return False
        finally:
            self.restore(start)
        store = core.plans if store is None else store
        for i, sid in enumerate(path):
            store.setdefault(sid, plan[i:])
        return True

    @property
    def state_id(self) -> int:
        """The engine's number for the current state (valid within one load of a game)."""
        return self._sid

    @property
    def feedback(self) -> str:
        """The feedback of the last reset or step."""
        return self._feedback

    @property
    def won(self) -> bool:
        """Whether the goal holds in the current state."""
        return self._core.states[self._sid].won

    @property
    def admissible_commands(self) -> list[str]:
        """The commands the engine accepts now, sorted."""
        return list(self._core.states[self._sid].admissible)

    def state_key(self) -> str:
        """sha256 (16 hex chars) of the sorted current facts."""
        info = self._core.states[self._sid]
        if info.key is None:
            info.key = self._facts_digest(info, frozenset())
        return info.key

    def task_state_key(self) -> str:
        """sha256 (16 hex chars) of the sorted current facts without :data:`BOOKKEEPING_FACTS`: the
        facts the goal and every action's precondition read. Equal keys leave the same plans."""
        info = self._core.states[self._sid]
        if info.task_key is None:
            info.task_key = self._facts_digest(info, BOOKKEEPING_FACTS)
        return info.task_key

    def _facts_digest(self, info: Any, skip: frozenset[str] | set[str]) -> str:
        names = self._core.fact_names
        facts = []
        for sig, fs in info.facts:
            if skip and sig.name.lower() in skip:
                continue
            for f in fs:
                name = names.get(f)
                if name is None:
                    name = names[f] = str(f)
                facts.append(name)
        facts.sort()
        return hashlib.sha256("\n".join(facts).encode()).hexdigest()[:16]

    # -------------------------------------------------------------- ownership and snapshots
    def owned_by(self, env: object) -> bool:
        """True when the engine currently holds ``env``'s state."""
        return self._owner is not None and self._owner() is env

    def activate(self, env: Any) -> None:
        """Make the engine hold ``env``'s state (its ``_saved`` snapshot) unless it already does."""
        if not self.owned_by(env):
            self._hand_over(env, env._saved)

    def _hand_over(self, env: Any, snapshot: EngineSnapshot) -> None:
        previous = self._owner() if self._owner is not None else None
        if previous is not None and previous is not env:
            previous._saved = self.save()
        self.restore(snapshot)
        self._owner = weakref.ref(env)

    def save(self) -> EngineSnapshot:
        """Snapshot the current state (a state number and a feedback string: no copies)."""
        return EngineSnapshot(self.generation, self._sid, self._feedback)

    def restore(self, snap: EngineSnapshot) -> None:
        """Put the engine back into ``snap`` (same loaded game and generation only)."""
        if snap.generation != self.generation:
            raise RuntimeError("engine snapshot is from another game load of this engine")
        self._sid, self._feedback = snap.state, snap.feedback

    def _materialize(self) -> None:
        """Make fast-downward and textworld's Python-side state describe the current state id."""
        core = self._core
        if core.materialized == self._sid:
            return
        info = core.states[self._sid]
        pstate = self._pddl._pddl_state
        self._lib.set_state_id(info.sid)
        pstate._facts.clear()
        for sig, fs in info.facts:
            pstate._facts[sig] = set(fs)
        pstate._var_counts.clear()
        pstate._var_counts.update(info.var_counts)
        pstate._vars_by_name = dict(info.vars_by_name)
        pstate._vars_by_type.clear()
        for t, vs in info.vars_by_type:
            pstate._vars_by_type[t] = set(vs)
        pstate._operators = info.operators
        self._pddl.state = info.game_state
        core.materialized = self._sid
