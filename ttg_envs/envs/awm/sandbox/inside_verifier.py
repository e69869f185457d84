"""Inside the sandbox: one AWM verifier run on copies of the initial and final databases."""

from __future__ import annotations

import inspect
import json

from . import inside_guard as guard


def verify(conn, folder: str, code: str, initial: str, final: str, final_answer: str | None, limits: dict[str, int] | None = None) -> None:
    """Run one AWM verifier on copies of the initial and final databases; reply with its result."""
    guard.confine(folder, {initial, final}, limits)
    guard.confine_sqlite(None)
    try:
        namespace = guard.namespace("awm_verifier")
        exec(compile(code, "<awm_verifier>", "exec"), namespace)
        fn = namespace.get("verify_task_completion")
        if not callable(fn):
            fn = next((v for k, v in namespace.items() if k.startswith("verify_") and callable(v)), None)
        if fn is None:
            raise LookupError("the verifier code defines no verify_task_completion function")
        params = inspect.signature(fn).parameters.values()
        takes_answer = len(params) >= 3 or any(p.kind == p.VAR_POSITIONAL for p in params)
        result = fn(initial, final, final_answer) if takes_answer else fn(initial, final)
        guard.send(conn, {"ok": True, "result": json.loads(json.dumps(result, default=repr))})
    except BaseException as exc:
        guard.send(conn, {"ok": False, "error": f"the verifier failed: {guard.describe(exc)}"})
