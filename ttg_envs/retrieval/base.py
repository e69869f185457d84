"""The retriever interface every backend implements."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass

from .corpus import Document


class RetrieverError(RuntimeError):
    """A retriever could not answer (server unreachable, index unreadable, bad response)."""


@dataclass(frozen=True)
class Hit:
    """One retrieved passage with its BM25 (or server-given) score."""

    document: Document
    score: float


class Retriever(ABC):
    """Top-k passage search over one corpus.

    Backends implement :meth:`batch_search`; :meth:`search` is the one-query form. Hits come best
    first, at most ``k`` of them, and only documents that match at least one query term (a query
    made only of stopwords or unknown words returns no hits). Retrievers are safe to share
    between env instances and threads for searching.
    """

    #: Short backend name (``bm25s``, ``tantivy``, ``lucene``, ``http``).
    name: str = "retriever"

    def search(self, query: str, k: int = 3) -> list[Hit]:
        """The top ``k`` hits for ``query``."""
        return self.batch_search([query], k)[0]

    @abstractmethod
    def batch_search(self, queries: Sequence[str], k: int = 3) -> list[list[Hit]]:
        """The top ``k`` hits for each query, in query order."""

    def close(self) -> None:
        """Release files, processes or connections the backend holds (no-op by default)."""

    def __enter__(self) -> Retriever:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
