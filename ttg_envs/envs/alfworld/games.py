"""An ALFWorld game dict from a bundled task line (runtime: what loading a bundled task needs, no generator)."""

from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import Any

from ..._optional import require

__all__ = ["ALFWORLD_DIR", "make_game"]

# Without the `alfworld` extra, importing this module (and so any bundled task list) raises the
# one-line MissingExtraError naming it.
ALFWORLD_DIR = Path(require("alfworld", "alfworld").__file__).resolve().parent


@cache
def _domain_text() -> str:
    return (ALFWORLD_DIR / "data" / "alfred.pddl").read_text()


@cache
def _grammar_text() -> str:
    return (ALFWORLD_DIR / "data" / "alfred.twl2").read_text()


def make_game(task: dict[str, Any]) -> dict[str, Any]:
    """The game dict ``PddlEnv.load`` accepts for one task line (domain, grammar with the task
    sentence in place of ``UNKNOWN GOAL``, problem, ``solvable``, ``walkthrough``)."""
    return {
        "pddl_domain": _domain_text(),
        "grammar": _grammar_text().replace("UNKNOWN GOAL", task["goal"]),
        "pddl_problem": task["pddl_problem"],
        "solvable": True,
        "walkthrough": list(task["walkthrough"]),
    }
