"""Tag blocks in assistant text (``<action>...</action>``, ``<tool_call>...</tool_call>``), found in linear time."""

from __future__ import annotations

_ASCII_LOWER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")


def ascii_lower(text: str) -> str:
    """``text`` with only A-Z lowered: same length, so indices into it are indices into ``text``."""
    return text.translate(_ASCII_LOWER)


def tag_blocks(text: str, open_tag: str, close_tag: str, lowered: str | None = None) -> list[tuple[int, int]]:
    """``(start, end)`` of the body of each ``open_tag ... close_tag`` block, non-overlapping, left to right.

    The body ends at the first ``close_tag`` after its ``open_tag``, as a lazy regex would match,
    but in linear time: the scan stops at the first opening that is never closed. ``lowered``
    (``ascii_lower(text)``) makes the tags match case-insensitively.
    """
    haystack = text if lowered is None else lowered
    blocks, pos = [], 0
    while True:
        start = haystack.find(open_tag, pos)
        if start < 0:
            break
        end = haystack.find(close_tag, start + len(open_tag))
        if end < 0:
            break
        blocks.append((start + len(open_tag), end))
        pos = end + len(close_tag)
    return blocks
