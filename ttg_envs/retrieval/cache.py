"""On-disk index cache: one folder per (backend, settings, corpus fingerprint), built once.

A build writes into a private temporary folder and renames it into place when complete, so a
killed build leaves no half index behind and concurrent builders of the same key do not clash
(the first rename wins; the others discard their copy).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .._io import cache_root


def index_root() -> Path:
    """``$TTG_ENVS_CACHE/retrieval`` (default ``~/.cache/ttg_envs/retrieval``)."""
    return cache_root() / "retrieval"


def cache_key(backend: str, fingerprint: str, settings: dict[str, Any]) -> str:
    """The folder name for an index of ``backend`` built with ``settings`` over a corpus."""
    blob = json.dumps({"backend": backend, "corpus": fingerprint, "settings": settings}, sort_keys=True)
    return f"{backend}-{hashlib.sha256(blob.encode()).hexdigest()[:24]}"


def cached_index(key: str, build: Callable[[Path], None], root: Path | None = None) -> Path:
    """The folder of index ``key``, calling ``build(tmp_folder)`` first if it is not cached yet."""
    root = Path(root) if root is not None else index_root()
    final = root / key
    if (final / "COMPLETE").exists():
        return final
    root.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{key}-", dir=root))
    try:
        build(tmp)
        (tmp / "COMPLETE").write_text("ok\n")
        try:
            os.rename(tmp, final)
        except OSError:
            if not (final / "COMPLETE").exists():
                # A stale partial folder from an older layout: replace it.
                shutil.rmtree(final, ignore_errors=True)
                os.rename(tmp, final)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return final
