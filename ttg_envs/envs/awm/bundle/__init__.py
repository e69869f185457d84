"""Builder of the bundled AWM scenarios: project-made environments in the AgentWorldModel-1K format.

The AgentWorldModel-1K files live on the Hugging Face hub, which is closed here, so the project
writes its own scenarios in exactly their format. Each scenario is two source files kept as code:
``apps/<name>.py`` (the FastAPI app, stored verbatim as ``full_code``) and ``scenarios/<name>.py``
(description, table DDL, sample rows, and per task: text, verifier function, gold tool calls, a
final answer and a wrong call sequence). The builder writes the seven ``gen_*.jsonl`` files the
real dataset has, the API spec read from the app's routes, and ``gold_calls.jsonl`` (the
project's own file: gold and wrong call sequences per task).

Rebuild (byte-identical)::

    python -m ttg_envs.envs.awm.bundle [--out DIR]
"""

from __future__ import annotations

import argparse
import hashlib
import importlib
import importlib.util
import inspect
import json
import re
import sys
import textwrap
from collections.abc import Sequence
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
DATA_DIR = HERE.parent / "data"
#: The bundled scenarios, one per domain.
SCENARIOS: tuple[str, ...] = (
    "calendar_1",
    "crm_1",
    "food_delivery_1",
    "helpdesk_1",
    "inventory_1",
    "library_1",
    "messaging_1",
    "project_tracker_1",
)
_TABLE_RE = re.compile(r"\b(?:FROM|JOIN|INTO|UPDATE)\s+([A-Za-z_]\w*)", re.IGNORECASE)


def sql_literal(value: Any) -> str:
    """``value`` as an SQLite literal."""
    if value is None:
        return "NULL"
    if isinstance(value, bool):
        return str(int(value))
    if isinstance(value, (int, float)):
        return repr(value)
    return "'" + str(value).replace("'", "''") + "'"


