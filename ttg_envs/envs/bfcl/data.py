"""BFCL test entries from the ``bfcl-eval`` package: categories, report groups, tools and ground truth.

Entries are read with bfcl-eval's own loaders (``load_dataset_entry``: the function docs the model
sees, with the language hints for Java/JavaScript, and the multi-turn docs per involved class with
held-out functions removed; ``load_ground_truth_entry``). The checker docs are the un-hinted ones,
as bfcl-eval's evaluator uses. Tasks are sorted with bfcl-eval's ``sort_key`` (category, then
numeric index), so task ``i`` is the same entry on every machine.
"""

from __future__ import annotations

import importlib.util
import os
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

from ..._optional import MissingExtraError, require
from ...tools import Tool

#: The paper's four report groups (appendix A: 1,150 / 1,351 / 800 / 1,122 cases).
GROUPS: dict[str, tuple[str, ...]] = {
    "non_live": ("simple_python", "simple_java", "simple_javascript", "multiple", "parallel", "parallel_multiple"),
    "live": ("live_simple", "live_multiple", "live_parallel", "live_parallel_multiple"),
    "multi_turn": ("multi_turn_base", "multi_turn_miss_func", "multi_turn_miss_param", "multi_turn_long_context"),
    "hallucination": ("irrelevance", "live_irrelevance"),
}
#: Every category this env serves: the groups' categories plus ``live_relevance``.
CATEGORIES: tuple[str, ...] = tuple(c for cats in GROUPS.values() for c in cats) + ("live_relevance",)
GROUP_OF: dict[str, str] = {c: g for g, cats in GROUPS.items() for c in cats} | {"live_relevance": "relevance"}


#: How to install bfcl-eval: its declared dependencies pull a CUDA torch, pinned numpy and every provider SDK.
INSTALL_HINT = "pip install --no-deps 'bfcl-eval==2026.3.23' && pip install 'ttg-envs[bfcl]'"


def bfcl_module(name: str):
    """Import a bfcl-eval module, or raise :class:`MissingExtraError` saying how to install bfcl-eval."""
    if importlib.util.find_spec("bfcl_eval") is None:
        raise MissingExtraError(f"bfcl-eval is not installed; install it without its dependencies: {INSTALL_HINT}")
    return require(name, "bfcl")


def bfcl():
    """bfcl-eval's ``utils`` module (entry loaders), imported with its scratch folders under the ttg cache.

    Importing it creates ``result/``, ``score/`` and ``.file_locks/`` under ``$BFCL_PROJECT_ROOT``
    (default: next to site-packages); this points that at ``~/.cache/ttg_envs/bfcl`` unless set.
    """
    cache = Path(os.environ.get("TTG_ENVS_CACHE") or Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "ttg_envs")
    os.environ.setdefault("BFCL_PROJECT_ROOT", str(cache / "bfcl"))
    return bfcl_module("bfcl_eval.utils")


def resolve_categories(names: str | Iterable[str]) -> list[str]:
    """Category names from category or group names (``all`` = the four groups), in canonical order."""
    wanted = [names] if isinstance(names, str) else list(names)
    chosen: set[str] = set()
    for name in wanted:
        if name == "all":
            chosen.update(c for cats in GROUPS.values() for c in cats)
        elif name in GROUPS:
            chosen.update(GROUPS[name])
        elif name in CATEGORIES:
            chosen.add(name)
        else:
            raise ValueError(f"unknown BFCL category or group {name!r}; groups: {sorted(GROUPS)} + 'all'; categories: {list(CATEGORIES)}")
    if not chosen:
        raise ValueError("no BFCL category selected")
    return [c for c in CATEGORIES if c in chosen]


