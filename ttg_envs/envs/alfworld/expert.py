"""A fast ALFWorld domain expert over the engine's PDDL facts: a plan to the goal from any state, no search.

The engine knows every fact (where each object lies, what the agent holds, which receptacles are
open, which objects are clean, hot, cool or toggled), so the six goals need no exploration:
:func:`expert_plan` enumerates the few choices a goal leaves, simulates each on a copy of the facts
and keeps the cheapest; the result is a function of the state and the hint only (no time, no
load). alfworld's own hand-coded expert explores from observations; this one reads the state, so
it is shorter and needs no memory of the episode. It does not promise the planner's optimum: the
exact plan lengths that label step quality come from the planner
(:meth:`~ttg_envs.envs.alfworld.env.ALFWorldEnv.expert_plan`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from itertools import permutations

__all__ = ["ExpertGoal", "World", "expert_plan", "parse_goal"]

#: The domain's action costs (alfred.pddl's ``total-cost`` increases).
COSTS = {"go": 1, "open": 1, "take": 1, "move": 1, "clean": 5, "heat": 5, "cool": 5, "use": 5}
#: The appliance each state modifier needs, by receptacle type.
APPLIANCES = {"isclean": ("clean", "sinkbasintype"), "ishot": ("heat", "microwavetype"), "iscool": ("cool", "fridgetype")}
_ABLE = {"isclean": "cleanable", "ishot": "heatable", "iscool": "coolable"}


@dataclass(frozen=True)
class ExpertGoal:
    """An ALFWorld goal as the expert needs it (type names lowercased, as the engine's facts spell them)."""

    #: The goal object's type, e.g. ``mugtype``.
    otype: str
    #: The target receptacle's type (None for look-at-in-light goals).
    rtype: str | None = None
    #: ``isclean``, ``ishot``, ``iscool`` or None.
    modifier: str | None = None
    #: How many distinct goal objects must end in one target receptacle (1 or 2).
    count: int = 1
    #: The lamp's type for look-at-in-light goals (``desklamptype``, ``floorlamptype``).
    lamp: str | None = None


def parse_goal(pddl_problem: str) -> ExpertGoal:
    """The goal of an ALFWorld PDDL problem (the six task types' templates)."""
    text = pddl_problem.lower()
    start = text.find("(:goal")
    if start < 0:
        raise ValueError("the PDDL problem has no :goal")
    goal = text[start:]
    otypes = re.findall(r"\(objecttype (\?\w+) (\w+)\)", goal)
    rtypes = re.findall(r"\(receptacletype \?\w+ (\w+)\)", goal)
    toggled = set(re.findall(r"\(toggleable (\?\w+)\)", goal))
    lamp = next((t for v, t in otypes if v in toggled), None)
    objects = [t for v, t in otypes if v not in toggled]
    if not objects:
        raise ValueError("the PDDL goal names no object type")
    modifier = next((m for m in APPLIANCES if f"({m} ?" in goal), None)
    count = 2 if "(not (= ?" in goal else 1
    return ExpertGoal(objects[0], None if lamp else (rtypes[0] if rtypes else None), modifier, count, lamp)


#: The facts that change from state to state (the rest of a game's facts never change).
DYNAMIC = frozenset({"inreceptacle", "atlocation", "holds", "opened", "isclean", "ishot", "iscool", "istoggled"})


class World:
    """The facts the expert reads, as plain dicts and sets.

    ``base``: a World of the same game whose facts that never change (types, locations,
    affordances) are shared; then only the :data:`DYNAMIC` facts of ``facts`` are read.
    """

    __slots__ = ("agent_at", "can_contain", "holding", "inside", "openable", "opened", "props", "rec_at", "rec_type", "obj_type")

    def __init__(self, facts: Iterable[tuple[str, tuple[str, ...]]], base: World | None = None) -> None:
        self.agent_at: str | None = None
        self.holding: str | None = None
        self.inside: dict[str, str] = {}
        self.opened: set[str] = set()
        if base is None:
            self.openable: set[str] = set()
            self.rec_at: dict[str, str] = {}
            self.rec_type: dict[str, str] = {}
            self.obj_type: dict[str, str] = {}
            self.can_contain: set[tuple[str, str]] = set()
            self.props: dict[str, set[str]] = {}
        else:
            self.openable, self.rec_at, self.rec_type = base.openable, base.rec_at, base.rec_type
            self.obj_type, self.can_contain = base.obj_type, base.can_contain
            self.props = {k: v for k, v in base.props.items() if k not in DYNAMIC}
        for name, args in facts:
            if name == "inreceptacle":
                self.inside[args[0]] = args[1]
            elif name == "atlocation":
                self.agent_at = args[1]
            elif name == "holds":
                self.holding = args[1]
            elif name == "opened":
                self.opened.add(args[0])
            elif base is not None:
                if name in DYNAMIC:
                    self.props.setdefault(name, set()).add(args[0])
            elif name == "openable":
                self.openable.add(args[0])
            elif name == "receptacleatlocation":
                self.rec_at[args[0]] = args[1]
            elif name == "receptacletype":
                self.rec_type[args[0]] = args[1]
            elif name == "objecttype":
                self.obj_type[args[0]] = args[1]
            elif name == "cancontain":
                self.can_contain.add((args[0], args[1]))
            elif len(args) == 1:
                self.props.setdefault(name, set()).add(args[0])

    def has(self, prop: str, obj: str) -> bool:
        """Whether the one-argument fact ``prop(obj)`` holds."""
        return obj in self.props.get(prop, ())

    def receptacles(self, rtype: str) -> list[str]:
        """The receptacles of a type, sorted."""
        return sorted(r for r, t in self.rec_type.items() if t == rtype)

    def objects(self, otype: str) -> list[str]:
        """The pickupable objects of a type, sorted."""
        return sorted(o for o, t in self.obj_type.items() if t == otype and self.has("pickupable", o))


class _Sim:
    """A command sequence built on a copy of the mutable part of a :class:`World`."""

    __slots__ = ("at", "commands", "cost", "holding", "inside", "modified", "opened", "world")

    def __init__(self, world: World) -> None:
        self.world = world
        self.at = world.agent_at
        self.holding = world.holding
        self.inside = dict(world.inside)
        self.opened = set(world.opened)
        self.modified: set[tuple[str, str]] = set()
        self.commands: list[tuple[str, tuple[str, ...]]] = []
        self.cost = 0

    def emit(self, kind: str, *args: str) -> None:
        self.commands.append((kind, args))
        self.cost += COSTS[kind]

    def go(self, rec: str) -> None:
        loc = self.world.rec_at[rec]
        if self.at != loc:
            self.emit("go", rec)
            self.at = loc

    def access(self, rec: str) -> None:
        self.go(rec)
        if rec in self.world.openable and rec not in self.opened:
            self.emit("open", rec)
            self.opened.add(rec)

    def take(self, obj: str) -> None:
        rec = self.inside.pop(obj)
        self.access(rec)
        self.emit("take", obj, rec)
        self.holding = obj

    def put(self, rec: str) -> None:
        self.access(rec)
        self.emit("move", self.holding, rec)
        self.inside[self.holding] = rec
        self.holding = None

    def apply(self, modifier: str, appliance: str) -> None:
        self.go(appliance)
        self.emit(APPLIANCES[modifier][0], self.holding, appliance)
        self.modified.add((modifier, self.holding))

    def is_(self, modifier: str, obj: str) -> bool:
        return (modifier, obj) in self.modified or self.world.has(modifier, obj)

    def access_cost(self, rec: str) -> int:
        return (self.at != self.world.rec_at[rec]) + (rec in self.world.openable and rec not in self.opened)

    def key(self) -> tuple[int, int]:
        return (self.cost, len(self.commands))


def _free_hands(sim: _Sim, origin: str | None) -> None:
    """Put the held object down where it costs least (``origin``, where it was taken from, first on ties)."""
    world, held = sim.world, sim.holding
    otype = world.obj_type.get(held)
    choices = sorted(r for r, t in world.rec_type.items() if (t, otype) in world.can_contain)
    if not choices:  # nothing takes it (not seen in ALFWorld's games): any receptacle, as the engine would refuse
        choices = sorted(world.rec_type)
    sim.put(min(choices, key=lambda r: (sim.access_cost(r), r != origin, r)))


def _place(world: World, goal: ExpertGoal, origin: str | None) -> _Sim | None:
    best: _Sim | None = None
    targets = [r for r in world.receptacles(goal.rtype) if (goal.rtype, goal.otype) in world.can_contain] or world.receptacles(goal.rtype)
    targets.sort(key=lambda r: r != origin)  # on ties, back where the held object came from
    candidates = world.objects(goal.otype)
    if goal.modifier:
        candidates = [o for o in candidates if world.has(_ABLE[goal.modifier], o)]
    appliances = world.receptacles(APPLIANCES[goal.modifier][1]) if goal.modifier else [None]
    if not appliances:  # a modifier without its appliance cannot be reached
        return None
    for target in targets:
        done = [o for o in candidates if world.inside.get(o) == target and (not goal.modifier or world.has(goal.modifier, o))]
        need = goal.count - len(done)
        if need <= 0:
            continue  # already holds (the engine would have said won)
        pool = [o for o in candidates if o not in done]
        for picks in permutations(pool, need):
            for appliance in appliances:
                sim = _Sim(world)
                if sim.holding is not None and sim.holding not in picks:
                    _free_hands(sim, origin)
                elif sim.holding is not None and sim.holding != picks[0]:
                    continue  # holding a later pick: the order with it first is enumerated too
                for obj in picks:
                    if sim.holding != obj:
                        sim.take(obj)
                    if goal.modifier and not sim.is_(goal.modifier, obj):
                        sim.apply(goal.modifier, appliance)
                    sim.put(target)
                if best is None or sim.key() < best.key():
                    best = sim
    return best


def _look(world: World, goal: ExpertGoal, origin: str | None) -> _Sim | None:
    best: _Sim | None = None
    lamps = sorted(o for o, t in world.obj_type.items() if t == goal.lamp and world.has("toggleable", o))
    for obj in world.objects(goal.otype):
        for lamp in lamps:
            sim = _Sim(world)
            if sim.holding is not None and sim.holding != obj:
                _free_hands(sim, origin)
            if lamp not in sim.inside:
                continue
            if sim.holding != obj:
                sim.take(obj)
            sim.go(sim.inside[lamp])
            if not world.has("istoggled", lamp):
                sim.emit("use", lamp)
            if best is None or sim.key() < best.key():
                best = sim
    return best


_FORMATS = {
    "go": "go to {0}",
    "open": "open {0}",
    "take": "take {0} from {1}",
    "move": "move {0} to {1}",
    "clean": "clean {0} with {1}",
    "heat": "heat {0} with {1}",
    "cool": "cool {0} with {1}",
    "use": "use {0}",
}


def expert_plan(world: World, goal: ExpertGoal, names: Mapping[str, str], origin: str | None = None) -> list[str] | None:
    """The expert's commands from ``world`` to ``goal`` (None when no choice reaches it).

    It first frees the agent's hands when it holds an object the goal
    does not use (it puts it back where it was taken from when that costs no more: an undo), then
    enumerates the few choices a goal leaves (which object of the goal's type, which target
    receptacle, which sink, microwave or fridge, which lamp), simulates each choice's command sequence
    on a copy of the facts and keeps the cheapest under the domain's action costs (``go to``, ``open``,
    ``take``, ``move``: 1; ``clean``/``heat``/``cool``/``use``: 5), ties broken by length, then by a
    fixed order of the choices (the receptacle the held object came from first, then by name). The result is a function of the state and the hint only (no time, no load).

    ``names``: the engine's display name of each PDDL object (``mug_bar_...`` -> ``mug 1``).
    ``origin``: the receptacle the held object was taken from, preferred when the hands must be
    freed at equal cost (the undo of an out-of-order ``take``).
    """
    sim = _look(world, goal, origin) if goal.lamp else _place(world, goal, origin)
    if sim is None:
        return None
    return [_FORMATS[kind].format(*(names[a] for a in args)) for kind, args in sim.commands]
