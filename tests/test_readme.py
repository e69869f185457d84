"""The README documents exactly the info fields the code writes, and the registered ids."""

from __future__ import annotations

import re
from pathlib import Path

from ttg_envs import ENV_SPECS, INFO_FIELDS

README = (Path(__file__).parent.parent / "README.md").read_text()


def test_info_field_table_matches_code():
    section = README.split("## Info fields", 1)[1].split("\n## ", 1)[0]
    rows = re.findall(r"^\| `(\w+)` \| (.+?) \| (.+?) \|$", section, re.MULTILINE)
    assert {name: (writer, meaning) for name, writer, meaning in rows} == INFO_FIELDS


def test_registered_ids_are_documented():
    for env_id in ENV_SPECS:
        assert f"`{env_id}`" in README


def test_extras_table_matches_pyproject_and_infrastructure_is_not_pinned():
    import tomllib

    extras = tomllib.loads((Path(__file__).parent.parent / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    table = README.split("| extra | brings | for |", 1)[1].split("\n\n", 1)[0]
    assert set(re.findall(r"^\| `([\w-]+)` \|", table, re.MULTILINE)) == set(extras)
    # Exact versions of infrastructure live in constraints.txt; the extras state ranges.
    infrastructure = {"torch", "transformers", "tokenizers", "vllm", "verl"}
    pinned = [r for reqs in extras.values() for r in reqs if "==" in r and re.split(r"[=<>!\[ ]", r)[0] in infrastructure]
    assert pinned == []
