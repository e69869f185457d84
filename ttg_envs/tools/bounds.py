"""Bounds on what tool arguments and an episode's backend state may become, checked without recursion.

Tool calls are ordinary model output, and ordinary output can build values whose cost explodes
downstream: a 300-deep list that tau2's serializer refuses after the call ran, an integer above
1e308 that ``float()`` cannot hold, a directory copied into itself sixty times whose tree (what
``find``, ``du`` and the checker's ``==`` walk) triples in size per copy while its objects grow by
one. :func:`value_problem` checks a call's arguments before it runs; :func:`state_problem` checks a
backend after a call changed it (the caller restores the state from before the call when it fails).
Both walk iteratively and stop at the first bound they cross, so their own cost is at most the bound.
Each returns a text naming the bound, or None.
"""

from __future__ import annotations

import contextlib
import gc
import itertools
from dataclasses import dataclass
from typing import Any

#: Integers beyond this magnitude cannot become a float (``math.isfinite(10**400)`` raises).
MAX_INT_MAGNITUDE = 10**308


@dataclass(frozen=True)
class ValueBounds:
    """Limits on a value: nesting depth, items (list elements and dict entries, counted every time
    they are reached, so a shared list counts once per reference), characters of all strings, and
    integer magnitude."""

    max_depth: int = 32
    max_items: int = 10_000
    max_chars: int = 1 << 20
    max_int: int = MAX_INT_MAGNITUDE


@dataclass(frozen=True)
class StateBounds:
    """Limits on a backend's state, measured as the tree its recursive readers walk: nodes
    (containers, objects and their items, with every reference to a shared part counted),
    nesting depth, characters of all strings and integer magnitude."""

    max_nodes: int = 50_000
    max_depth: int = 64
    max_chars: int = 1 << 22
    max_int: int = MAX_INT_MAGNITUDE


#: Limits on one call's arguments in every tool env (the JSON a model writes stays far below them).
ARGUMENT_BOUNDS = ValueBounds()
#: Limits on one episode's backend state after a call. BFCL's 800 multi-turn entries after their
#: ground truth: at most 1,271 nodes, 63,442 characters, depth 9.
STATE_BOUNDS = StateBounds()
#: Longest result text of one call (characters; BFCL's longest ground-truth result: 31,706); a longer
#: one is cut with a marker saying how much was cut (:func:`ttg_envs.core.cap_text`).
MAX_RESULT_CHARS = 1 << 16
#: Calls one response may make (each is checked against the state bounds after it runs).
MAX_CALLS_PER_STEP = 64


class BoundExceeded(RuntimeError):
    """A call would take a value or the episode's state past a bound; it was not run, or undone."""


def value_problem(value: Any, bounds: ValueBounds = ARGUMENT_BOUNDS, where: str = "the arguments") -> str | None:
    """Why ``value`` exceeds ``bounds`` (a text naming the bound), or None. Time: at most the bounds."""
    stack: list[tuple[Any, int]] = [(value, 0)]
    items = chars = 0
    while stack:
        item, depth = stack.pop()
        if isinstance(item, bool) or item is None or isinstance(item, float):
            continue
        if isinstance(item, int):
            if abs(item) > bounds.max_int:
                return f"{where} hold an integer beyond ±1e{len(str(bounds.max_int)) - 1} (the bound on integers)"
            continue
        if isinstance(item, str):
            chars += len(item)
            if chars > bounds.max_chars:
                return f"{where} hold more than {bounds.max_chars} characters of text (the bound on text)"
            continue
        if isinstance(item, dict):
            children = [child for pair in item.items() for child in pair]
            count = len(item)
        elif isinstance(item, (list, tuple, set, frozenset)):
            children, count = list(item), len(item)
        else:
            continue
        if depth >= bounds.max_depth:
            return f"{where} are nested deeper than {bounds.max_depth} levels (the bound on nesting)"
        items += count
        if items > bounds.max_items:
            return f"{where} hold more than {bounds.max_items} items (the bound on list and object sizes)"
        stack.extend((child, depth + 1) for child in children)
    return None


_ATOMS = (bool, int, float, complex, bytes, type(None))


def state_problem(root: Any, bounds: StateBounds = STATE_BOUNDS, where: str = "the state") -> str | None:
    """Why the object graph under ``root`` exceeds ``bounds``, or None.

    The graph is walked as a tree: every reference is followed (so a part shared by two folders
    counts twice, as a recursive reader sees it) except one back to an object on the current path
    (a parent link, a cycle), which a tree walk would never finish. Containers are dicts, lists,
    tuples, sets and objects with a ``__dict__``; anything else is a leaf. Time: at most the bounds.
    """
    with _gc_paused():  # the walk allocates per node; collections of a large heap would dominate it
        return _state_problem(root, bounds, where)


def _state_problem(root: Any, bounds: StateBounds, where: str) -> str | None:
    items: list[Any] = [root]
    depths: list[int] = [0]
    path: set[int] = set()
    nodes = chars = 0
    while items:
        item, depth = items.pop(), depths.pop()
        if item is _LEAVE:
            path.discard(depth)  # here depth holds the id of the object being left
            continue
        nodes += 1
        if nodes > bounds.max_nodes:
            return f"{where} would hold more than {bounds.max_nodes} values (the bound on state size)"
        if isinstance(item, str):
            chars += len(item)
            if chars > bounds.max_chars:
                return f"{where} would hold more than {bounds.max_chars} characters of text (the bound on state text)"
            continue
        if isinstance(item, _ATOMS):
            if type(item) is int and (item > bounds.max_int or item < -bounds.max_int):
                return f"{where} would hold an integer beyond ±1e{len(str(bounds.max_int)) - 1} (the bound on state integers)"
            continue
        if isinstance(item, (dict, list, tuple, set, frozenset)):
            children = item
        elif hasattr(item, "__dict__") and not isinstance(item, type):
            children = vars(item)
        else:
            continue
        if id(item) in path:
            continue
        if depth >= bounds.max_depth:
            return f"{where} would be nested deeper than {bounds.max_depth} levels (the bound on state depth)"
        path.add(id(item))
        items.append(_LEAVE)
        depths.append(id(item))
        if isinstance(children, dict):
            if children is not item:  # an object's attribute names are not part of its state's size
                items.extend(children.values())
                depths.extend(itertools.repeat(depth + 1, len(children)))
                continue
            items.extend(children.keys())
            depths.extend(itertools.repeat(depth + 1, len(children)))
            children = children.values()
        items.extend(children)
        depths.extend(itertools.repeat(depth + 1, len(items) - len(depths)))
    return None


_LEAVE = object()


@contextlib.contextmanager
def _gc_paused():
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()
