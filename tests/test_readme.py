"""The README documents exactly the info fields the code writes, and the registered ids."""

from __future__ import annotations

import re
from pathlib import Path

from ttg_envs import ENV_IDS, INFO_FIELDS

README = (Path(__file__).parent.parent / "README.md").read_text()


def test_info_field_table_matches_code():
    section = README.split("## Info fields", 1)[1].split("\n## ", 1)[0]
    rows = re.findall(r"^\| `(\w+)` \| (.+?) \| (.+?) \|$", section, re.MULTILINE)
    assert {name: (writer, meaning) for name, writer, meaning in rows} == INFO_FIELDS


def test_registered_ids_are_documented():
    for env_id in ENV_IDS:
        assert f"`{env_id}`" in README
