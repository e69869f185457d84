"""No library function below ``cli/`` takes or builds an ``argparse.Namespace``: entry points take typed
config dataclasses, and the CLI maps its flags onto them (``cli/configs.py:from_args``).

A module's own ``main(argv)`` (a build tool's or server's command line) may parse its argv; nothing
else parses, builds or receives a ``Namespace``. Checked with ``ast``, as ``test_layers.py`` checks imports.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "ttg_envs"


def _mentions_namespace(node: ast.AST | None) -> bool:
    if node is None:
        return False
    text = ast.unparse(node)
    return "Namespace" in text and "SimpleNamespace" not in text


def namespace_uses(root: Path = PACKAGE) -> list[str]:
    """``file:line: what`` for each Namespace parameter, construction or ``parse_args`` outside ``main``."""
    found = []
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root.parent)
        if rel.parts[1] == "cli":
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for func in [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]:
            params = func.args.posonlyargs + func.args.args + func.args.kwonlyargs
            for arg in params:
                if _mentions_namespace(arg.annotation):
                    found.append(f"{rel}:{arg.lineno}: {func.name}() takes a Namespace ({arg.arg})")
                elif arg.arg == "args" and (arg.annotation is None or ast.unparse(arg.annotation) == "Any"):
                    found.append(f"{rel}:{arg.lineno}: {func.name}() takes untyped args")
            if func.name != "main":
                for call in [n for n in ast.walk(func) if isinstance(n, ast.Call)]:
                    name = ast.unparse(call.func)
                    if name.endswith("parse_args") or name.endswith("parse_known_args"):
                        found.append(f"{rel}:{call.lineno}: {func.name}() parses a command line")
        for call in [n for n in ast.walk(tree) if isinstance(n, ast.Call)]:
            if _mentions_namespace(call.func):
                found.append(f"{rel}:{call.lineno}: builds a Namespace")
    return found


def test_no_library_function_takes_or_builds_a_namespace():
    assert namespace_uses() == []


def test_the_check_sees_a_namespace(tmp_path):
    pkg = tmp_path / "ttg_envs"
    (pkg / "cli").mkdir(parents=True)
    (pkg / "lib.py").write_text(
        "import argparse\n"
        "def run(args: argparse.Namespace): ...\n"
        "def legacy(args): ...\n"
        "def build(**kw):\n    return argparse.Namespace(**kw)\n"
        "def helper(parser):\n    return parser.parse_args([])\n"
        "def main(argv=None):\n    return argparse.ArgumentParser().parse_args(argv)\n"
    )
    (pkg / "cli" / "ok.py").write_text("import argparse\ndef run(args: argparse.Namespace): ...\n")
    found = namespace_uses(pkg)
    assert [f.split(": ", 1)[1] for f in found] == [
        "run() takes a Namespace (args)",
        "legacy() takes untyped args",
        "helper() parses a command line",
        "builds a Namespace",
    ]
