"""BM25 with ``tantivy`` (the Rust search library behind Quickwit): an embedded on-disk index."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from tqdm.auto import tqdm

from .._optional import require
from .base import Hit, Retriever
from .cache import cache_key, cached_index
from .corpus import Corpus

_ANALYZER = "ttg_en"


def _analyzer(tantivy):
    # Same text pipeline as the bm25s backend: words, lowercase, English stopwords, Snowball stems.
    return (
        tantivy.TextAnalyzerBuilder(tantivy.Tokenizer.simple())
        .filter(tantivy.Filter.remove_long(64))
        .filter(tantivy.Filter.lowercase())
        .filter(tantivy.Filter.stopword("english"))
        .filter(tantivy.Filter.stemmer("english"))
        .build()
    )


class TantivyRetriever(Retriever):
    """BM25 over a :class:`Corpus` with ``tantivy`` (its fixed BM25 parameters k1=1.2, b=0.75).

    Queries are analysed into terms and OR-ed as term queries, so no character of the query text
    is read as query syntax. The index is built once per corpus content (tqdm progress bar) and
    cached on disk like the bm25s one.
    """

    name = "tantivy"

    def __init__(
        self,
        corpus: Corpus,
        *,
        cache_dir: str | Path | None = None,
        progress: bool = True,
        heap_bytes: int = 256 * 1024 * 1024,
        threads: int = 1,
    ):
        self._tantivy = require("tantivy", "search")
        self.corpus = corpus
        self.settings = {"analyzer": "simple+lowercase+stop_en+snowball_en", "k1": 1.2, "b": 0.75}
        self._progress = progress
        self._heap_bytes = heap_bytes
        self._threads = threads
        folder = cached_index(cache_key(self.name, corpus.fingerprint, self.settings), self._build, cache_dir)
        self._index = self._tantivy.Index.open(str(folder))
        self._analyze = _analyzer(self._tantivy)
        self._index.register_tokenizer(_ANALYZER, self._analyze)
        self._index.reload()
        self._schema = self._index.schema
        self._searcher = self._index.searcher()

    def _build(self, folder: Path) -> None:
        t = self._tantivy
        builder = t.SchemaBuilder()
        builder.add_integer_field("row", stored=True, indexed=False)
        builder.add_text_field("body", stored=False, tokenizer_name=_ANALYZER)
        index = t.Index(builder.build(), path=str(folder))
        index.register_tokenizer(_ANALYZER, _analyzer(t))
        writer = index.writer(heap_size=self._heap_bytes, num_threads=self._threads)
        docs = tqdm(self.corpus, desc="tantivy index", unit=" docs", disable=not self._progress, leave=False)
        for row, doc in enumerate(docs):
            writer.add_document(t.Document(row=row, body=doc.contents))
        writer.commit()
        writer.wait_merging_threads()

    def _query(self, text: str):
        t = self._tantivy
        terms = sorted(set(self._analyze.analyze(text)))
        if not terms:
            return None
        clauses = [(t.Occur.Should, t.Query.term_query(self._schema, "body", term)) for term in terms]
        return t.Query.boolean_query(clauses)

    def batch_search(self, queries: Sequence[str], k: int = 3) -> list[list[Hit]]:
        """Top-``k`` hits per query; a query with no indexable term gets no hits."""
        out: list[list[Hit]] = []
        k = max(0, int(k))
        for text in queries:
            query = self._query(text)
            if query is None or k == 0:
                out.append([])
                continue
            result = self._searcher.search(query, k)
            hits = []
            for score, address in result.hits:
                row = self._searcher.doc(address)["row"][0]
                hits.append(Hit(self.corpus[int(row)], float(score)))
            out.append(hits)
        return out
