"""ALFWorld's real engine: textworld's ``PddlEnv`` wrapped by alfworld's ``AlfredDemangler`` and
``AlfredInfos``, with an in-process snapshot so that branches cost the same at any step.

The snapshot uses fast-downward's ``get_state_id``/``set_state_id`` (exported by the engine's
``libdownward`` but not wrapped by textworld) plus a copy of textworld's Python-side fact sets.
Several envs (an episode and its branches) share one engine; whichever env steps next first
restores its own snapshot, so each sees only its own history. A reset restores the snapshot of
the initial state taken at load, so only a new game pays for textworld's PDDL translation.
"""

from __future__ import annotations

import ctypes
import hashlib
import json
import threading
import weakref
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from ..._optional import require


@dataclass(frozen=True)
class EngineSnapshot:
    """One engine state: fast-downward's state id plus textworld's Python-side state."""

    generation: int
    state_id: int
    facts: tuple[tuple[Any, frozenset], ...]
    var_counts: tuple[tuple[Any, int], ...]
    vars_by_name: tuple[tuple[str, Any], ...]
    vars_by_type: tuple[tuple[str, frozenset], ...]
    game_state: Any
    moves: int
    last_action: Any
    operators: Mapping[int, Any]


class _Core:
    """A ``PddlEnv`` + ``AlfredDemangler`` + ``AlfredInfos`` stack, its private libdownward copy,
    and what belongs to the game loaded in it."""

    def __init__(self) -> None:
        textworld = require("textworld", "alfworld")
        require("fast_downward", "alfworld")
        pddl_mod = require("textworld.envs.pddl.pddl", "alfworld")
        wrappers = require("alfworld.agents.environment.alfred_tw_env", "alfworld")
        self.pddl = pddl_mod.PddlEnv(textworld.EnvInfos(admissible_commands=True, won=True))
        self.env = wrappers.AlfredInfos(wrappers.AlfredDemangler(self.pddl, shuffle=False))
        self.lib = self.pddl.downward_lib
        self.lib.get_state_id.argtypes = []
        self.lib.get_state_id.restype = ctypes.c_int
        self.lib.set_state_id.argtypes = [ctypes.c_int]
        self.lib.set_state_id.restype = None
        self.game_id: str | None = None
        #: Bumped on every load: fast-downward state ids are only valid within one loaded game.
        self.generation = 0
        #: The game's initial state; a reset restores it instead of re-translating the PDDL.
        self.initial: EngineSnapshot | None = None
        #: str() of each fact seen in the loaded game, cached: state_key runs on every step.
        self.fact_names: dict[Any, str] = {}
        #: Planner plans by state key. The planner is a uniform-cost search that can take seconds;
        #: the engine is deterministic, so a plan and all its suffixes stay valid for their states.
        self.plans: dict[str, tuple[str, ...]] = {}


# Cores of engines that were garbage-collected, for reuse by the next engine. Each core holds a
# dlopen'ed copy of libdownward; dlclose'ing one and loading another crashes the process, so they
# are recycled instead (a process keeps as many cores as it ever had engines alive at once).
_IDLE_CORES: list[_Core] = []


class AlfredEngine:
    """One loaded ALFWorld game on an engine core, shared by an episode, its resets and its branches."""

    def __init__(self) -> None:
        try:
            core = _IDLE_CORES.pop()
        except IndexError:
            core = _Core()
        weakref.finalize(self, _IDLE_CORES.append, core)
        self._core = core
        self._pddl = core.pddl
        self._env = core.env
        self._lib = core.lib
        self.lock = threading.RLock()
        #: True once a branch shares this engine: loading another game would invalidate its states.
        self.shared = False
        self._owner: weakref.ref | None = None
        self.state: Any = None

    # -------------------------------------------------------------- episode
    @property
    def game_id(self) -> str | None:
        """Id of the loaded game (a recycled core may still hold its previous game)."""
        return self._core.game_id

    @property
    def generation(self) -> int:
        """Load counter of the core; snapshots are only valid within one generation."""
        return self._core.generation

    def load(self, game: Mapping[str, Any] | str, game_id: str, plan: Sequence[str] | None = None) -> None:
        """Load a game (a ``.tw-pddl`` path or its JSON dict) and record its initial state.

        ``plan``: the planner's plan from the initial state, if already known.
        """
        if isinstance(game, str):
            with open(game, encoding="utf-8") as f:
                game = json.load(f)
        core = self._core
        self._env.load(dict(game))
        self.state = self._env.reset()
        core.game_id = game_id
        core.generation += 1
        core.fact_names = {}
        core.plans = {}
        core.initial = self.save()
        if plan is not None:
            core.plans[self.state_key()] = tuple(plan)
        self._owner = None

    def reset(self, owner: Any) -> Any:
        """Back to the initial state; ``owner`` becomes the env whose state the engine holds."""
        self._hand_over(owner, self._core.initial)
        return self.state

    def step(self, command: str) -> Any:
        """Apply an admissible command; returns textworld's ``GameState``."""
        plan = self._core.plans.get(self.state_key()) if self._core.plans else None
        self.state, _, _ = self._env.step(command)
        if plan and plan[0] == command:
            self._core.plans.setdefault(self.state_key(), plan[1:])
        return self.state

    def plan(self) -> list[str]:
        """The planner's command sequence from the current state to the goal ([] if none)."""
        key = self.state_key()
        if key not in self._core.plans:
            self._core.plans[key] = tuple(self._pddl._pddl_state.replan(self._pddl._entity_infos))
        return list(self._core.plans[key])

    @property
    def won(self) -> bool:
        """Whether the goal holds in the current state."""
        return bool(self.state["won"])

    @property
    def admissible_commands(self) -> list[str]:
        """The commands the engine accepts now, sorted."""
        return list(self.state["admissible_commands"])

    def state_key(self) -> str:
        """sha256 (16 hex chars) of the sorted current facts."""
        names = self._core.fact_names
        facts = []
        for fs in self._pddl._pddl_state._facts.values():
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
        """Snapshot the current state (about a millisecond: a copy of the fact sets)."""
        pstate = self._pddl._pddl_state
        return EngineSnapshot(
            generation=self.generation,
            state_id=self._lib.get_state_id(),
            facts=tuple((sig, frozenset(fs)) for sig, fs in pstate._facts.items()),
            var_counts=tuple(pstate._var_counts.items()),
            vars_by_name=tuple(pstate._vars_by_name.items()),
            vars_by_type=tuple((t, frozenset(vs)) for t, vs in pstate._vars_by_type.items()),
            game_state=self._pddl.state,
            moves=self._pddl._moves,
            last_action=self._pddl._last_action,
            operators=dict(pstate._operators),
        )

    def restore(self, snap: EngineSnapshot) -> None:
        """Put the engine back into ``snap`` (same loaded game and generation only)."""
        if snap.generation != self.generation:
            raise RuntimeError("engine snapshot is from another game load of this engine")
        pstate = self._pddl._pddl_state
        self._lib.set_state_id(snap.state_id)
        pstate._facts.clear()
        for sig, fs in snap.facts:
            pstate._facts[sig] = set(fs)
        pstate._var_counts.clear()
        pstate._var_counts.update(dict(snap.var_counts))
        pstate._vars_by_name = dict(snap.vars_by_name)
        pstate._vars_by_type.clear()
        for t, vs in snap.vars_by_type:
            pstate._vars_by_type[t] = set(vs)
        pstate._operators = dict(snap.operators)
        self._pddl.state = snap.game_state
        self._pddl._moves = snap.moves
        self._pddl._last_action = snap.last_action
        self.state = snap.game_state
