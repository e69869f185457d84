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


def digest_snapshot(data: bytes) -> str:
    """:func:`digest` of a snapshot (bytes from :func:`snapshot` or :func:`from_files`)."""
    conn = sqlite3.connect(":memory:")
    try:
        conn.deserialize(data)
        return _digest(conn)
    finally:
        conn.close()


class SnapshotMemo:
    """:func:`from_files` and :func:`digest_snapshot` remembered by a BLAKE2b-256 hash of their
    input bytes (both are pure functions of them), for one env and its branches.

    Every step's state key copies the episode database out of the sandbox and digests it, and the
    trials of a guided step mostly leave the same files (a read-only call leaves the state's own),
    so each distinct database is parsed and dumped once and the others pay a hash of the bytes.
    Bounded: the ``size`` most recent entries, and at most ``max_bytes`` of snapshots.
    """

    def __init__(self, size: int = 64, max_bytes: int = 32 << 20) -> None:
        self.size, self.max_bytes = int(size), int(max_bytes)
        self._snapshots: OrderedDict[bytes, bytes] = OrderedDict()
        self._digests: OrderedDict[bytes, str] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()
        self.hits = self.misses = 0

    def from_files(self, main: bytes, wal: bytes | None = None, journal: bytes | None = None) -> bytes:
        """:func:`from_files` of these file bytes (errors are raised each time, never remembered)."""
        h = hashlib.blake2b(digest_size=32)
        for part in (main, wal, journal):  # each part's length first: no two inputs hash alike by their split
            h.update(b"-" if part is None else b"%d:" % len(part))
            h.update(part or b"")
        key = h.digest()
        hit = self._get(self._snapshots, key)
        if hit is not None:
            return hit
        data = from_files(main, wal, journal)
        with self._lock:
            if key not in self._snapshots:
                self._snapshots[key] = data
                self._bytes += len(data)
            while self._snapshots and (len(self._snapshots) > self.size or self._bytes > self.max_bytes):
                self._bytes -= len(self._snapshots.popitem(last=False)[1])
        return data

    def digest(self, data: bytes) -> str:
        """:func:`digest_snapshot` of ``data``."""
        key = hashlib.blake2b(data, digest_size=32).digest()
        hit = self._get(self._digests, key)
        if hit is not None:
            return hit
        out = digest_snapshot(data)
        with self._lock:
            self._digests[key] = out
            while len(self._digests) > 4 * self.size:
                self._digests.popitem(last=False)
        return out

    def _get(self, table: OrderedDict, key: bytes) -> Any:
        with self._lock:
            hit = table.get(key)
            if hit is not None:
                table.move_to_end(key)
                self.hits += 1
            else:
                self.misses += 1
            return hit


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
