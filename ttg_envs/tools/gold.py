"""What the tool envs' gold policies share: the call syntax they write, and whether they leave the last call out."""

from __future__ import annotations

from .calls import CALL_STYLES


class GoldReplay:
    """Base of a scripted policy that replays a task's ground truth as tool calls.

    ``style`` (``hermes``, ``json``, ``python``) is the call syntax it writes; ``drop_last`` leaves the
    last ground-truth call out (a near miss); ``name`` is ``gold`` or ``gold_drop_last``.
    """

    def __init__(self, style: str = "hermes", drop_last: bool = False):
        if style not in CALL_STYLES:
            raise ValueError(f"style must be one of {CALL_STYLES}, got {style!r}")
        self.style = style
        self.drop_last = drop_last
        self.name = "gold_drop_last" if drop_last else "gold"
