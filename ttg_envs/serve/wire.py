"""What crosses the wire: JSON-safe info fields, and the limits both ends agree on (no heavy imports)."""

from __future__ import annotations

import dataclasses
import math
from typing import Any

#: Largest HTTP body or WebSocket message the server reads. The env's own action limit
#: (``TextEnv.max_action_chars``, 262,144 characters) fits with room for JSON escapes
#: (up to 6 bytes per character), so an over-long action reaches the env and gets the env's answer.
MAX_MESSAGE_BYTES = 4 * 1024 * 1024
#: Reset options a client may send besides OpenEnv's ``seed`` and ``episode_id``.
RESET_KEYS = ("options", "fork", "method")
#: Most scripted-policy samples one request may ask for.
MAX_SAMPLES = 64


def jsonable(value: Any) -> Any:
    """``value`` as plain JSON data: dicts with string keys, lists, str, int, float, bool, None.

    NumPy scalars and arrays become Python numbers and lists, tuples and sets lists, dataclasses
    dicts, non-finite floats None; anything else its ``str``. Local info passed through this equals
    what a remote env returns.
    """
    if value is None or isinstance(value, (bool, str, int)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    if isinstance(value, (set, frozenset)):
        return sorted((jsonable(v) for v in value), key=repr)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return jsonable(dataclasses.asdict(value))
    item = getattr(value, "item", None)  # numpy scalar
    if callable(item) and getattr(value, "shape", None) == ():
        return jsonable(item())
    tolist = getattr(value, "tolist", None)  # numpy array
    if callable(tolist):
        return jsonable(tolist())
    return str(value)


def require_openenv(module: str) -> None:
    """Import ``module`` of OpenEnv or raise ``MissingExtraError`` saying how to install the ``serve`` extra."""
    from .._optional import MissingExtraError, require

    try:
        require(module, "serve")
    except MissingExtraError as exc:
        raise MissingExtraError(
            f"{module!r} cannot be imported ({exc.__cause__}); it comes with the 'serve' extra: "
            "pip install 'ttg-envs[serve]' && pip install --no-deps openenv-core==0.3.0"
        ) from exc.__cause__
