"""Offline generator of ALFWorld text games in the official PDDL format (a build tool: nothing at runtime imports it).

The official games cannot be downloaded here, so this rebuilds games of the same shape from what
the ``alfworld`` wheel ships: the 120 AI2-THOR FloorPlan layouts, the object/receptacle tables, the
goal templates, and the ``alfred.pddl`` domain + ``alfred.twl2`` grammar. A task is one JSON line
(:func:`generate_task`; scenes: :func:`_draw_scene`, splits: :func:`split_floorplans`), and every
task was played by the engine (:func:`solve`): the goal does not hold at reset and the planner's
plan at reset wins (the task's ``walkthrough``). Any task regenerates alone, byte for byte::

    python -m ttg_envs.datagen.alfworld --seed 0 --workers 2

Options: ``--out DIR`` (default: ``ttg_envs/envs/alfworld/data``), ``--splits train valid_seen
valid_unseen``. Output: ``{split}.jsonl.gz`` per split and ``MANIFEST.json``. The planner is a
uniform-cost search, slow on some pick-two kitchen tasks: no env should ask for it every step.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import multiprocessing
import os
import random
import sys
import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np

from .._io import gzip_lines, read_jsonl, write_manifest
from .._optional import require
from ..envs.alfworld.games import ALFWORLD_DIR, make_game
from ..envs.alfworld.tasks import SPLITS, TASK_TYPES

# Without the `alfworld` extra, importing this module raises the one-line MissingExtraError naming it.
C = require("alfworld.gen.constants", "alfworld")
gdict = require("alfworld.gen.goal_library", "alfworld").gdict

GENERATOR_VERSION = "1.0"
DATA_DIR = Path(__file__).resolve().parent.parent / "envs" / "alfworld" / "data"
LAYOUT_DIR = ALFWORLD_DIR / "gen" / "layouts"

#: The task types (:data:`.tasks.TASK_TYPES`) in the order the generator draws and writes them;
#: the bundle's bytes depend on it (alfworld's numbering with ``look_at_obj_in_light`` fifth).
GENERATION_ORDER: tuple[str, ...] = tuple(TASK_TYPES[i] for i in (0, 2, 3, 4, 1, 5))

#: Tasks per split and type; the valid splits follow the paper's appendix A (140 seen, 134 unseen).
SPLIT_COUNTS: dict[str, dict[str, int]] = {
    "train": {t: 100 for t in GENERATION_ORDER},
    "valid_seen": dict(zip(GENERATION_ORDER, (35, 27, 16, 25, 13, 24))),
    "valid_unseen": dict(zip(GENERATION_ORDER, (24, 31, 23, 21, 18, 17))),
}

ROOM_FLOORPLANS: dict[str, tuple[int, ...]] = {
    "Kitchen": tuple(range(1, 31)),
    "LivingRoom": tuple(range(201, 231)),
    "Bedroom": tuple(range(301, 331)),
    "Bathroom": tuple(range(401, 431)),
}
ALL_FLOORPLANS: tuple[int, ...] = tuple(n for nums in ROOM_FLOORPLANS.values() for n in nums)

#: Floorplans only ``valid_unseen`` uses: three of each room type. They include ALFRED's own
#: unseen scenes (10, 219, 308, 424) and each room keeps what its task types need (kitchens:
#: microwave, fridge, sink; living rooms and bedrooms: a lamp; bathrooms: a sink).
HELD_OUT_FLOORPLANS: tuple[int, ...] = (10, 17, 25, 219, 224, 227, 308, 316, 323, 413, 424, 426)

#: Upper bounds on object and receptacle instances per scene. Kitchens reach them (ALFWorld scenes
#: hold roughly 20-60 objects); they keep a game's load and reset near half a second each, since
#: both run Fast Downward's translator twice, and the planner's search within seconds.
MAX_OBJECTS = 35
MAX_RECEPTACLES = 25
#: Scene draws per task before giving up (a draw is redrawn if the engine cannot solve it).
MAX_ATTEMPTS = 50
#: The engine's planner is a uniform-cost search, so its time grows about tenfold per plan step;
#: pick-two plans already take 8 steps, so draws needing more than two ``open`` actions are
#: redrawn (a pick-two plan is then at most 10 steps).
MAX_PICK_TWO_OPENS = 2

LAMP_TYPES: tuple[str, ...] = ("DeskLamp", "FloorLamp")
#: Receptacles a lamp may stand on. ToggleObject needs the lamp in a receptacle, and THOR's
#: floor is not one, so floor lamps are put on furniture as well.
LAMP_RECEPTACLES: tuple[str, ...] = (
    "CoffeeTable",
    "CounterTop",
    "Desk",
    "DiningTable",
    "Dresser",
    "Shelf",
    "SideTable",
    "TVStand",
)
#: The appliance that performs a task's state change; it is never the task's parent receptacle.
APPLIANCE: dict[str, str] = {
    "pick_clean_then_place_in_recep": "SinkBasin",
    "pick_heat_then_place_in_recep": "Microwave",
    "pick_cool_then_place_in_recep": "Fridge",
}
#: Object types a task type may target (non-sliced ones only: sliced tasks are out of scope).
TARGET_TYPES: dict[str, frozenset[str]] = {
    "pick_clean_then_place_in_recep": frozenset(C.VAL_ACTION_OBJECTS["Cleanable"]),
    "pick_heat_then_place_in_recep": frozenset(C.VAL_ACTION_OBJECTS["Heatable"]),
    "pick_cool_then_place_in_recep": frozenset(C.VAL_ACTION_OBJECTS["Coolable"]),
}

_STATIC_RTYPES: tuple[str, ...] = tuple(sorted(C.RECEPTACLES - C.MOVABLE_RECEPTACLES_SET))
_OBJECT_CONSTANTS: tuple[str, ...] = tuple(sorted(C.OBJECTS_SET - set(_STATIC_RTYPES)))
_PICKUPABLE: frozenset[str] = frozenset(o for objs in C.VAL_RECEPTACLE_OBJECTS.values() for o in objs if o in _OBJECT_CONSTANTS)
_CAN_CONTAIN: dict[str, tuple[str, ...]] = {
    r: tuple(sorted(o for o in C.VAL_RECEPTACLE_OBJECTS.get(r, ()) if o in _OBJECT_CONSTANTS)) for r in _STATIC_RTYPES
}
_BASIN_PARENT = {"SinkBasin": "Sink", "BathtubBasin": "Bathtub"}
_OBJECTS_JSON_ALIAS = {"Sink": "SinkBasin", "Bathtub": "BathtubBasin"}
# Unit steps (dx, dz) for ALFRED rotations 0-3 (north = +z, east = +x).
_HEADING = ((0, 1), (1, 0), (0, -1), (-1, 0))
# Height (m) and camera horizon of receptacles added where openable.json has none.
_SYNTH_HEIGHT = {
    "CoffeeMachine": 0.90,
    "GarbageCan": 0.00,
    "StoveBurner": 0.92,
    "Toaster": 0.90,
    "TowelHolder": 1.10,
    "HandTowelHolder": 1.30,
    "ToiletPaperHanger": 0.75,
    "Toilet": 0.05,
    "LaundryHamper": 0.00,
}
_SYNTH_HORIZON = {
    "CoffeeMachine": 0,
    "GarbageCan": 60,
    "StoveBurner": 30,
    "Toaster": 0,
    "TowelHolder": 0,
    "HandTowelHolder": 0,
    "ToiletPaperHanger": 30,
    "Toilet": 15,
    "LaundryHamper": 60,
}
_AGENT_HORIZON = 30
_PDDL_CHARS = {"-": "_minus_", "|": "_bar_", "+": "_plus_", ".": "_dot_", ",": "_comma_"}


@dataclass(frozen=True)
class Receptacle:
    """A static receptacle instance: ALFRED id, type, interaction location, centre (x, y, z)."""

    rid: str
    rtype: str
    loc: tuple[int, int, int, int]
    center: tuple[float, float, float]


@dataclass(frozen=True)
class Floorplan:
    """What one AI2-THOR floorplan offers the generator."""

    num: int
    room: str
    object_types: tuple[str, ...]
    receptacles: tuple[Receptacle, ...]
    points: tuple[tuple[int, int], ...]

    @property
    def rtypes(self) -> tuple[str, ...]:
        """Receptacle types present, sorted."""
        return tuple(sorted({r.rtype for r in self.receptacles}))

    def holders(self, otype: str, exclude: str | None = None) -> list[Receptacle]:
        """Receptacle instances that can hold ``otype``, in id order (see :func:`_holders`)."""
        return _holders(self.receptacles, otype, exclude)


def _holders(receptacles: Iterable[Receptacle], otype: str, exclude: str | None = None) -> list[Receptacle]:
    """Receptacles that can hold ``otype`` (lamps: table-like ones), except those of type ``exclude``."""
    ok = set(LAMP_RECEPTACLES) if otype in LAMP_TYPES else {r for r in _STATIC_RTYPES if otype in _CAN_CONTAIN[r]}
    return [r for r in receptacles if r.rtype in ok and r.rtype != exclude]


def _stable_int(*parts: Any) -> int:
    """A 64-bit int from ``parts`` that does not depend on PYTHONHASHSEED or the process."""
    digest = hashlib.sha256("\x1f".join(str(p) for p in parts).encode()).digest()
    return int.from_bytes(digest[:8], "big")


def _fmt(v: float) -> str:
    """ALFRED's coordinate format, e.g. ``+00.68`` / ``-02.20``."""
    return f"{round(v, 2) + 0.0:+06.2f}"


