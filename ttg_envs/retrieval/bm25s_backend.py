"""BM25 with ``bm25s`` (sparse-matrix BM25 in NumPy/SciPy): the embedded default backend."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from pathlib import Path

from .._optional import require
from .base import Hit, Retriever
from .cache import cache_key, cached_index
from .corpus import Corpus

#: Lucene's BM25 parameters as pyserini sets them (the engine behind PaperSearchQA's BM25 runs).
DEFAULT_K1 = 0.9
DEFAULT_B = 0.4


class Bm25sRetriever(Retriever):
    """BM25 over a :class:`Corpus` with ``bm25s``: English stopwords, Snowball stemming, Lucene scoring.

    The index is built once per corpus content and settings (tqdm progress bar) and cached on disk
    (``cache_dir``, default :func:`~ttg_envs.retrieval.cache.index_root`); later instances load it.
    """

    name = "bm25s"

    def __init__(
        self, corpus: Corpus, *, k1: float = DEFAULT_K1, b: float = DEFAULT_B, cache_dir: str | Path | None = None, progress: bool = True
    ):
        self._bm25s = require("bm25s", "search")
        self._stemmer = require("Stemmer", "search").Stemmer("english")
        self.corpus = corpus
        self.settings = {"k1": k1, "b": b, "stopwords": "en", "stemmer": "snowball-english", "method": "lucene"}
        self._progress = progress
        folder = cached_index(cache_key(self.name, corpus.fingerprint, self.settings), self._build, cache_dir)
        self._model = self._bm25s.BM25.load(str(folder), mmap=False, load_corpus=False, show_progress=False)
        # bm25s keeps per-call scratch state in the model; one search at a time.
        self._lock = threading.Lock()

    def _build(self, folder: Path) -> None:
        tokens = self._bm25s.tokenize(self.corpus.contents, stopwords="en", stemmer=self._stemmer, show_progress=self._progress)
        model = self._bm25s.BM25(k1=self.settings["k1"], b=self.settings["b"], method="lucene")
        model.index(tokens, show_progress=self._progress)
        model.save(str(folder), show_progress=False)

    def batch_search(self, queries: Sequence[str], k: int = 3) -> list[list[Hit]]:
        """Top-``k`` hits per query; documents that match no query term are left out."""
        if not queries:
            return []
        k = max(0, min(int(k), len(self.corpus)))
        if k == 0:
            return [[] for _ in queries]
        tokens = self._bm25s.tokenize(list(queries), stopwords="en", stemmer=self._stemmer, show_progress=False, return_ids=False)
        with self._lock:
            rows, scores = self._model.retrieve(tokens, k=k, show_progress=False)
        return [[Hit(self.corpus[int(i)], float(s)) for i, s in zip(row, score_row) if s > 0] for row, score_row in zip(rows, scores)]
