"""Branching a tau2 ``Environment`` at the cost of what an episode changes, not of its whole database.

A tau2 database is a pydantic model whose tables are dicts of records (retail: products, users,
orders; airline: flights, users, reservations). :func:`fork_environment` gives a branch new
toolkit objects over a new database model whose tables are :class:`SharedRecords`: the same
records as the original's, each copied the first time either side takes it out of its table, so a
change on one side never reaches the other. The policy text, tool schemas and tasks are shared as
they are (nothing changes them). While a tool that tau2 declares read-only runs
(:func:`reading`), the tables hand out their records without copying, so a search over every user
copies nothing. Domains whose environment syncs state between toolkits after each call (telecom)
or whose database has no dict tables are deep-copied whole, as before (telecom's is small).
"""

from __future__ import annotations

import contextlib
import contextvars
import copy
from collections.abc import Iterator
from functools import lru_cache
from typing import Any

# Per thread (and task): a served env's sessions may step in other threads meanwhile.
_READING: contextvars.ContextVar[bool] = contextvars.ContextVar("ttg_tau2_reading", default=False)


@contextlib.contextmanager
def reading() -> Iterator[None]:
    """Within: tables hand out their shared records as they are (a read-only tool is running)."""
    token = _READING.set(True)
    try:
        yield
    finally:
        _READING.reset(token)


class SharedRecords(dict):
    """A table of records that a branch shares with its original until one side takes a record out.

    Getting a record (``[]``, ``get``, ``values``, ``items``, ``pop``, ``setdefault``) hands out this
    table's own copy, made on first access; the shared record is never handed out (outside
    :func:`reading`), so no one changes it. Iteration over keys, ``in`` and ``len`` copy nothing.
    Serialisers that read the dict directly (pydantic's ``model_dump``, hence tau2's database hash)
    see the current records either way.
    """

    __slots__ = ("_own",)

    def __init__(self, records: dict) -> None:
        super().__init__(records)
        self._own: set = set()

    def share(self) -> SharedRecords:
        """A table for a branch over the same records; from now on neither side owns any of them."""
        self._own = set()
        return SharedRecords(self)

    def __getitem__(self, key: Any) -> Any:
        value = dict.__getitem__(self, key)
        if _READING.get():
            return value
        if _TAKEN is not None:
            _note(self, key)
        if key in self._own:
            return value
        value = copy.deepcopy(value)
        dict.__setitem__(self, key, value)
        self._own.add(key)
        return value

    def get(self, key: Any, default: Any = None) -> Any:
        return self[key] if key in self else default

    def values(self) -> list:  # type: ignore[override]
        if _READING.get():
            return list(dict.values(self))
        return [self[key] for key in list(dict.keys(self))]

    def items(self) -> list:  # type: ignore[override]
        if _READING.get():
            return list(dict.items(self))
        return [(key, self[key]) for key in list(dict.keys(self))]

    def __setitem__(self, key: Any, value: Any) -> None:
        if _TAKEN is not None:
            _note(self, key)
        dict.__setitem__(self, key, value)
        self._own.add(key)

    def __delitem__(self, key: Any) -> None:
        if _TAKEN is not None:
            _note(self, key)
        dict.__delitem__(self, key)
        self._own.discard(key)

    def pop(self, key: Any, *default: Any) -> Any:
        if key not in self:
            if default:
                return default[0]
            raise KeyError(key)
        value = self[key]
        del self[key]
        return value

    def popitem(self) -> tuple:
        key = next(reversed(dict.keys(self)))
        return key, self.pop(key)

    def setdefault(self, key: Any, default: Any = None) -> Any:
        if key not in self:
            self[key] = default
        return self[key]

    def update(self, *args: Any, **kwargs: Any) -> None:
        for key, value in dict(*args, **kwargs).items():
            self[key] = value

    def clear(self) -> None:
        if _TAKEN is not None:
            for key in list(dict.keys(self)):
                _note(self, key)
        dict.clear(self)
        self._own = set()

    def copy(self) -> dict:
        return {key: self[key] for key in list(dict.keys(self))}

    def __deepcopy__(self, memo: dict) -> dict:
        return {key: copy.deepcopy(value, memo) for key, value in dict.items(self)}

    def __reduce__(self):
        return (dict, (dict(dict.items(self)),))


#: While :func:`capture_changes` runs: id of each table -> (the table, the keys a call took out,
#: set or deleted). A module global, not a context variable: only a call worker sets it, in its own
#: process, and every table access reads it.
_TAKEN: dict[int, tuple[SharedRecords, set]] | None = None


def _note(table: SharedRecords, key: Any) -> None:
    _TAKEN.setdefault(id(table), (table, set()))[1].add(key)


