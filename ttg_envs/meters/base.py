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


#: Role of the task note a history may open with when a meter reads one (``reads_task_note``):
#: what the env publishes about the task and the transcript does not say. Actors never see it: the
#: env's transcript holds no note; ``ProgressMeterWrapper`` and the meter tools add it to the copy
#: they hand the meter (:func:`with_task_note`).
TASK_NOTE_ROLE = "ttg_task_note"


def with_task_note(history: History, task: Mapping[str, Any] | None) -> list[Mapping[str, Any]]:
    """``history`` opened by the task note of ``task`` (the env's ``info["task"]``): the number of
    user requests the task holds (``task["turns"]``, BFCL's multi-turn entries), or ``history``
    unchanged (as a list) when ``task`` names none.

    >>> with_task_note([{"role": "user", "content": "ls"}], {"id": "multi_turn_base_0", "turns": 4})[0]
    {'role': 'ttg_task_note', 'requests': 4}
    >>> with_task_note([{"role": "user", "content": "ls"}], {"id": "simple_python_0"})
    [{'role': 'user', 'content': 'ls'}]
    """
    turns = (task or {}).get("turns")
    if turns is None:
        return list(history)
    return [{"role": TASK_NOTE_ROLE, "requests": int(turns)}, *history]


def meter_history(meter: Any, history: History, task: Mapping[str, Any] | None) -> History:
    """``history`` as ``meter`` reads it: opened by ``task``'s note (:func:`with_task_note`) when
    the meter reads one (its ``reads_task_note`` is True), else ``history`` itself."""
    return with_task_note(history, task) if getattr(meter, "reads_task_note", False) else history


def split_task_note(history: History) -> tuple[Mapping[str, Any] | None, History]:
    """The task note ``history`` opens with (None when it has none) and the transcript after it."""
    if history and history[0].get("role") == TASK_NOTE_ROLE:
        return history[0], history[1:]
    return None, history


@runtime_checkable
class ProgressMeter(Protocol):
    """Anything that turns a batch of histories into one :class:`Estimate` each."""

    def estimate(self, histories: Sequence[History]) -> list[Estimate]:
        """Estimates for ``histories``, in order."""
        ...


_JSON = {"sort_keys": True, "ensure_ascii": False, "default": str, "separators": (",", ":")}
#: ``json.dumps(value, **_JSON)`` without building an encoder per call.
_ENCODE = json.JSONEncoder(**_JSON).encode
#: Values a message's digest may be remembered by: their identity fixes their text.
_IMMUTABLE = frozenset((str, int, float, bool, type(None)))
_STR = frozenset((str,))
#: Message digests by :func:`_signature` -> (the objects it names, kept so their ids stay theirs; digest).
_DIGESTS: dict[tuple, tuple[list, bytes]] = {}
_DIGESTS_SIZE = 8192


def _signature(message: Any) -> tuple[tuple, list] | None:
    """What fixes a message's JSON text: every key and immutable value's identity, and the type and
    size of every dict and list, in one walk order (the top dict's own identity is not in it: a
    branch's ``dict(m)`` copy holds the same values). None when the message holds anything else
    (a tuple, an object, a non-str key), whose digest is then computed each time.

    Nested lists and dicts are named by type and size, not identity, and walked each time, so a
    tool-call list changed in place (a call added, an argument string replaced) gives another
    signature: the memo never trusts a mutable value, only the immutable strings and numbers in it.
    """
    if type(message) is not dict:
        return None
    keys, values = tuple(message), tuple(message.values())
    if not _STR.issuperset(map(type, keys)):
        return None
    if _IMMUTABLE.issuperset(map(type, values)):  # most messages: no walk
        return (len(keys), *map(id, keys), *map(id, values)), [keys, values]
    sig: list[int] = []
    objects: list[Any] = []
    stack: list[Any] = [message]
    while stack:
        value = stack.pop()
        kind = type(value)
        if kind in _IMMUTABLE:
            sig.append(id(value))
            objects.append(value)
        elif kind is dict:
            sig.append(-2 * len(value) - 1)  # ids are positive: sizes are negative, odd for a dict
            for key, item in value.items():
                if type(key) is not str:
                    return None
                sig.append(id(key))
                objects.append(key)
                stack.append(item)
        elif kind is list:
            sig.append(-2 * len(value) - 2)  # even for a list
            stack.extend(value)
        else:
            return None
    return tuple(sig), objects


def _message_digest(message: Any) -> bytes:
    """The hash of ``json.dumps(message, sort_keys=True, ...)``, remembered by :func:`_signature`:
    a branch's copy of a message holds the same strings (its tool-call list too), so the key of a
    trial's history hashes only its new messages."""
    signed = _signature(message)
    if signed is not None:
        hit = _DIGESTS.get(signed[0])
        if hit is not None:
            return hit[1]
    digest = hashlib.blake2b(_ENCODE(message).encode("utf-8"), digest_size=16).digest()
    if signed is not None:
        if len(_DIGESTS) >= _DIGESTS_SIZE:
            _DIGESTS.clear()
        _DIGESTS[signed[0]] = (signed[1], digest)
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
