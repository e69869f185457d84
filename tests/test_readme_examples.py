"""Every python block of the README runs, and every command of its "Quick checks" block finishes."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).parent.parent
README = (ROOT / "README.md").read_text()


def python_blocks() -> list[str]:
    return re.findall(r"^```python\n(.*?)^```", README, re.MULTILINE | re.DOTALL)


def quick_commands() -> list[str]:
    section = README.split("### Quick checks", 1)[1]
    block = re.search(r"```bash\n(.*?)```", section, re.DOTALL).group(1)
    return [line.split("  #", 1)[0].strip() for line in block.splitlines() if line.strip() and not line.startswith("#")]


def test_readme_python_blocks_run(tmp_path, monkeypatch):
    blocks = python_blocks()
    assert blocks
    monkeypatch.chdir(tmp_path)  # the examples write under runs/
    for block in blocks:
        exec(compile(block, "README.md", "exec"), {})


@pytest.mark.slow  # a long integration test (CI runs it; -m 'not slow' leaves it out)
@pytest.mark.parametrize("command", quick_commands())
def test_readme_quick_check_runs(command, tmp_path):
    words = shlex.split(command)
    if words[0] == ".venv/bin/ttg":
        argv = [sys.executable, "-m", "ttg_envs.cli", *words[1:]]
    elif words[0] == ".venv/bin/python":
        argv = [sys.executable, *words[1:]]
    else:
        pytest.fail(f"quick checks run .venv/bin/ttg or .venv/bin/python, got {command!r}")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(argv, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
