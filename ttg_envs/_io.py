"""Small file helpers every layer shares: JSONL reading, reproducible gzip, manifests, the cache
folder, Markdown tables, folders saved and loaded whole."""

from __future__ import annotations

import contextlib
import ctypes
import errno
import gzip
import io
import json
import os
import shutil
import tempfile
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any, TypeVar

__all__ = ["atomic_folder", "cache_root", "gzip_lines", "load_folder", "markdown_table", "read_jsonl", "write_manifest"]

T = TypeVar("T")


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


@contextlib.contextmanager
def atomic_folder(path: str | os.PathLike) -> Iterator[Path]:
    """Yield a new empty folder beside ``path`` to write into; when the block ends, it takes
    ``path``'s place in one step (a rename, or an atomic exchange with the folder already there,
    which is then removed), so ``path`` holds the old complete folder or the new one, never a mix
    of two saves. On an error the new folder is removed and ``path`` is untouched."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    new = Path(tempfile.mkdtemp(prefix=f".{path.name}.saving-", dir=path.parent))
    try:
        yield new
        os.chmod(new, 0o755)  # mkdtemp makes 0700
        _put_in_place(new, path)
    except BaseException:
        shutil.rmtree(new, ignore_errors=True)
        raise


def _put_in_place(new: Path, path: Path) -> None:
    while True:
        try:
            os.rename(new, path)  # path absent (or an empty folder): done
            return
        except OSError as exc:
            if exc.errno not in (errno.EEXIST, errno.ENOTEMPTY, errno.EISDIR, errno.ENOTDIR):
                raise
        if _exchange(new, path):
            shutil.rmtree(new)  # now the old folder
            return
        # No atomic exchange here: set the old folder aside first (readers briefly find nothing).
        old = Path(tempfile.mkdtemp(prefix=f".{path.name}.old-", dir=path.parent))
        try:
            os.rename(path, old / "x")
        except FileNotFoundError:
            shutil.rmtree(old)
            continue
        try:
            os.rename(new, path)
        finally:
            shutil.rmtree(old, ignore_errors=True)
        return


def _exchange(a: Path, b: Path) -> bool:
    """Swap two paths atomically (Linux ``renameat2(RENAME_EXCHANGE)``); False where unsupported."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        renameat2 = libc.renameat2
    except (OSError, AttributeError):
        return False
    at_fdcwd, rename_exchange = -100, 2
    if renameat2(at_fdcwd, os.fsencode(a), at_fdcwd, os.fsencode(b), rename_exchange) == 0:
        return True
    if ctypes.get_errno() in (errno.EINVAL, errno.ENOSYS, errno.EPERM, errno.EXDEV):
        return False
    raise OSError(ctypes.get_errno(), os.strerror(ctypes.get_errno()), str(b))


def load_folder(path: str | os.PathLike, load: Callable[[Path], T], attempts: int = 3) -> T:
    """``load(folder)`` with ``path`` pinned for the whole load: every file is read from the folder
    ``path`` named when the load began (through its open descriptor), so a save that replaces the
    folder meanwhile (:func:`atomic_folder`) cannot give the load one save's file and another's.
    A load that fails because the old folder was removed under it is tried again, up to
    ``attempts`` times. Not a folder (a hub id, a file): ``load(Path(path))``."""
    if not os.path.isdir(path) or not os.path.isdir("/proc/self/fd"):
        return load(Path(path))
    for attempt in range(attempts):
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
        pinned = f"/proc/self/fd/{fd}"
        try:
            try:
                return load(Path(pinned))
            except OSError:
                try:
                    replaced = os.stat(path).st_ino != os.fstat(fd).st_ino
                except OSError:
                    replaced = True
                if not replaced or attempt == attempts - 1:
                    raise
        except Exception as exc:
            named = _named(exc, pinned, os.fspath(path))
            if named is exc:
                raise
            raise named from exc
        finally:
            os.close(fd)
    raise AssertionError("unreachable")


def _named(exc: Exception, pinned: str, path: str) -> Exception:
    """``exc`` with the pinned folder's ``/proc/self/fd/N`` replaced by the path the caller gave."""
    if pinned not in str(exc):
        return exc
    try:
        if isinstance(exc, OSError) and exc.errno is not None:
            return type(exc)(exc.errno, str(exc.strerror).replace(pinned, path), str(exc.filename or "").replace(pinned, path) or None)
        return type(exc)(str(exc).replace(pinned, path))
    except Exception:  # noqa: BLE001 - an exception type that needs other arguments: keep it as it is
        return exc
