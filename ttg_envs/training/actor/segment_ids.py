"""Token ids of chat-template text, with each run of text between added tokens tokenized once.

A tokenizer splits its input at its added tokens (``<|im_start|>``, ``<|im_end|>``...) before it
normalizes, pre-tokenizes and merges, so the ids of a text are the ids of its pieces, one after
another. A rollout's prompts repeat most of their pieces (the head every turn, a turn's messages
in the next turns' windows, rollouts that acted alike), so :class:`SegmentIds` remembers each
piece's ids. It does so only where that split is exact: every added token matched as written
(no ``lstrip``/``rstrip``/``single_word``/``normalized``) and no normalizer; otherwise it
tokenizes the whole text.
"""

from __future__ import annotations

import re
import weakref
from typing import Any

__all__ = ["SegmentIds", "text_ids"]


class SegmentIds:
    """``tokenizer(text, add_special_tokens=False)["input_ids"]`` with each piece's ids remembered.

    Args:
        tokenizer: a transformers tokenizer.
        limit: pieces remembered (the memory is emptied when it is full).
    """

    def __init__(self, tokenizer: Any, limit: int = 1 << 16):
        self.tokenizer = tokenizer
        self.limit = limit
        self._ids: dict[str, tuple[int, ...]] = {}
        added = {str(t): i for i, t in getattr(tokenizer, "added_tokens_decoder", {}).items()}
        tokens = getattr(tokenizer, "added_tokens_decoder", {}).values()
        backend = getattr(tokenizer, "backend_tokenizer", None)
        exact = (
            backend is not None
            and backend.normalizer is None
            and bool(added)
            and all(not (t.lstrip or t.rstrip or t.single_word or t.normalized) for t in tokens)
        )
        self._added = added
        self._split = re.compile("(" + "|".join(re.escape(t) for t in sorted(added, key=len, reverse=True)) + ")") if exact else None

    def __call__(self, text: str) -> list[int]:
        """The ids of ``text`` (no special tokens added)."""
        if self._split is None:
            return list(self.tokenizer(text, add_special_tokens=False)["input_ids"])
        out: list[int] = []
        for piece in self._split.split(text):
            if not piece:
                continue
            token = self._added.get(piece)
            if token is not None:
                out.append(token)
                continue
            ids = self._ids.get(piece)
            if ids is None:
                if len(self._ids) >= self.limit:
                    self._ids.clear()
                ids = self._ids[piece] = tuple(self.tokenizer(piece, add_special_tokens=False)["input_ids"])
            out.extend(ids)
        return out


_BY_TOKENIZER: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def text_ids(tokenizer: Any, text: str) -> list[int]:
    """``tokenizer``'s ids of ``text`` through one :class:`SegmentIds` per tokenizer."""
    try:
        segments = _BY_TOKENIZER.get(tokenizer)
    except TypeError:  # not weakly referenceable
        return list(tokenizer(text, add_special_tokens=False)["input_ids"])
    if segments is None:
        segments = _BY_TOKENIZER[tokenizer] = SegmentIds(tokenizer)
    return segments(text)
