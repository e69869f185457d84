"""Module docstrings stay short and free of machine timings (design notes live in ARCHITECTURE.md
and in the docstrings of the classes and functions they describe; speed lives in benchmarks/)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "ttg_envs"
#: Longest module docstring, in lines.
MAX_LINES = 15
#: A number with a time unit: what drifts with the machine and its load.
TIMING = re.compile(r"\b\d+(?:[.,]\d+)?(?:-\d+(?:\.\d+)?)?\s*(?:ms|µs|s|sec|seconds|min|minutes|CPU-minutes|h|hours)\b")
SKIP: tuple[str, ...] = ()


def _module_docs() -> dict[str, str]:
    out = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE).as_posix()
        if "bundle/" in rel or rel.startswith(SKIP):
            continue
        doc = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8")), clean=False)
        if doc:
            out[rel] = doc
    return out


def test_module_docstrings_are_short():
    long = {rel: doc.count("\n") + 1 for rel, doc in _module_docs().items() if doc.count("\n") + 1 > MAX_LINES}
    assert long == {}


def test_module_docstrings_hold_no_timings():
    timed = {rel: TIMING.findall(doc) for rel, doc in _module_docs().items() if TIMING.search(doc)}
    assert timed == {}


def test_the_timing_pattern_catches_timings_and_nothing_else():
    assert TIMING.search("a step takes 25-45 ms here") and TIMING.search("(seed 0: 49 min wall)") and TIMING.search("0.2-0.5 s each")
    assert not TIMING.search("5 steps, sections 3.2 and E.4, 16 messages, (0, 1)s")


def test_architecture_stays_one_screen():
    assert len((ROOT / "ARCHITECTURE.md").read_text().splitlines()) <= 50
