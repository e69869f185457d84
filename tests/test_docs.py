"""Every python block of docs/PROTOCOLS.md runs, in order, in one namespace."""

from __future__ import annotations

import re
from pathlib import Path

import gymnasium as gym

DOC = Path(__file__).parent.parent / "docs" / "PROTOCOLS.md"


def test_protocol_examples_run():
    blocks = re.findall(r"^```python\n(.*?)^```", DOC.read_text(), re.MULTILINE | re.DOTALL)
    assert len(blocks) == 3
    namespace: dict = {}
    try:
        for block in blocks:
            exec(compile(block, str(DOC), "exec"), namespace)
    finally:
        gym.registry.pop("my/Count-v0", None)
