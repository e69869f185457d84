"""Read the AgentWorldModel-1K files (Snowflake/AgentWorldModel-1K) directly, without ``agent-world-model``.

A dataset folder holds JSONL files joined by scenario name (never by line number):

- ``gen_scenario.jsonl``: ``{"name", "description"}``;
- ``gen_tasks.jsonl``: ``{"scenario", "tasks": [str, ...]}``;
- ``gen_db.jsonl``: ``{"scenario", "db_path", "db_schema": {"tables": [{"name", "ddl", "indexes"}]}}``;
- ``gen_sample.jsonl``: ``{"scenario", "sample_data": {"tables": [{"table_name", "insert_statements"}]}}``;
- ``gen_spec.jsonl``: ``{"scenario", "api_spec": {"api_groups": [{"group_name", "endpoints": [...]}]}}``;
- ``gen_envs.jsonl``: ``{"scenario", "db_path", "full_code"}`` (a FastAPI app over the SQLite database);
- ``gen_verifier.pure_code.jsonl``: ``{"scenario", "task_idx", "task", "verification": {"code"}}`` whose
  code defines ``verify_task_completion(initial_db_path, final_db_path, final_answer) -> {"result": ...}``.

Duplicate verifier rows: the first one wins, as in AWM's own helper. Files may be gzipped.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..._io import read_jsonl

#: The files a scenario needs, by role.
FILES: dict[str, str] = {
    "scenarios": "gen_scenario.jsonl",
    "tasks": "gen_tasks.jsonl",
    "db": "gen_db.jsonl",
    "sample": "gen_sample.jsonl",
    "spec": "gen_spec.jsonl",
    "envs": "gen_envs.jsonl",
    "verifiers": "gen_verifier.pure_code.jsonl",
}
OPTIONAL = {"scenarios", "spec"}


@dataclass(frozen=True)
class Scenario:
    """One AWM environment: tasks, database schema and sample rows, API spec, app code, verifiers."""

    name: str
    description: str
    tasks: tuple[str, ...]
    tables: tuple[dict[str, Any], ...]
    inserts: tuple[str, ...]
    env_code: str
    api_spec: dict[str, Any] = field(default_factory=dict, compare=False)
    verifiers: dict[int, str] = field(default_factory=dict, compare=False)


def _path(folder: Path, name: str) -> Path | None:
    for candidate in (folder / name, folder / f"{name}.gz"):
        if candidate.exists():
            return candidate
    return None


def _rows(folder: Path, role: str, wanted: set[str] | None) -> Iterator[dict[str, Any]]:
    path = _path(folder, FILES[role])
    if path is None:
        if role in OPTIONAL:
            return
        raise FileNotFoundError(f"AWM dataset file {FILES[role]} is missing in {folder}")
    key = "name" if role == "scenarios" else "scenario"
    for row in read_jsonl(path):
        if not isinstance(row, dict) or key not in row:
            raise ValueError(f"{path.name}: a row has no {key!r} field")
        if wanted is None or row[key] in wanted:
            yield row


def load_scenarios(folder: str | os.PathLike, scenarios: Iterable[str] | None = None) -> list[Scenario]:
    """The scenarios of an AWM dataset folder (all, or only those named), sorted by name.

    A scenario must appear in the tasks, db, sample and envs files; one missing from any of them
    is an error naming the file.
    """
    folder = Path(folder)
    if not folder.is_dir():
        raise FileNotFoundError(f"no AWM dataset folder at {folder}")
    wanted = set(scenarios) if scenarios is not None else None
    tasks = {r["scenario"]: tuple(str(t) for t in r.get("tasks") or ()) for r in _rows(folder, "tasks", wanted)}
    names = sorted(tasks) if wanted is None else sorted(wanted)
    missing = sorted(set(names) - set(tasks))
    if missing:
        raise KeyError(f"scenarios not in {FILES['tasks']}: {missing[:5]}")
    wanted = set(names)
    descriptions = {r["name"]: str(r.get("description", "")) for r in _rows(folder, "scenarios", wanted)}
    tables = {r["scenario"]: tuple((r.get("db_schema") or {}).get("tables") or ()) for r in _rows(folder, "db", wanted)}
    inserts = {
        r["scenario"]: tuple(s for t in (r.get("sample_data") or {}).get("tables") or () for s in t.get("insert_statements") or ())
        for r in _rows(folder, "sample", wanted)
    }
    specs = {r["scenario"]: r.get("api_spec") or {} for r in _rows(folder, "spec", wanted)}
    code = {r["scenario"]: str(r["full_code"]) for r in _rows(folder, "envs", wanted)}
    verifiers: dict[str, dict[int, str]] = {name: {} for name in names}
    for r in _rows(folder, "verifiers", wanted):
        verifiers[r["scenario"]].setdefault(int(r["task_idx"]), str((r.get("verification") or {}).get("code", "")))
    out = []
    for name in names:
        for role, table in (("db", tables), ("sample", inserts), ("envs", code)):
            if name not in table:
                raise KeyError(f"scenario {name!r} is missing from {FILES[role]}")
        out.append(
            Scenario(
                name, descriptions.get(name, ""), tasks[name], tables[name], inserts[name], code[name], specs.get(name, {}), verifiers[name]
            )
        )
    return out
