"""BFCL's multi-turn function backends (GorillaFileSystem, TradingBot, ...), one set per episode.

bfcl-eval's harness keeps instances in module globals keyed by model name and entry id and calls
them through ``eval``. Here every episode (and every branch) owns its instances, built the way the
harness builds them (``Class()`` then ``_load_scenario(deepcopy(initial_config[cls]), long_context)``),
and a call reaches a backend only through the name -> public-method table of those instances.
"""

from __future__ import annotations

import copy
import datetime
import hashlib
import importlib
import inspect
import json
import random
from typing import Any, Mapping, Sequence

from ...tools import ToolCall
from .data import bfcl_module


class Backends:
    """The involved backend instances of one episode and the table of their public methods."""

    def __init__(self, involved_classes: Sequence[str], initial_config: Mapping[str, Any], *, long_context: bool):
        config = bfcl_module("bfcl_eval.constants.executable_backend_config")
        self.instances: dict[str, Any] = {}
        self.owner: dict[str, str] = {}
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
        method = getattr(self.instances[class_name], call.name)
        try:
            result = method(**call.arguments)
        except Exception as exc:  # the harness reports any backend exception as the call's result
            return f"Error during execution: {exc}"
        if isinstance(result, str):
            return result
        if isinstance(result, dict):
            try:
                return json.dumps(result)
            except (TypeError, ValueError):
                return str(result)
        return str(result)

    def copy(self) -> Backends:
        """An independent deep copy (instances and method table)."""
        return copy.deepcopy(self)

    def state_digest(self) -> str:
        """A hash of every instance's attributes, wall-clock timestamps left out (they differ between
        branches that took the same actions), RNG states included."""
        h = hashlib.sha256()
        for class_name in sorted(self.instances):
            h.update(class_name.encode())
            h.update(json.dumps(_canonical(self.instances[class_name], set()), sort_keys=True, default=str).encode())
        return h.hexdigest()


def _canonical(value: Any, active: set[int]) -> Any:
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    if isinstance(value, (datetime.datetime, datetime.date, datetime.time)):
        return None
    if isinstance(value, random.Random):
        return repr(value.getstate())
    if id(value) in active:
        return "<cycle>"
    active.add(id(value))
    try:
        if isinstance(value, Mapping):
            return {str(k): _canonical(v, active) for k, v in value.items()}
        if isinstance(value, (list, tuple)):
            return [_canonical(v, active) for v in value]
        if isinstance(value, (set, frozenset)):
            return sorted((_canonical(v, active) for v in value), key=repr)
        if hasattr(value, "__dict__"):
            return {"__class__": type(value).__name__, **{k: _canonical(v, active) for k, v in vars(value).items()}}
        return repr(value)
    finally:
        active.discard(id(value))
