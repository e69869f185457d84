"""BM25 retrieval behind one interface: bm25s (default), tantivy, Lucene (pyserini), or HTTP.

>>> from ttg_envs.retrieval import load_corpus, make_retriever
>>> retriever = make_retriever("bm25s", corpus="corpus.jsonl")     # doctest: +SKIP
>>> retriever.search("which kinase phosphorylates BRV1", k=3)      # doctest: +SKIP

Embedded indexes are built once per corpus content and cached on disk; the HTTP backend talks to
:mod:`ttg_envs.retrieval.server` (or Search-R1's server) so that one index serves many workers.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from .base import Hit, Retriever, RetrieverError
from .corpus import Corpus, Document, load_corpus

#: Backend names accepted by :func:`make_retriever`.
BACKENDS: tuple[str, ...] = ("bm25s", "tantivy", "lucene", "http")


def make_retriever(
    backend: str = "bm25s",
    *,
    corpus: Corpus | str | os.PathLike | None = None,
    index_dir: str | os.PathLike | None = None,
    url: str | None = None,
    **kwargs: Any,
) -> Retriever:
    """Build a retriever by backend name.

    ``bm25s`` and ``tantivy`` need ``corpus`` (a :class:`Corpus` or a JSONL path); ``lucene`` needs
    ``index_dir`` (a prebuilt pyserini index); ``http`` needs ``url`` (``.../retrieve``). Extra
    keyword arguments go to the backend class.
    """
    if backend in ("bm25s", "tantivy"):
        if corpus is None:
            raise ValueError(f"the {backend!r} retriever needs a corpus (a Corpus or a JSONL path)")
        if not isinstance(corpus, Corpus):
            corpus = load_corpus(Path(corpus), progress=kwargs.get("progress", True))
        if backend == "bm25s":
            from .bm25s_backend import Bm25sRetriever

            return Bm25sRetriever(corpus, **kwargs)
        from .tantivy_backend import TantivyRetriever

        return TantivyRetriever(corpus, **kwargs)
    if backend == "lucene":
        if index_dir is None:
            raise ValueError("the 'lucene' retriever needs index_dir (a pyserini index built with --storeRaw)")
        from .lucene_backend import LuceneRetriever

        return LuceneRetriever(index_dir, **kwargs)
    if backend == "http":
        from .http import HttpRetriever

        return HttpRetriever(url or "http://127.0.0.1:8000/retrieve", **kwargs)
    raise ValueError(f"unknown retriever backend {backend!r}; choose from {BACKENDS}")


__all__ = ["BACKENDS", "Corpus", "Document", "Hit", "Retriever", "RetrieverError", "load_corpus", "make_retriever"]