def _mangle(name: str) -> str:
    """ALFRED's ``fix_pddl_str_chars`` for ids (``|`` -> ``_bar_``, ``-`` -> ``_minus_``...)."""
    return "".join(_PDDL_CHARS.get(ch, ch) for ch in name)


def _loc_name(loc: tuple[int, int, int, int]) -> str:
    return _mangle("|".join(["loc", *map(str, loc)]))


def _pose_to_loc(x: float, z: float, rotation: float, horizon: float) -> tuple[int, int, int, int]:
    """An openable.json pose (metres, degrees) as ALFRED's integer location tuple."""
    step = C.AGENT_STEP_SIZE
    return round(x / step), round(z / step), round(rotation / 90) % 4, round(horizon)


def _room_of(num: int) -> str:
    return next(room for room, nums in ROOM_FLOORPLANS.items() if num in nums)


@cache
def load_floorplan(num: int) -> Floorplan:
    """Read a floorplan's layout files and build its receptacles (deterministic per floorplan)."""
    objects = json.loads((LAYOUT_DIR / f"FloorPlan{num}-objects.json").read_text())
    openable = json.loads((LAYOUT_DIR / f"FloorPlan{num}-openable.json").read_text())
    grid = np.load(LAYOUT_DIR / f"FloorPlan{num}-layout.npy")
    points = tuple(sorted({(round(x / C.AGENT_STEP_SIZE), round(z / C.AGENT_STEP_SIZE)) for x, z in grid.tolist()}))

    receptacles: list[Receptacle] = []
    for rid in sorted(openable):
        parts = rid.split("|")
        rtype = parts[4] if len(parts) == 5 else parts[0]
        if rtype not in _STATIC_RTYPES:
            continue
        x, y, z = (float(p) for p in parts[1:4])
        receptacles.append(Receptacle(rid, rtype, _pose_to_loc(*openable[rid]), (x, y, z)))

    present = {_OBJECTS_JSON_ALIAS.get(t, t) for t in objects}
    have = {r.rtype for r in receptacles}
    rng = random.Random(_stable_int("floorplan", num))
    for rtype in sorted((present & set(_STATIC_RTYPES)) - have):
        px, pz = rng.choice(points)
        rot = rng.randrange(4)
        dx, dz = _HEADING[rot]
        loc = (px, pz, rot, _SYNTH_HORIZON.get(rtype, 30))
        for i in range(4 if rtype == "StoveBurner" else 1):
            # Burners sit in a 2x2 grid in front of the agent; others 0.75 m ahead.
            ahead = 0.75 + 0.3 * (i // 2)
            side = 0.3 * (i % 2) - (0.15 if rtype == "StoveBurner" else 0.0)
            cx = px * C.AGENT_STEP_SIZE + dx * ahead + dz * side
            cz = pz * C.AGENT_STEP_SIZE + dz * ahead - dx * side
            cy = _SYNTH_HEIGHT.get(rtype, 0.5)
            head = _BASIN_PARENT.get(rtype, rtype)
            rid = "|".join([head, _fmt(cx), _fmt(cy), _fmt(cz)] + ([rtype] if rtype in _BASIN_PARENT else []))
            receptacles.append(Receptacle(rid, rtype, loc, (cx, cy, cz)))
    # Drop surplus instances of the most numerous types (drawers, cabinets) down to the cap.
    while len(receptacles) > MAX_RECEPTACLES:
        by_type: dict[str, list[Receptacle]] = {}
        for r in sorted(receptacles, key=lambda r: r.rid):
            by_type.setdefault(r.rtype, []).append(r)
        biggest = max(sorted(by_type), key=lambda t: len(by_type[t]))
        receptacles.remove(rng.choice(by_type[biggest]))
    receptacles.sort(key=lambda r: r.rid)

    object_types = tuple(sorted(t for t in set(objects) if (t in _PICKUPABLE or t in LAMP_TYPES) and _holders(receptacles, t)))
    return Floorplan(num, _room_of(num), object_types, tuple(receptacles), points)


def split_floorplans(split: str) -> tuple[int, ...]:
    """Floorplans a split draws from, in numeric order.

    ``train`` (100 tasks per type) and ``valid_seen`` (the paper's counts) draw floorplans
    outside :data:`HELD_OUT_FLOORPLANS`; ``valid_unseen`` uses only those. Each task's rng is derived
    from ``(seed, split, task type, index, attempt)``, so any task can be regenerated alone and equals
    the bundled line byte for byte, whatever the process or PYTHONHASHSEED.
    """
    if split not in SPLITS:
        raise ValueError(f"unknown split {split!r}; expected one of {SPLITS}")
    held = set(HELD_OUT_FLOORPLANS)
    return tuple(n for n in ALL_FLOORPLANS if (n in held) == (split == "valid_unseen"))


def _candidate_targets(fp: Floorplan, task_type: str) -> list[tuple[str, str, str]]:
    """(object, parent, toggle) choices the floorplan admits for a task type, sorted."""
    out: list[tuple[str, str, str]] = []
    pickable = [t for t in fp.object_types if t in _PICKUPABLE]
    if task_type == "look_at_obj_in_light":
        for lamp in (t for t in fp.object_types if t in LAMP_TYPES):
            out.extend((obj, "", lamp) for obj in pickable)
        return out
    appliance = APPLIANCE.get(task_type)
    if appliance and appliance not in fp.rtypes:
        return out
    allowed = TARGET_TYPES.get(task_type)
    for obj in pickable:
        if allowed is not None and obj not in allowed:
            continue
        for parent in fp.rtypes:
            if parent == appliance or obj not in _CAN_CONTAIN[parent]:
                continue
            # The object must have somewhere to start that is not already the goal.
            if fp.holders(obj, exclude=parent):
                out.append((obj, parent, ""))
    return out


@cache
def feasible_floorplans(split: str, task_type: str) -> tuple[int, ...]:
    """Floorplans of a split that admit at least one task of ``task_type``."""
    return tuple(n for n in split_floorplans(split) if _candidate_targets(load_floorplan(n), task_type))


def _pick_two_opens(objects: Sequence[tuple[str, str, Receptacle]], obj: str, parent: str) -> int:
    """Fewest ``open`` actions a pick-two plan needs (sources of the best pair + the parent)."""
    sources = [r for _, o, r in objects if o == obj]
    best = min(len({r.rid for r in (a, b) if r.rtype in C.OPENABLE_CLASS_SET}) for i, a in enumerate(sources) for b in sources[i + 1 :])
    return best + (parent in C.OPENABLE_CLASS_SET)


def _instance_counts(fp: Floorplan, rng: random.Random, task_type: str, obj: str, toggle: str) -> dict[str, int]:
    counts: dict[str, int] = {}
    for otype in fp.object_types:
        if otype in LAMP_TYPES:
            counts[otype] = 1
        elif otype == obj:
            counts[otype] = rng.randint(2, 4) if task_type == "pick_two_obj_and_place" else rng.randint(1, 3)
        else:
            counts[otype] = rng.choices((1, 2, 3), weights=(4, 4, 2))[0]
    total = sum(counts.values())
    if total > MAX_OBJECTS:
        keep = {obj, toggle}
        extras = [t for t in fp.object_types if t not in keep for _ in range(counts[t] - 1)]
        singles = [t for t in fp.object_types if t not in keep and t not in LAMP_TYPES]
        # Trim duplicates first, then whole distractor types.
        for t in rng.sample(extras, len(extras)):
            if total <= MAX_OBJECTS:
                break
            counts[t] -= 1
            total -= 1
        for t in rng.sample(singles, len(singles)):
            if total <= MAX_OBJECTS:
                break
            total -= counts.pop(t)
    return counts


def _object_id(otype: str, recep: Receptacle, rng: random.Random, taken: set[str]) -> str:
    while True:
        x = recep.center[0] + rng.uniform(-0.3, 0.3)
        y = recep.center[1] + rng.uniform(0.0, 0.25)
        z = recep.center[2] + rng.uniform(-0.3, 0.3)
        oid = "|".join((otype, _fmt(x), _fmt(y), _fmt(z)))
        if oid not in taken:
            taken.add(oid)
            return oid


def _build_problem(
    name: str,
    fp: Floorplan,
    objects: Sequence[tuple[str, str, Receptacle]],
    agent_loc: tuple[int, int, int, int],
    goal: str,
) -> str:
    """The problem PDDL in the layout of ALFRED's ``state_to_pddl`` (ids mangled)."""
    recs = fp.receptacles
    locations = sorted({r.loc for r in recs} | {agent_loc})
    otypes = sorted({o for _, o, _ in objects})
    lines = [f"(define (problem {name})", "(:domain alfred)", "(:objects", "agent1 - agent"]
    lines += [f"{c} - object" for c in _OBJECT_CONSTANTS]
    lines += [f"{c}Type - otype" for c in _OBJECT_CONSTANTS]
    lines += [f"{c}Type - rtype" for c in _STATIC_RTYPES]
    lines += [f"{_mangle(oid)} - object" for oid, _, _ in objects]
    lines += [f"{_mangle(r.rid)} - receptacle" for r in recs]
    lines += [f"{_loc_name(loc)} - location" for loc in locations]
    lines += [")", "(:init"]
    lines += [f"(receptacleType {_mangle(r.rid)} {r.rtype}Type)" for r in recs]
    lines += [f"(objectType {_mangle(oid)} {o}Type)" for oid, o, _ in objects]
    lines += [f"(canContain {rt}Type {o}Type)" for rt in fp.rtypes for o in _CAN_CONTAIN[rt] if o in otypes]
    for oid, o, _ in objects:
        m = _mangle(oid)
        if o in _PICKUPABLE:
            lines.append(f"(pickupable {m})")
        if o in C.MOVABLE_RECEPTACLES_SET:
            lines.append(f"(isReceptacleObject {m})")
    lines += [f"(openable {_mangle(r.rid)})" for r in recs if r.rtype in C.OPENABLE_CLASS_SET]
    lines.append(f"(atLocation agent1 {_loc_name(agent_loc)})")
    for prop, table in (
        ("cleanable", "Cleanable"),
        ("heatable", "Heatable"),
        ("coolable", "Coolable"),
        ("toggleable", "Toggleable"),
        ("sliceable", "Sliceable"),
    ):
        lines += [f"({prop} {_mangle(oid)})" for oid, o, _ in objects if o in C.VAL_ACTION_OBJECTS[table]]
    lines += [f"(inReceptacle {_mangle(oid)} {_mangle(r.rid)})" for oid, _, r in objects]
    lines += [f"(receptacleAtLocation {_mangle(r.rid)} {_loc_name(r.loc)})" for r in recs]
    lines += [f"(objectAtLocation {_mangle(oid)} {_loc_name(r.loc)})" for oid, _, r in objects]
    lines.append(")")
    return "\n".join(lines) + "\n" + goal.strip() + "\n"


def _goal_pddl(task_type: str, obj: str, parent: str, toggle: str) -> str:
    text = gdict[task_type]["pddl"].format(obj=obj, recep=parent, toggle=toggle, mrecep="")
    return "\n".join(line.strip() for line in text.replace("#", "-").strip().splitlines())


def _draw_scene(split: str, task_type: str, index: int, seed: int, attempt: int) -> dict[str, Any] | None:
    """One candidate task (not yet checked by the engine), or None if the draw is infeasible.

    A floorplan's receptacles are the instances in ``FloorPlanN-openable.json`` (ALFRED id and
    agent interaction pose ``[x, z, rotation, horizon]``), plus one instance (four for ``StoveBurner``)
    of each static receptacle type that ``FloorPlanN-objects.json`` lists but the openable file lacks
    (coffee machines, stove burners, garbage cans, towel holders...), posed at a reachable point of
    ``FloorPlanN-layout.npy``; large kitchens lose surplus drawers and cabinets down to
    :data:`MAX_RECEPTACLES`. All of this is drawn from a per-floorplan rng, so a floorplan is the same
    scene in every task. Locations follow ALFRED: ``loc|round(x/0.25)|round(z/0.25)|rotation/90|horizon``.
    Objects are the pickupable types of ``objects.json`` (1-3 instances each, at most
    :data:`MAX_OBJECTS` in all) put in compatible receptacles (``VAL_RECEPTACLE_OBJECTS``), so many
    start in closed drawers, cabinets and fridges; lamps stand on table-like receptacles so they can be
    used. Goal objects never start in a goal receptacle, and the appliance of a clean/heat/cool task is
    never its goal receptacle. The agent starts at a reachable pose that is no receptacle's location.
    """
    rng = random.Random(_stable_int(seed, split, task_type, index, attempt))
    fp = load_floorplan(rng.choice(feasible_floorplans(split, task_type)))
    choices = _candidate_targets(fp, task_type)
    # Object first, then parent/lamp, so object types are not weighted by how many parents they have.
    obj = rng.choice(sorted({c[0] for c in choices}))
    _, parent, toggle = rng.choice([c for c in choices if c[0] == obj])

    counts = _instance_counts(fp, rng, task_type, obj, toggle)
    taken: set[str] = set()
    objects: list[tuple[str, str, Receptacle]] = []
    for otype in sorted(counts):
        # Goal objects never start in a goal receptacle, so no task is half done at reset.
        holders = fp.holders(otype, exclude=parent if otype == obj else None)
        for _ in range(counts[otype]):
            recep = rng.choice(holders)
            objects.append((_object_id(otype, recep, rng, taken), otype, recep))
    objects.sort(key=lambda item: item[0])
    if task_type == "pick_two_obj_and_place" and _pick_two_opens(objects, obj, parent) > MAX_PICK_TWO_OPENS:
        return None

    recep_locs = {r.loc for r in fp.receptacles}
    while True:
        px, pz = rng.choice(fp.points)
        agent_loc = (px, pz, rng.randrange(4), _AGENT_HORIZON)
        if agent_loc not in recep_locs:
            break

    template = rng.choice(gdict[task_type]["templates"])
    goal_text = template.format(obj=obj.lower(), recep=parent.lower(), toggle=toggle.lower(), mrecep="")
    name = f"{task_type}-{obj}-None-{parent or toggle}-FloorPlan{fp.num}-{index:04d}"
    problem = _build_problem(
        f"plan_trial_{split}_{task_type}_{index:04d}", fp, objects, agent_loc, _goal_pddl(task_type, obj, parent, toggle)
    )
    return {
        "id": f"{split}/{name}",
        "type": task_type,
        "split": split,
        "index": index,
        "floorplan": f"FloorPlan{fp.num}",
        "goal": goal_text,
        "pddl_problem": problem,
        "pddl_params": {
            "object_target": obj,
            "parent_target": parent,
            "toggle_target": toggle,
            "mrecep_target": "",
            "object_sliced": False,
        },
        "walkthrough": [],
        "seed": seed,
    }


def make_engine(policy_commands: bool = False) -> Any:
    """A ``PddlEnv`` wrapped like ALFWorld's text env (``AlfredDemangler`` + ``AlfredInfos``)."""
    import textworld
    from alfworld.agents.environment.alfred_tw_env import AlfredDemangler, AlfredInfos
    from textworld.envs import PddlEnv

    infos = textworld.EnvInfos(admissible_commands=True, won=True, policy_commands=policy_commands)
    return AlfredInfos(AlfredDemangler(PddlEnv(infos), shuffle=False))


@cache
def _engine() -> Any:
    # One engine per process: each PddlEnv loads its own copy of Fast Downward's library.
    return make_engine()


def replay(task: dict[str, Any], commands: Iterable[str] | None = None) -> tuple[bool, bool]:
    """Play ``commands`` (default: the task's walkthrough) from reset in a fresh game.

    Returns (won at reset, won after the last command). Raises ``ValueError`` if a command is not
    admissible when its turn comes.
    """
    env = _engine()
    env.load(make_game(task))
    state = env.reset()
    won_at_reset = bool(state["won"])
    for cmd in task["walkthrough"] if commands is None else commands:
        if cmd not in state["admissible_commands"]:
            raise ValueError(f"inadmissible command {cmd!r}")
        state, _, _ = env.step(cmd)
    return won_at_reset, bool(state["won"])


def solve(task: dict[str, Any]) -> list[str] | None:
    """The engine planner's plan at reset, if the goal does not hold at reset and playing the plan
    with ``env.step`` wins; else None."""
    env = _engine()
    infos = env.unwrapped.request_infos
    env.load(make_game(task))
    # Plan at reset only: with policy_commands on, every step would replan.
    infos.policy_commands = True
    try:
        state = env.reset()
    finally:
        infos.policy_commands = False
    plan = list(state["policy_commands"] or [])
    if state["won"] or not plan:
        return None
    for cmd in plan:
        if cmd not in state["admissible_commands"]:
            return None
        state, _, _ = env.step(cmd)
    return plan if state["won"] else None


def generate_task(split: str, task_type: str, index: int, seed: int = 0) -> dict[str, Any]:
    """Generate task ``index`` of ``task_type`` in ``split``: draw scenes from the
    (seed, split, type, index, attempt) rng until the engine solves one.

    Returns a dict with ``id``, ``type``, ``split``, ``index``, ``floorplan``, ``goal`` (task
    sentence), ``pddl_problem``, ``pddl_params``, ``walkthrough`` (planner commands that win) and
    ``seed``.
    """
    if task_type not in TASK_TYPES:
        raise ValueError(f"unknown task type {task_type!r}; expected one of {TASK_TYPES}")
    for attempt in range(MAX_ATTEMPTS):
        task = _draw_scene(split, task_type, index, seed, attempt)
        if task is None:
            continue
        plan = solve(task)
        if plan is not None:
            task["walkthrough"] = plan
            return task
    raise RuntimeError(f"no solvable {task_type} task for {split}/{index} after {MAX_ATTEMPTS} attempts")


def task_line(task: dict[str, Any]) -> str:
    """The canonical JSON line of a task (sorted keys, compact separators, no newline)."""
    return json.dumps(task, sort_keys=True, separators=(",", ":"), ensure_ascii=True)


def split_jobs(split: str) -> list[tuple[str, str, int]]:
    """(split, type, index) of every task of a split, in file order."""
    return [(split, t, i) for t in GENERATION_ORDER for i in range(SPLIT_COUNTS[split][t])]


def _job(args: tuple[str, str, int, int]) -> str:
    split, task_type, index, seed = args
    return task_line(generate_task(split, task_type, index, seed))


def generate_split(split: str, seed: int = 0, workers: int = 1, progress: bool = True) -> list[str]:
    """All task lines of a split in file order (types in :data:`GENERATION_ORDER`, then index)."""
    return _run_jobs([(s, t, i, seed) for s, t, i in split_jobs(split)], workers, progress, split)


def generate_tasks(split: str, task_type: str, indices: Iterable[int], seed: int = 0, workers: int = 1, progress: bool = True) -> list[str]:
    """Task lines of one type at any ``indices`` of a split's family, in the given order.

    Indices past the bundled counts give more tasks of the same family (same floorplans, same
    rng derivation): e.g. ``generate_tasks("train", "pick_and_place_simple", range(100, 400))``
    is 300 more train tasks, none of them bundled, loadable with ``ALFWorldEnv(game_files=...)``
    once written with :func:`write_jsonl_gz`.
    """
    return _run_jobs([(split, task_type, int(i), seed) for i in indices], workers, progress, f"{split}/{task_type}")


def _run_jobs(jobs: list[tuple[str, str, int, int]], workers: int, progress: bool, desc: str) -> list[str]:
    from tqdm import tqdm

    bar = tqdm(total=len(jobs), desc=desc, disable=not progress, file=sys.stderr)
    lines: list[str] = []
    if workers > 1:
        with multiprocessing.get_context("fork").Pool(workers) as pool:
            for line in pool.imap(_job, jobs, chunksize=1):
                lines.append(line)
                bar.update()
    else:
        for job in jobs:
            lines.append(_job(job))
            bar.update()
    bar.close()
    return lines


def write_jsonl_gz(path: Path, lines: Iterable[str]) -> str:
    """Write lines as a byte-reproducible gzip (mtime 0, no file name); return its sha256."""
    data = gzip_lines(lines)
    path.write_bytes(data)
    return hashlib.sha256(data).hexdigest()


def read_split(split: str, data_dir: Path = DATA_DIR) -> Iterator[dict[str, Any]]:
    """Yield the tasks of a bundled split file in order."""
    yield from read_jsonl(data_dir / f"{split}.jsonl.gz")


def main(argv: Sequence[str] | None = None) -> int:
    """CLI: generate splits into ``--out`` and write ``MANIFEST.json``."""
    parser = argparse.ArgumentParser(description="Generate the offline ALFWorld task set.")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=DATA_DIR)
    parser.add_argument("--splits", nargs="+", default=list(SPLITS), choices=SPLITS)
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    args = parser.parse_args(argv)

    args.out.mkdir(parents=True, exist_ok=True)
    manifest_path = args.out / "MANIFEST.json"
    manifest: dict[str, Any] = {}
    if manifest_path.exists():
        manifest = json.loads(manifest_path.read_text())
    if manifest.get("seed") != args.seed or manifest.get("generator_version") != GENERATOR_VERSION:
        manifest = {"splits": {}}
    manifest.update(
        {
            "generator": "ttg_envs.datagen.alfworld",
            "generator_version": GENERATOR_VERSION,
            "seed": args.seed,
            "held_out_floorplans": list(HELD_OUT_FLOORPLANS),
            "task_types": list(GENERATION_ORDER),
        }
    )
    for split in args.splits:
        start = time.perf_counter()
        lines = generate_split(split, args.seed, workers=args.workers)
        sha = write_jsonl_gz(args.out / f"{split}.jsonl.gz", lines)
        counts = {t: 0 for t in GENERATION_ORDER}
        for line in lines:
            counts[json.loads(line)["type"]] += 1
        floorplans = sorted({json.loads(line)["floorplan"] for line in lines}, key=lambda f: int(f[9:]))
        manifest["splits"][split] = {
            "file": f"{split}.jsonl.gz",
            "sha256": sha,
            "num_tasks": len(lines),
            "counts": counts,
            "floorplans": floorplans,
        }
        print(f"{split}: {len(lines)} tasks in {time.perf_counter() - start:.1f} s", file=sys.stderr)
    manifest["splits"] = {s: manifest["splits"][s] for s in SPLITS if s in manifest["splits"]}
    write_manifest(manifest_path, manifest)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
