"""Host side: an episode's SQLite database: built from schema + sample rows, snapshotted with SQLite's backup API.

The schema and sample rows are SQL written by a model. They run under an authorizer that refuses
``ATTACH``/``DETACH`` (which could create or read other files) and extension loading, so building
a database touches only its own file.
"""

from __future__ import annotations

import hashlib
import sqlite3
import threading
from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

_DENIED = {sqlite3.SQLITE_ATTACH, sqlite3.SQLITE_DETACH}


def _authorizer(action: int, *args: Any) -> int:
    return sqlite3.SQLITE_DENY if action in _DENIED else sqlite3.SQLITE_OK


def confined_connect(path: str | Path, **kwargs: Any) -> sqlite3.Connection:
    """A connection to ``path`` that cannot attach other database files."""
    conn = sqlite3.connect(str(path), **kwargs)
    conn.set_authorizer(_authorizer)
    return conn


@dataclass(frozen=True)
class BuildReport:
    """What building a scenario database did: statements run and statements SQLite rejected."""

    executed: int
    failed: tuple[tuple[str, str], ...]


def build_database(path: str | Path, tables: Iterable[dict[str, Any]], inserts: Iterable[str]) -> BuildReport:
    """Create ``path`` from the tables' DDL and indexes, then the sample inserts (AWM's db reset).

    A statement SQLite rejects (a failed constraint, a typo in model-written SQL) is skipped and
    reported; the database is the one AWM's own reset would leave.
    """
    path = Path(path)
    if path.exists():
        path.unlink()
    executed, failed = 0, []
    conn = confined_connect(path, isolation_level=None)
    try:
        tables = list(tables)
        statements = [t.get("ddl") or "" for t in tables] + [i for t in tables for i in t.get("indexes") or []]
        for sql in [s for s in [*statements, *inserts] if s.strip()]:
            try:
                conn.executescript(sql)
                executed += 1
            except sqlite3.Error as exc:
                failed.append((sql[:200], str(exc)))
    finally:
        conn.close()
    return BuildReport(executed, tuple(failed))


def snapshot(path: str | Path) -> bytes:
    """The whole database at ``path`` as bytes (backup API into memory, then serialise)."""
    src = sqlite3.connect(f"file:{Path(path)}?mode=ro", uri=True)
    mem = sqlite3.connect(":memory:")
    try:
        src.backup(mem)
        return mem.serialize()
    finally:
        src.close()
        mem.close()


def restore(path: str | Path, data: bytes) -> None:
    """Make the database file at ``path`` equal to the snapshot ``data`` (backup API onto the file)."""
    mem = sqlite3.connect(":memory:")
    dst = sqlite3.connect(str(path))
    try:
        # Episode files are scratch copies: no need to wait for the disk.
        dst.execute("PRAGMA synchronous = OFF")
        mem.deserialize(data)
        mem.backup(dst)
    finally:
        mem.close()
        dst.close()


def from_files(main: bytes, wal: bytes | None = None, journal: bytes | None = None) -> bytes:
    """A snapshot of a database given as the bytes of its files (copied out of an untrusted folder).

    The files are written to a private folder and opened there, so a WAL or a hot journal is
    applied as SQLite would; the schema is not trusted (``trusted_schema = OFF``). Raises
    :class:`sqlite3.DatabaseError` on a file that is not a database.
    """
    from .host_folder import scratch_folder

    with scratch_folder() as scratch:
        target = scratch / "copy.db"
        target.write_bytes(main)
        for suffix, data in (("-wal", wal), ("-journal", journal)):
            if data is not None:
                (scratch / f"copy.db{suffix}").write_bytes(data)
        src = confined_connect(target)
        mem = sqlite3.connect(":memory:")
        try:
            src.execute("PRAGMA trusted_schema = OFF")
            src.backup(mem)
            return mem.serialize()
        finally:
            src.close()
            mem.close()


#: Snapshot digests by a hash of the snapshot's bytes, most recent last (see :func:`digest_snapshot`).
_SNAPSHOT_DIGESTS: OrderedDict[bytes, str] = OrderedDict()
_SNAPSHOT_DIGESTS_SIZE = 256
_SNAPSHOT_DIGESTS_LOCK = threading.Lock()


def digest_snapshot(data: bytes) -> str:
    """:func:`digest` of a snapshot (bytes from :func:`snapshot` or :func:`from_files`).

    Remembered by a BLAKE2b-256 hash of the bytes (a pure function of them): every step's state key
    digests the database it leaves, and the trials of a guided step mostly leave the same bytes
    (each read-only call leaves the state's own database), so the dump runs once per distinct
    database, and hashing the bytes is all the others pay.
    """
    key = hashlib.blake2b(data, digest_size=32).digest()
    with _SNAPSHOT_DIGESTS_LOCK:
        hit = _SNAPSHOT_DIGESTS.get(key)
        if hit is not None:
            _SNAPSHOT_DIGESTS.move_to_end(key)
            return hit
    conn = sqlite3.connect(":memory:")
    try:
        conn.deserialize(data)
        out = _digest(conn)
    finally:
        conn.close()
    with _SNAPSHOT_DIGESTS_LOCK:
        _SNAPSHOT_DIGESTS[key] = out
        while len(_SNAPSHOT_DIGESTS) > _SNAPSHOT_DIGESTS_SIZE:
            _SNAPSHOT_DIGESTS.popitem(last=False)
    return out


def _digest(conn: sqlite3.Connection) -> str:
    conn.execute("PRAGMA trusted_schema = OFF")
    h = hashlib.sha256()
    for line in conn.iterdump():
        h.update(line.encode("utf-8", "surrogatepass") + b"\n")
    return h.hexdigest()


def digest(path: str | Path) -> str:
    """A hash of the database's logical content (schema and rows, in SQLite's dump order)."""
    conn = sqlite3.connect(f"file:{Path(path)}?mode=ro", uri=True)
    try:
        return _digest(conn)
    finally:
        conn.close()
