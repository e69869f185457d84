"""The meter's answer format (README, "Progress meters") and its strict parser.

A generative meter answers ``{"can_complete": true, "remaining_tokens": 420}`` or
``{"can_complete": false, "remaining_tokens": null}``. The answer always starts with
:data:`ANSWER_PREFIX`, so the logit ablation (paper E.4) can read the probabilities of the
``true``/``false`` token that follows it.
"""

from __future__ import annotations

import json
from typing import Any

from .base import Estimate

#: The fixed opening of every answer.
ANSWER_PREFIX = '{"can_complete":'
#: Largest remaining-token count the parser accepts; larger numbers are treated as garbage.
MAX_REMAINING_TOKENS = 10**9


def format_answer(can_complete: bool, remaining_tokens: int | None) -> str:
    """The canonical answer text for a completion label and a remaining-token count."""
    if can_complete:
        if remaining_tokens is None or int(remaining_tokens) < 0:
            raise ValueError(f"a completable answer needs remaining_tokens >= 0, got {remaining_tokens!r}")
        return f'{ANSWER_PREFIX} true, "remaining_tokens": {int(remaining_tokens)}}}'
    return f'{ANSWER_PREFIX} false, "remaining_tokens": null}}'


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not allowed")


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    keys = [k for k, _ in pairs]
    if len(set(keys)) != len(keys):
        raise ValueError("duplicate key")
    return dict(pairs)


def parse_answer(text: Any) -> Estimate:
    """Parse a meter answer strictly; anything but the documented format is ``valid=False``.

    Accepted: surrounding whitespace around one JSON object that starts with
    :data:`ANSWER_PREFIX` and has exactly the keys ``can_complete`` (a JSON boolean) and
    ``remaining_tokens`` (an integer in ``[0, MAX_REMAINING_TOKENS]`` when ``can_complete`` is
    true, ``null`` when it is false). Rejected: code fences, extra text or keys, duplicate keys,
    strings or floats for numbers, NaN/Infinity, negative counts. Never raises.
    """
    raw = text if isinstance(text, str) else ("" if text is None else repr(text))
    invalid = Estimate(can_complete=False, remaining_tokens=None, valid=False, raw=raw)
    if not isinstance(text, str):
        return invalid
    body = text.strip()
    if not body.startswith(ANSWER_PREFIX):
        return invalid
    try:
        obj = json.loads(body, object_pairs_hook=_unique_keys, parse_constant=_reject_constant)
    except (ValueError, RecursionError):
        return invalid
    if not isinstance(obj, dict) or set(obj) != {"can_complete", "remaining_tokens"}:
        return invalid
    can, remaining = obj["can_complete"], obj["remaining_tokens"]
    if can is True:
        # bool is an int subclass: `true` is not a count.
        if type(remaining) is not int or not 0 <= remaining <= MAX_REMAINING_TOKENS:
            return invalid
        return Estimate(can_complete=True, remaining_tokens=remaining, valid=True, raw=raw)
    if can is False and remaining is None:
        return Estimate(can_complete=False, remaining_tokens=None, valid=True, raw=raw)
    return invalid
