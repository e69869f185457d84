"""fast-downward's PDDL->SAS translations and textworld's parsed game logic, cached by content.

A new ALFWorld game costs a tatsu parse of its grammar and fast-downward translations of its PDDL
(``PddlEnv`` runs ``pddl2sas`` four times per load + reset). The results depend only on the game's
text and the engine versions, so they are kept on disk (``$TTG_ENVS_CACHE/alfworld/``); the
planner's translation is made only when a plan is first asked for. An entry is a zlib-compressed
pickle behind a header holding its key and sha256, rebuilt whenever header, key or checksum does
not match, and read as data only (:func:`load_data`: no function can be named by a forged entry;
textworld's ``EvalSymbol`` expressions must be text of the game's own grammar).
"""

from __future__ import annotations

import hashlib
import json
import os
import pickle
import tempfile
import threading
import warnings
import zlib
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

from ..._io import cache_root

#: Bump when what an entry holds changes.
CACHE_FORMAT = 1
_MAGIC = b"TTGALFW1"


def _engine_versions() -> str:
    versions = []
    for dist in ("textworld", "fast-downward-textworld", "alfworld", "TatSu"):
        try:
            versions.append(f"{dist}={metadata.version(dist)}")
        except metadata.PackageNotFoundError:
            versions.append(f"{dist}=none")
    return ";".join(versions) + f";format={CACHE_FORMAT}"


def cache_dir() -> Path:
    """Folder of the translation cache."""
    return cache_root() / "alfworld" / "translations"


@dataclass
class Translation:
    """What loading a game needs besides its JSON: the pickled ``GameLogic`` and the SAS task(s)."""

    key: str
    logic: bytes
    task: Any
    sas: str
    sas_replan: str | None = None
    #: How this translation was obtained: "memory", "disk" or "built" (tests and benchmarks read it).
    origin: str = field(default="built", compare=False)

    def new_logic(self) -> Any:
        """A fresh ``GameLogic`` (PddlState adds types to it, so every load gets its own copy)."""
        return load_data(self.logic)


#: What an entry may be built of: these builtins and the classes of these modules (no functions).
_DATA_BUILTINS = frozenset({"list", "dict", "set", "frozenset", "tuple", "bytes", "bytearray", "str", "int", "float", "complex", "bool"})
_DATA_MODULES = ("textworld.logic", "textworld.envs.pddl.logic", "textworld.envs.pddl.textgen")
_DATA_PACKAGES = ("fast_downward.translate.pddl.",)


class _DataUnpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        if module == "builtins" and name in _DATA_BUILTINS or module == "collections" and name in ("defaultdict", "OrderedDict"):
            return super().find_class(module, name)
        if module in _DATA_MODULES or module.startswith(_DATA_PACKAGES):
            found = super().find_class(module, name)
            if isinstance(found, type):
                return found
        raise pickle.UnpicklingError(f"a translation cache entry may not name {module}.{name}")


def _expressions_from(translation: Translation, game: dict[str, Any]) -> bool:
    """True when every expression textworld will ``eval`` (its grammar's ``EvalSymbol``) is text of
    the game's own grammar, so an entry can run no code the game file does not already hold."""
    grammar = game.get("grammar") or ""
    stack, seen = [translation.new_logic()], set()
    while stack:
        item = stack.pop()
        if id(item) in seen or isinstance(item, (str, bytes, int, float, type(None))):
            continue
        seen.add(id(item))
        if type(item).__name__ == "EvalSymbol" and not (isinstance(item.expression, str) and item.expression in grammar):
            return False
        if isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, (list, tuple, set, frozenset)):
            stack.extend(item)
        elif hasattr(item, "__dict__"):
            stack.extend(vars(item).values())
    return True


def load_data(blob: bytes) -> Any:
    """Unpickle ``blob`` allowing only the container types and logic classes entries are made of."""
    import io

    return _DataUnpickler(io.BytesIO(blob)).load()


def game_key(game: dict[str, Any]) -> str:
    """sha256 of the game's domain, problem and grammar plus the engine versions."""
    h = hashlib.sha256(_engine_versions().encode())
    for part in ("pddl_domain", "pddl_problem", "grammar"):
        text = game.get(part) or ""
        h.update(b"\0%d\0" % len(text.encode()))
        h.update(text.encode())
    return h.hexdigest()


# In-process memo (the disk entry is only read once per process and game).
_MEMORY: dict[str, Translation] = {}
_MEMORY_LIMIT = 64
_LOCK = threading.Lock()


def translation_for(game: dict[str, Any]) -> Translation:
    """The game's translation from memory, disk, or built now (then written to disk)."""
    key = game_key(game)
    with _LOCK:
        found = _MEMORY.get(key)
    if found is not None:
        found.origin = "memory"
        return found
    found = _read(key)
    if found is not None:
        try:  # the nested logic as data too, and only the game's own grammar code in it
            problem = None if _expressions_from(found, game) else "code not in the game's grammar"
        except Exception as exc:  # noqa: BLE001 - a forged or corrupt logic blob
            problem = f"{type(exc).__name__}: {exc}"
        if problem:
            warnings.warn(f"rebuilding corrupt ALFWorld translation cache entry {key}.bin: {problem}", stacklevel=2)
            _path(key).unlink(missing_ok=True)
            found = None
    if found is None:
        found = _build(key, game)
        _write(found)
    _remember(found)
    return found