@dataclass(frozen=True)
class BFCLTask:
    """One BFCL entry: the prompt turns, the tools shown, the checker's docs and the ground truth."""

    id: str
    category: str
    entry: Mapping[str, Any] = field(repr=False)
    checker_functions: Sequence[Mapping[str, Any]] = field(repr=False)
    ground_truth: Any = field(repr=False)

    @property
    def group(self) -> str:
        """The report group (``non_live``, ``live``, ``multi_turn``, ``hallucination``, ``relevance``)."""
        return GROUP_OF[self.category]

    @property
    def multi_turn(self) -> bool:
        """True for the multi-turn categories (executed on backends)."""
        return self.category.startswith("multi_turn")

    @property
    def turns(self) -> list[list[dict[str, Any]]]:
        """The user turns: a list of chat messages per turn (single-turn entries have one)."""
        return self.entry["question"]

    @property
    def held_out(self) -> dict[int, list[Mapping[str, Any]]]:
        """miss_func: function docs withheld until the given turn index."""
        return {int(k): v for k, v in (self.entry.get("missed_function") or {}).items()}

    @property
    def functions(self) -> list[Mapping[str, Any]]:
        """The function docs shown from the start (held-out ones excluded)."""
        return self.entry["function"]

    def info(self) -> dict[str, Any]:
        """The ``info["task"]`` dict."""
        return {"id": self.id, "type": self.category, "split": self.group, "source": "bfcl-eval", "turns": len(self.turns)}


def load_tasks(categories: str | Iterable[str] = "all") -> list[BFCLTask]:
    """The sorted tasks of the given categories or groups."""
    tasks = [t for c in resolve_categories(categories) for t in _category_tasks(c)]
    key = bfcl().sort_key
    return sorted(tasks, key=lambda t: key({"id": t.id}))


@lru_cache(maxsize=None)
def _category_tasks(category: str) -> tuple[BFCLTask, ...]:
    utils = bfcl()
    shown = utils.load_dataset_entry(category, include_prereq=False)
    plain = {e["id"]: e["function"] for e in utils.load_dataset_entry(category, include_prereq=False, include_language_specific_hint=False)}
    truth: dict[str, Any] = {}
    if "relevance" not in category:
        truth = {e["id"]: e["ground_truth"] for e in utils.load_ground_truth_entry(category)}
    return tuple(BFCLTask(e["id"], category, e, plain[e["id"]], truth.get(e["id"])) for e in shown)


def to_tool(doc: Mapping[str, Any], *, keep_dots: bool = False) -> Tool:
    """A BFCL function doc as an OpenAI-format tool.

    Types map with bfcl-eval's ``GORILLA_TO_OPENAPI`` (``dict`` -> ``object``, ``float`` -> ``number``,
    ``tuple`` -> ``array``...); ``any`` keeps no type, so any JSON value is accepted. Dots in names
    become ``_`` as bfcl-eval does for OpenAI-style function-calling models (OpenAI names allow no
    dots) unless ``keep_dots``: bfcl-eval shows local models (prompting and Qwen-FC) the doc's names.
    """
    params = dict(doc.get("parameters") or {})
    params = _convert(params) if params else {"type": "object", "properties": {}}
    params["type"] = "object"
    return Tool(doc["name"] if keep_dots else tool_name(doc["name"]), doc.get("description", ""), params)


def tool_name(name: str) -> str:
    """The tool name a BFCL function is exposed under (dots replaced by underscores)."""
    return name.replace(".", "_")


def _convert(schema: Mapping[str, Any]) -> dict[str, Any]:
    mapping = bfcl_module("bfcl_eval.constants.type_mappings").GORILLA_TO_OPENAPI
    out = dict(schema)
    kind = out.pop("type", None)
    if isinstance(kind, str) and kind.lower() != "any":
        out["type"] = mapping.get(kind, "string")
    if isinstance(out.get("properties"), Mapping):
        out["properties"] = {k: _convert(v) if isinstance(v, Mapping) else v for k, v in out["properties"].items()}
    if isinstance(out.get("items"), Mapping):
        out["items"] = _convert(out["items"])
    return out
