"""The package's layers import only downwards, and no two modules import each other.

Every ``import`` in ``ttg_envs`` counts, lazy ones inside functions included (they run too).
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "ttg_envs"

#: Lowest first. A module may import its own unit and the units of lower layers; units that share
#: a layer do not import each other. ``ttg_envs`` itself (the package root) registers the envs.
#: A unit is a top-level module or package, or a module of one named here (``tools.env``: the
#: ``ToolEnv`` base, a ``TextEnv``, above ``core``, which reads ReAct parsing from ``tools``).
LAYERS: tuple[tuple[str, ...], ...] = (
    ("_optional", "_io", "info_fields", "bars", "credit", "registry", "cli_args", "tools"),
    ("core",),
    ("tools.env", "tokenization"),
    ("model_spec", "_vllm_engine", "chat_client"),
    ("meters", "retrieval"),
    ("envs",),
    ("__init__",),
    ("wrappers", "datagen"),
    ("agents", "serve"),
    ("runner",),
    ("training",),
    ("eval",),
    ("cli",),
)
LAYER_OF = {unit: i for i, units in enumerate(LAYERS) for unit in units}


def _unit(module: str) -> str:
    parts = module.split(".")
    if ".".join(parts[1:3]) in LAYER_OF:
        return ".".join(parts[1:3])
    return parts[1] if len(parts) > 1 else "__init__"


def _imports(path: Path, root: Path) -> list[tuple[int, str]]:
    """(line, absolute module) of every ``ttg_envs`` import in ``path`` (a file under ``root``).

    ``from x import name`` imports the module ``x.name`` when there is one, else ``x``.
    """
    package = list(path.relative_to(root.parent).with_suffix("").parts[:-1])
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - node.level + 1]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            targets = [f"{module}.{a.name}" if _is_module(root, f"{module}.{a.name}") else module for a in node.names]
            found += [(node.lineno, t) for t in targets]
    return [(line, m) for line, m in found if m == "ttg_envs" or m.startswith("ttg_envs.")]


def _is_module(root: Path, name: str) -> bool:
    path = root.parent.joinpath(*name.split("."))
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


def _modules(root: Path) -> dict[str, Path]:
    """Module name -> file, for the library's modules (not the AWM app code run in the sandbox)."""
    out = {}
    for path in sorted(root.rglob("*.py")):
        parts = list(path.relative_to(root.parent).with_suffix("").parts)
        if "bundle" not in parts:
            out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return out


def backward_imports(root: Path = PACKAGE) -> list[str]:
    """``file:line: unit (layer) imports module (layer)`` for each import that does not go down."""
    bad = []
    for name, path in _modules(root).items():
        rel = path.relative_to(root.parent)
        here = _unit(name) if path.name != "__init__.py" or "." in name else "__init__"
        assert here in LAYER_OF, f"{rel}: unit {here!r} is in no layer of LAYERS"
        for line, module in _imports(path, root):
            there = _unit(module)
            assert there in LAYER_OF, f"{rel}:{line}: imports {module}, whose unit {there!r} is in no layer"
            if path.name == "__init__.py" and module.startswith(f"{name}."):
                continue  # a package re-exporting its own modules
            if there != here and LAYER_OF[there] >= LAYER_OF[here]:
                bad.append(f"{rel}:{line}: {here} (layer {LAYER_OF[here]}) imports {module} (layer {LAYER_OF[there]})")
    return bad


def import_cycles(root: Path = PACKAGE) -> list[list[str]]:
    """Groups of modules that import each other, directly or through others (package ``__init__``
    files left out: a package re-exporting its children is no cycle)."""
    modules = _modules(root)
    packages = {name for name, path in modules.items() if path.name == "__init__.py"}
    graph = {
        name: {m for _, m in _imports(path, root) if m in modules and m not in packages and m != name}
        for name, path in modules.items()
        if name not in packages
    }
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    cycles = []

    def visit(v: str) -> None:  # Tarjan's strongly connected components
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while not group or group[-1] != v:
                group.append(stack.pop())
            if len(group) > 1:
                cycles.append(sorted(group))

    for v in graph:
        if v not in index:
            visit(v)
    return cycles


def test_no_import_goes_up_a_layer():
    assert backward_imports() == []


def test_no_two_modules_import_each_other():
    assert import_cycles() == []


def test_the_checks_catch_a_backward_import_and_a_cycle(tmp_path):
    fake = tmp_path / "ttg_envs"
    (fake / "meters").mkdir(parents=True)
    (fake / "__init__.py").write_text("")
    (fake / "meters" / "__init__.py").write_text("")
    (fake / "core.py").write_text("from .training import trainer\n")
    (fake / "meters" / "answer.py").write_text("from .base import Estimate\n")
    (fake / "meters" / "base.py").write_text("def f():\n    from .answer import parse_answer\n")
    (fake / "training.py").write_text("")
    (fake / "tools").mkdir()
    (fake / "tools" / "__init__.py").write_text("from .env import ToolEnv\n")
    (fake / "tools" / "env.py").write_text("")
    (fake / "tools" / "parsing.py").write_text("from .env import ToolEnv\n")
    assert backward_imports(fake) == [
        "ttg_envs/core.py:1: core (layer 1) imports ttg_envs.training (layer 10)",
        "ttg_envs/tools/parsing.py:1: tools (layer 0) imports ttg_envs.tools.env (layer 2)",
    ]
    assert import_cycles(fake) == [["ttg_envs.meters.answer", "ttg_envs.meters.base"]]