def insert_statements(table: str, columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> list[str]:
    """One ``INSERT`` statement per row, as AWM's sample data holds them."""
    cols = ", ".join(columns)
    return [f"INSERT INTO {table} ({cols}) VALUES ({', '.join(sql_literal(v) for v in row)});" for row in rows]


def verifier_code(fn) -> str:
    """A verifier function's source renamed to AWM's ``verify_task_completion``."""
    source = textwrap.dedent(inspect.getsource(fn))
    return re.sub(r"^def \w+\(", "def verify_task_completion(", source, count=1)


def _load_app(name: str):
    spec = importlib.util.spec_from_file_location(f"_awm_bundle_app_{name}", HERE / "apps" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def api_spec(name: str) -> dict[str, Any]:
    """AWM's ``api_spec`` (groups of endpoints) read from the app's routes and OpenAPI schema."""
    module = _load_app(name)
    openapi = module.app.openapi()
    endpoints = {route.operation_id: route.endpoint for route in module.app.routes if getattr(route, "operation_id", None)}
    components = (openapi.get("components") or {}).get("schemas") or {}
    groups: dict[str, list[dict[str, Any]]] = {}
    for path, item in openapi["paths"].items():
        for method, op in item.items():
            params: dict[str, Any] = {}
            for p in op.get("parameters", []):
                schema = p.get("schema", {})
                kind = schema.get("type") or next((s.get("type") for s in schema.get("anyOf", []) if s.get("type") != "null"), "string")
                params[p["name"]] = {
                    "type": kind,
                    "param_type": p["in"],
                    "required": bool(p.get("required")),
                    "description": p.get("description", ""),
                }
            body = ((op.get("requestBody") or {}).get("content") or {}).get("application/json", {}).get("schema", {})
            model = components.get(body.get("$ref", "").rsplit("/", 1)[-1], {})
            for field, schema in (model.get("properties") or {}).items():
                params[field] = {
                    "type": schema.get("type", "string"),
                    "param_type": "body",
                    "required": field in (model.get("required") or []),
                    "description": "",
                }
            tables = sorted({t for t in _TABLE_RE.findall(inspect.getsource(endpoints[op["operationId"]]))})
            endpoint = {
                "path": path,
                "method": method.upper(),
                "summary": op.get("summary", ""),
                "description": op.get("description", ""),
                "operation_id": op["operationId"],
                "tags": op.get("tags", []),
                "request_params": params,
                "response": {"description": op["responses"].get("200", {}).get("description", "")},
                "required_tables": tables,
            }
            groups.setdefault((op.get("tags") or ["default"])[0], []).append(endpoint)
    return {"api_groups": [{"group_name": group, "endpoints": eps} for group, eps in groups.items()]}


def build_rows() -> dict[str, list[dict[str, Any]]]:
    """Every file's rows, scenario by scenario."""
    files: dict[str, list[dict[str, Any]]] = {
        name: []
        for name in (
            "gen_scenario.jsonl",
            "gen_tasks.jsonl",
            "gen_db.jsonl",
            "gen_sample.jsonl",
            "gen_spec.jsonl",
            "gen_envs.jsonl",
            "gen_verifier.pure_code.jsonl",
            "gold_calls.jsonl",
        )
    }
    for name in SCENARIOS:
        s = importlib.import_module(f"{__name__}.scenarios.{name}")
        db_path = f"./outputs/databases/{name}.db"
        files["gen_scenario.jsonl"].append({"name": name, "description": s.DESCRIPTION})
        files["gen_tasks.jsonl"].append({"scenario": name, "tasks": [t["task"] for t in s.TASKS]})
        files["gen_db.jsonl"].append(
            {
                "scenario": name,
                "db_path": db_path,
                "db_schema": {"tables": [{"name": table, "ddl": ddl, "indexes": indexes} for table, ddl, indexes in s.TABLES]},
            }
        )
        tables = [
            {"table_name": table, "reasoning": "", "insert_statements": insert_statements(table, cols, rows)}
            for table, (cols, rows) in s.SAMPLE.items()
        ]
        files["gen_sample.jsonl"].append(
            {
                "scenario": name,
                "tables_count": len(tables),
                "inserts_count": sum(len(t["insert_statements"]) for t in tables),
                "sample_data": {"tables": tables},
            }
        )
        files["gen_spec.jsonl"].append({"scenario": name, "api_spec": api_spec(name)})
        files["gen_envs.jsonl"].append({"scenario": name, "db_path": db_path, "full_code": (HERE / "apps" / f"{name}.py").read_text()})
        for index, task in enumerate(s.TASKS):
            files["gen_verifier.pure_code.jsonl"].append(
                {
                    "scenario": name,
                    "task_idx": index,
                    "task": task["task"],
                    "verification": {"code": verifier_code(task["verify"]), "raw_response": ""},
                }
            )
            files["gold_calls.jsonl"].append(
                {
                    "scenario": name,
                    "task_idx": index,
                    "calls": [{"name": n, "arguments": a} for n, a in task["gold"]],
                    "final_answer": task["answer"],
                    "wrong_calls": [{"name": n, "arguments": a} for n, a in task["wrong"]],
                }
            )
    return files


def build(out: Path = DATA_DIR) -> dict[str, str]:
    """Write the bundle into ``out``; return each file's sha256."""
    out.mkdir(parents=True, exist_ok=True)
    hashes = {}
    for name, rows in build_rows().items():
        data = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows).encode("utf-8")
        (out / name).write_bytes(data)
        hashes[name] = hashlib.sha256(data).hexdigest()
    return hashes


def main(argv: Sequence[str] | None = None) -> int:
    """CLI: write the bundle."""
    parser = argparse.ArgumentParser(description="Build the bundled AWM-format scenarios.")
    parser.add_argument("--out", type=Path, default=DATA_DIR)
    args = parser.parse_args(argv)
    for name, sha in build(args.out).items():
        print(f"{sha[:16]}  {name}", file=sys.stdout)
    return 0