def replan_sas(translation: Translation, game: dict[str, Any]) -> str:
    """The planner's optimized SAS task, translated on first use and then cached with the entry."""
    if translation.sas_replan is None:
        fast_downward = _fast_downward()
        _, translation.sas_replan = fast_downward.pddl2sas(game["pddl_domain"], game["pddl_problem"], optimize=True)
        _write(translation)
    return translation.sas_replan


def _remember(translation: Translation) -> None:
    with _LOCK:
        _MEMORY[translation.key] = translation
        while len(_MEMORY) > _MEMORY_LIMIT:
            _MEMORY.pop(next(iter(_MEMORY)))


def _fast_downward():
    from ..._optional import require

    return require("fast_downward", "alfworld")


def _build(key: str, game: dict[str, Any]) -> Translation:
    logic = build_logic(game["pddl_domain"], game["grammar"])
    task, sas = _fast_downward().pddl2sas(game["pddl_domain"], game["pddl_problem"])
    return Translation(key, pickle.dumps(logic, protocol=pickle.HIGHEST_PROTOCOL), task, sas, origin="built")


def build_logic(domain: str, grammar: str) -> Any:
    """textworld's ``GameLogic(domain, grammar)``, with each grammar rule parsed once per process.

    ``GameLogic`` parses the game's logic document, then every production rule's text; the rule
    texts of ALFWorld games are the same up to the task sentence, so a never-seen game mostly
    reuses parses (``textgen.parse_symbols``). The result is the same rules, actions and types.
    """
    from ..._optional import require
    from .textgen import _textgen, forget_last_parse, parse_symbols

    pddl_logic = require("textworld.envs.pddl.logic", "alfworld")
    textworld_logic = require("textworld.logic", "alfworld")
    model_types = require("textworld.envs.pddl.logic.model", "alfworld")

    class Converter(pddl_logic._ModelConverter):
        def walk_PddlDocumentNode(self, node):
            actions, rules = {}, {}
            for part in node.parts:
                if isinstance(part, model_types.ActionTypeNode):
                    action = self.walk(part)
                    actions[action.name.lower()] = action
                    lines = (line for line in action.grammar.split("\n") if not line.lstrip().startswith("#"))
                    rules.update(json.loads("\n".join(lines)))
                elif isinstance(part, model_types.ActionGrammarNode):
                    rules.update(json.loads(self._unescape_block(part.code)))
            csg = _textgen.ContextSensitiveGrammar()
            for name, productions in json.loads(json.dumps(rules)).items():
                for rule in productions:
                    csg.add_rule(
                        _textgen.ProductionRule(
                            lhs=name,
                            rhs=list(parse_symbols(rule["rhs"])),
                            weight=rule.get("weight", 1),
                            condition=rule.get("condition", ""),
                        )
                    )
            return actions, csg

    try:
        model = pddl_logic._PARSER.parse(grammar, rule_name="pddlStart")
    finally:
        forget_last_parse(pddl_logic._PARSER)
    actions, csg = Converter().walk(model)
    logic = pddl_logic.GameLogic.__new__(pddl_logic.GameLogic)
    logic.domain = domain
    logic.grammar = _textgen.ContextSensitiveGrammar()
    logic.actions = dict(actions)
    logic.types = textworld_logic.TypeHierarchy()
    logic.grammar.update(csg)
    return logic


def _path(key: str) -> Path:
    return cache_dir() / key[:2] / f"{key}.bin"


def _read(key: str) -> Translation | None:
    path = _path(key)
    try:
        blob = path.read_bytes()
    except OSError:
        return None
    try:
        header_len = int.from_bytes(blob[len(_MAGIC) : len(_MAGIC) + 4], "little")
        if not blob.startswith(_MAGIC) or header_len > len(blob):
            raise ValueError("bad magic or header length")
        start = len(_MAGIC) + 4
        header = json.loads(blob[start : start + header_len])
        payload = blob[start + header_len :]
        if header.get("key") != key or header.get("sha256") != hashlib.sha256(payload).hexdigest():
            raise ValueError("key or checksum mismatch")
        data = load_data(zlib.decompress(payload))
        return Translation(key, data["logic"], data["task"], data["sas"], data.get("sas_replan"), origin="disk")
    except Exception as exc:  # noqa: BLE001  (a torn, corrupt or foreign entry: rebuild it)
        warnings.warn(f"rebuilding corrupt ALFWorld translation cache entry {path.name}: {exc}", stacklevel=3)
        try:
            path.unlink()
        except OSError:
            pass
        return None


def _write(translation: Translation) -> None:
    payload = zlib.compress(
        pickle.dumps(
            {"logic": translation.logic, "task": translation.task, "sas": translation.sas, "sas_replan": translation.sas_replan},
            protocol=pickle.HIGHEST_PROTOCOL,
        ),
        6,
    )
    header = json.dumps({"key": translation.key, "sha256": hashlib.sha256(payload).hexdigest(), "versions": _engine_versions()}).encode()
    path = _path(translation.key)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".entry-", suffix=".tmp")
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(_MAGIC + len(header).to_bytes(4, "little") + header + payload)
            os.chmod(tmp, 0o644)
            os.replace(tmp, path)  # readers see the old entry or the new one, never half of one
        except BaseException:
            os.unlink(tmp)
            raise
    except OSError as exc:
        warnings.warn(f"could not cache an ALFWorld translation at {path}: {exc}", stacklevel=3)
