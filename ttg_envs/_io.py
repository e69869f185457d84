"""Small file helpers every layer shares: JSONL reading, reproducible gzip, manifests, the cache folder, Markdown tables."""

from __future__ import annotations

import gzip
import io
import json
import os
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

__all__ = ["cache_root", "gzip_lines", "markdown_table", "read_jsonl", "write_manifest"]


def cache_root() -> Path:
    """Folder for ttg_envs' on-disk caches: ``$TTG_ENVS_CACHE``, else ``$XDG_CACHE_HOME/ttg_envs``, else ``~/.cache/ttg_envs``."""
    if os.environ.get("TTG_ENVS_CACHE"):
        return Path(os.environ["TTG_ENVS_CACHE"])
    if os.environ.get("XDG_CACHE_HOME"):
        return Path(os.environ["XDG_CACHE_HOME"]) / "ttg_envs"
    return Path.home() / ".cache" / "ttg_envs"


def read_jsonl(path: str | os.PathLike) -> Iterator[dict[str, Any]]:
    """Yield the JSON records of a ``.jsonl`` or ``.jsonl.gz`` file, skipping blank lines."""
    path = Path(path)
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            if line.strip():
                try:
                    yield json.loads(line)
                except json.JSONDecodeError as exc:
                    raise ValueError(f"{path}:{number}: not a JSON line ({exc.msg})") from None


def gzip_lines(lines: Iterable[str]) -> bytes:
    """``lines`` (one newline each) as byte-reproducible gzip: mtime 0, no file name, level 9."""
    raw = io.BytesIO()
    with gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0, compresslevel=9) as gz:
        for line in lines:
            gz.write(line.encode("utf-8") + b"\n")
    return raw.getvalue()


def write_manifest(path: str | os.PathLike, manifest: dict[str, Any]) -> None:
    """Write a bundle's ``MANIFEST.json``: sorted keys, two-space indent, final newline (stable diffs)."""
    Path(path).write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n")


def markdown_table(columns: Sequence[str], rows: Iterable[Sequence[Any]], *, right: int = 0) -> str:
    """A Markdown table: ``columns`` as the header, one line per row; the last ``right`` columns
    are right-aligned (numbers)."""
    left = len(columns) - right
    lines = ["| " + " | ".join(columns) + " |", "|" + "|".join(["---"] * left + ["---:"] * right) + "|"]
    lines += ["| " + " | ".join(str(cell) for cell in row) + " |" for row in rows]
    return "\n".join(lines)