def capture_changes(environment: Any, run: Any) -> tuple[Any, dict[str, Any]]:
    """``run()``'s value and what it may have changed in ``environment``'s toolkits, as
    :func:`apply_changes` takes it: of each :class:`SharedRecords` table only the records the call
    took out, set or deleted; every other field of a database, and a toolkit's other attributes,
    whole (telecom's small database; airline's and retail's have none). What a call worker sends
    back instead of the database."""
    global _TAKEN
    _TAKEN = {}
    try:
        value = run()
    finally:
        taken, _TAKEN = _TAKEN, None
    changes: dict[str, Any] = {}
    for attr in ("tools", "user_tools"):
        kit = getattr(environment, attr, None)
        if kit is None:
            continue
        others = {name: v for name, v in vars(kit).items() if name != "db"}
        fields, tables = {}, {}
        db = getattr(kit, "db", None)
        for name, table in (vars(db) if db is not None else {}).items():
            if not isinstance(table, SharedRecords):
                fields[name] = table
            elif id(table) in taken:
                keys = taken[id(table)][1]
                records = {k: dict.__getitem__(table, k) for k in keys if k in table}
                tables[name] = (records, [k for k in keys if k not in table])
        changes[attr] = (others, fields, tables)
    return value, changes


def apply_changes(environment: Any, changes: dict[str, Any]) -> None:
    """Make ``environment`` what a call worker's copy of it became (``changes`` from
    :func:`capture_changes` there); records set here are this side's own, as after a call."""
    for attr, (others, fields, tables) in changes.items():
        kit = getattr(environment, attr)
        for name, value in others.items():
            setattr(kit, name, value)
        db = getattr(kit, "db", None)
        for name, value in fields.items():
            vars(db)[name] = value
        for name, (records, deleted) in tables.items():
            table = vars(db)[name]
            for key in deleted:
                if key in table:
                    del table[key]
            for key, record in records.items():
                table[key] = record


def _tables(db: Any) -> list[str]:
    return [name for name, value in vars(db).items() if isinstance(value, dict)] if db is not None else []


def shares_records(environment: Any) -> bool:
    """Whether :func:`fork_environment` shares records for ``environment`` (else it deep-copies it)."""
    from .data import tau2

    base = tau2("tau2.environment.environment").Environment
    kits = [k for k in (environment.tools, environment.user_tools) if k is not None]
    return type(environment).sync_tools is base.sync_tools and any(_tables(getattr(k, "db", None)) for k in kits)


def changed_parts(environment: Any, touched: dict[tuple[str, str], set]) -> list[Any]:
    """What an episode may have changed in ``environment``'s databases, for a bound check that costs
    what the episode changed, not the whole database (airline's walks in ~0.4 s).

    For a database of :class:`SharedRecords` tables: its other fields and every record of a table
    that this episode has taken out or set since it began (whatever a tool can change); their keys
    are added to ``touched`` first, because a fork forgets which records a table owns. Call it before
    each fork of ``environment``, and carry ``touched`` into the branch. A database without such
    tables (telecom's, small) is returned whole.
    """
    parts: list[Any] = []
    for attr in ("tools", "user_tools"):
        db = getattr(getattr(environment, attr, None), "db", None)
        if db is None:
            continue
        fields = vars(db)
        if not any(isinstance(v, SharedRecords) for v in fields.values()):
            parts.append(db)
            continue
        for name, table in fields.items():
            if not isinstance(table, SharedRecords):
                parts.append(table)
                continue
            keys = touched.setdefault((attr, name), set())
            keys |= table._own
            parts.extend(dict.__getitem__(table, key) for key in keys if key in table)
    return parts


def _fork_db(db: Any) -> Any:
    clone = db.model_copy()  # shallow: the fields below are replaced
    fields = vars(clone)
    for name, value in vars(db).items():
        if isinstance(value, dict):
            table = value if isinstance(value, SharedRecords) else SharedRecords(value)
            vars(db)[name] = table
            fields[name] = table.share()
        else:
            fields[name] = copy.deepcopy(value)
    return clone


def _fork_toolkit(kit: Any) -> Any:
    clone = copy.copy(kit)
    for name, value in vars(kit).items():
        setattr(clone, name, _fork_db(value) if name == "db" and value is not None else copy.deepcopy(value))
    return clone


def fork_environment(environment: Any) -> Any:
    """An independent copy of a tau2 ``Environment`` sharing unchanged records with ``environment``."""
    if not shares_records(environment):
        return copy.deepcopy(environment)
    clone = copy.copy(environment)
    for attr in ("tools", "user_tools"):
        kit = getattr(environment, attr)
        if kit is not None:
            setattr(clone, attr, _fork_toolkit(kit))
    return clone


@lru_cache(maxsize=None)
def _pristine(domain: str) -> Any:
    from .data import new_environment

    return new_environment(domain)


def fresh_environment(domain: str) -> Any:
    """A new ``Environment`` of ``domain``: a fork of one built from the files once per process."""
    return fork_environment(_pristine(domain))


def _tool_kind(environment: Any, tool_call: Any) -> str | None:
    """tau2's ``ToolType`` value of the called tool (``read``, ``write``, ``generic``...), None if unknown."""
    kit = environment.user_tools if tool_call.requestor == "user" else environment.tools
    if kit is None:
        return None
    key = (type(kit), tool_call.name)
    if key not in _KINDS:  # a toolkit's tools are its class's methods: look each up once
        try:
            _KINDS[key] = kit.tool_type(tool_call.name).value if kit.has_tool(tool_call.name) else None
        except (AttributeError, KeyError, ValueError):
            _KINDS[key] = None
    return _KINDS[key]


_KINDS: dict[tuple[type, str], str | None] = {}


def _is_read_only(environment: Any, tool_call: Any) -> bool:
    """Whether tau2 declares the called tool read-only (then shared records are read in place)."""
    return _tool_kind(environment, tool_call) == "read"
