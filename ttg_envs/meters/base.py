"""The progress-meter protocol, its estimate type, and the cache every backend shares.

A meter reads histories (chat transcripts, ``env.unwrapped.messages``) and returns one
:class:`Estimate` per history: will the agent complete the task (b-hat) and how many assistant
tokens remain until it does (v-hat, paper section 3.1).
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

#: A history: the chat transcript before a decision (OpenAI message dicts).
History = Sequence[Mapping[str, Any]]


@dataclass(frozen=True)
class Estimate:
    """One meter output for one history.

    Attributes:
        can_complete: the completion estimate b-hat (False when the answer was invalid).
        remaining_tokens: the remaining-token estimate v-hat; None when ``can_complete`` is False.
        valid: False when the answer did not parse (paper Algorithm 1 treats such groups apart).
        raw: the answer text as the backend produced it.
        completion_logit: z = log p(true) - log p(false) of the completion label, when the backend
            reads it (the logit ablation of paper E.4); None otherwise.
    """

    can_complete: bool
    remaining_tokens: int | None
    valid: bool
    raw: str = ""
    completion_logit: float | None = None

    @property
    def completable(self) -> bool:
        """True when the answer is valid and predicts completion (what eq. 7 reads as b-hat)."""
        return self.valid and self.can_complete and self.remaining_tokens is not None


@runtime_checkable
class ProgressMeter(Protocol):
    """Anything that turns a batch of histories into one :class:`Estimate` each."""

    def estimate(self, histories: Sequence[History]) -> list[Estimate]:
        """Estimates for ``histories``, in order."""
        ...


_JSON = {"sort_keys": True, "ensure_ascii": False, "default": str, "separators": (",", ":")}
#: Values a message's digest may be remembered by: their identity fixes their text.
_IMMUTABLE = (str, int, float, bool, type(None))
#: Message digests by the identities of the message's values (kept, so the ids stay theirs).
_DIGESTS: dict[tuple[tuple, tuple], tuple[tuple, bytes]] = {}
_DIGESTS_SIZE = 8192


def _message_digest(message: Any) -> bytes:
    """The hash of ``json.dumps(message, sort_keys=True, ...)``, remembered for a plain dict whose
    values are all immutable: a branch's copy of a message holds the same strings, so the key of a
    trial's history hashes only its new messages (and those with tool-call lists)."""
    remember = type(message) is dict and all(type(v) in _IMMUTABLE for v in message.values())
    if remember:
        values = tuple(message.values())
        ident = (tuple(message), tuple(map(id, values)))
        hit = _DIGESTS.get(ident)
        if hit is not None and all(a is b for a, b in zip(hit[0], values)):
            return hit[1]
    digest = hashlib.blake2b(json.dumps(message, **_JSON).encode("utf-8"), digest_size=16).digest()
    if remember:
        if len(_DIGESTS) >= _DIGESTS_SIZE:
            _DIGESTS.clear()
        _DIGESTS[ident] = (values, digest)
    return digest


def history_key(history: History) -> str:
    """A stable hash of a history (message order, roles, contents, tool calls): of the sequence of
    its messages' JSON hashes, so equal histories, and only they, share a key."""
    return hashlib.blake2b(b"".join(_message_digest(m) for m in history), digest_size=16).hexdigest()


class CachedMeter:
    """Base class of the backends: an LRU cache by history hash and in-batch deduplication.

    Subclasses implement :meth:`_estimate_uncached` for a batch of distinct histories. Identical
    histories within one call, and histories seen in earlier calls, are scored once.

    Args:
        cache_size: how many estimates to keep (0 disables the cache; in-batch dedup stays).
    """

    def __init__(self, cache_size: int = 65536):
        self.cache_size = int(cache_size)
        self._cache: OrderedDict[str, Estimate] = OrderedDict()
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    def estimate(self, histories: Sequence[History]) -> list[Estimate]:
        """Estimates for ``histories``, scoring each distinct uncached history once."""
        keys = [history_key(h) for h in histories]
        found: dict[str, Estimate] = {}
        todo: dict[str, History] = {}
        with self._lock:
            for key, history in zip(keys, histories):
                if key in found or key in todo:
                    continue
                hit = self._cache.get(key)
                if hit is not None:
                    self._cache.move_to_end(key)
                    found[key] = hit
                    self.hits += 1
                else:
                    todo[key] = history
                    self.misses += 1
        if todo:
            fresh = self._estimate_uncached(list(todo.values()))
            if len(fresh) != len(todo):
                raise RuntimeError(f"{type(self).__name__} returned {len(fresh)} estimates for {len(todo)} histories")
            found.update(zip(todo, fresh))
            if self.cache_size > 0:
                with self._lock:
                    for key in todo:
                        self._cache[key] = found[key]
                    while len(self._cache) > self.cache_size:
                        self._cache.popitem(last=False)
        return [found[k] for k in keys]

    def clear_cache(self) -> None:
        """Forget every cached estimate and reset the hit/miss counters."""
        with self._lock:
            self._cache.clear()
            self.hits = self.misses = 0

    def _estimate_uncached(self, histories: list[History]) -> list[Estimate]:
        raise NotImplementedError
