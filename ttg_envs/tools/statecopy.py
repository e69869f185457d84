"""A deep copy of episode state that never recurses and stays linear in the number of objects.

``copy.deepcopy`` recurses once per level of nesting (several frames per level), so a state
nested a few hundred levels deep makes ``branch()`` raise ``RecursionError``. :func:`copy_state`
copies the containers episode state is made of (dicts, lists, sets, tuples and plain objects with
a ``__dict__``) with an explicit stack, keeping sharing and cycles as ``deepcopy`` does (one copy
per object, through a memo). Anything else (``random.Random``, ``datetime``, an object with its
own ``__deepcopy__``, ``__reduce__``, ``__getstate__`` or ``__slots__``, a dict or list subclass)
is handed to ``copy.deepcopy`` with the same memo, as a leaf.
"""

from __future__ import annotations

import copy
import copyreg
from typing import Any

_ATOMS = (type(None), bool, int, float, complex, str, bytes, range, type(Ellipsis), type(NotImplemented))


def copy_state(root: Any) -> Any:
    """A deep copy of ``root`` equal to ``copy.deepcopy(root)`` for the types listed in the module
    docstring, built without recursion."""
    memo: dict[int, Any] = {}
    keep: list[Any] = []  # originals stay alive while their ids key the memo
    # Frames: ("visit", obj) makes obj's copy (a shell for mutable containers, filled later);
    # ("fill", obj) fills the shell from its children's copies; ("tuple", obj) builds a tuple
    # once its items are copied.
    stack: list[tuple[str, Any]] = [("visit", root)]
    while stack:
        action, obj = stack.pop()
        if action == "visit":
            if isinstance(obj, _ATOMS) or isinstance(obj, type) or id(obj) in memo:
                continue
            kind = _kind(obj)
            if kind is None:
                memo[id(obj)] = copy.deepcopy(obj, memo)
                keep.append(obj)
                continue
            keep.append(obj)
            if kind == "tuple":
                stack.append(("tuple", obj))
                stack.extend(("visit", item) for item in reversed(obj))
                continue
            memo[id(obj)] = {} if kind == "dict" else [] if kind == "list" else set() if kind == "set" else object.__new__(type(obj))
            stack.append(("fill", obj))
            children = _children(obj, kind)
            stack.extend(("visit", item) for item in reversed(children))
        elif action == "tuple":
            if id(obj) not in memo:  # a cycle through this tuple may have built it already
                memo[id(obj)] = tuple(_copied(item, memo) for item in obj)
        else:
            kind, new = _kind(obj), memo[id(obj)]
            if kind == "dict":
                for key, value in obj.items():
                    new[_copied(key, memo)] = _copied(value, memo)
            elif kind == "list":
                new.extend(_copied(item, memo) for item in obj)
            elif kind == "set":
                new.update(_copied(item, memo) for item in obj)
            else:
                new.__dict__.update({key: _copied(value, memo) for key, value in vars(obj).items()})
    return _copied(root, memo)


def _kind(obj: Any) -> str | None:
    """How :func:`copy_state` copies ``obj`` itself, or None to hand it to ``copy.deepcopy``."""
    cls = type(obj)
    if cls is dict:
        return "dict"
    if cls is list:
        return "list"
    if cls is set:
        return "set"
    if cls is tuple:
        return "tuple"
    # Builtin types (functions, methods, modules...) have copy rules of their own.
    if cls.__module__ == "builtins" or cls in copyreg.dispatch_table or not hasattr(obj, "__dict__") or hasattr(cls, "__slots__"):
        return None
    if (
        hasattr(cls, "__deepcopy__")
        or cls.__reduce_ex__ is not object.__reduce_ex__
        or cls.__reduce__ is not object.__reduce__
        or getattr(cls, "__getstate__", object.__getstate__) is not object.__getstate__
        or hasattr(cls, "__setstate__")
        or cls.__new__ is not object.__new__
    ):
        return None
    return "object"


def _children(obj: Any, kind: str) -> list[Any]:
    if kind == "dict":
        return [part for pair in obj.items() for part in pair]
    if kind == "object":
        return list(vars(obj).values())
    return list(obj)


def _copied(obj: Any, memo: dict[int, Any]) -> Any:
    if isinstance(obj, _ATOMS) or isinstance(obj, type):
        return obj
    return memo[id(obj)]
