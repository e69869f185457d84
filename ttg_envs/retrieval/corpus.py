"""Retrieval corpora: documents as ``{"id", "contents"}`` records, read from JSONL.

Search-R1 and PaperSearchQA store a corpus as JSON lines ``{"id": ..., "contents": ...}``
(PaperSearchQA's PubMed corpus: ``"TITLE: <title>. ABSTRACT: <abstract>"``; Search-R1's Wikipedia:
``"\\"<title>\\"\\n<text>"``). Records with ``title`` plus ``text``/``abstract`` instead of
``contents`` are accepted and joined the Search-R1 way.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tqdm.auto import tqdm

from .._io import read_jsonl


@dataclass(frozen=True)
class Document:
    """One retrievable passage: its corpus id and its full text."""

    id: str
    contents: str

    @property
    def title(self) -> str:
        """The first line of ``contents`` (how Search-R1 splits a passage for display)."""
        return self.contents.split("\n", 1)[0]

    @property
    def text(self) -> str:
        """Everything after the first line of ``contents`` (empty for one-line passages)."""
        parts = self.contents.split("\n", 1)
        return parts[1] if len(parts) > 1 else ""


class Corpus(Sequence[Document]):
    """An ordered, immutable list of documents with a fingerprint of its content.

    The fingerprint (sha256 over every id and text, in order) keys the on-disk index cache, so an
    index is rebuilt exactly when the corpus content changes, wherever the file lives.
    """

    def __init__(self, documents: Iterable[Document]):
        self._docs: tuple[Document, ...] = tuple(documents)
        digest = hashlib.sha256()
        for doc in self._docs:
            digest.update(doc.id.encode("utf-8") + b"\x00" + doc.contents.encode("utf-8") + b"\x01")
        self.fingerprint: str = digest.hexdigest()

    def __len__(self) -> int:
        return len(self._docs)

    def __getitem__(self, index):  # type: ignore[override]
        return self._docs[index]

    def __iter__(self) -> Iterator[Document]:
        return iter(self._docs)

    @property
    def contents(self) -> list[str]:
        """Every document's text, in corpus order."""
        return [d.contents for d in self._docs]

    def __repr__(self) -> str:
        return f"Corpus({len(self)} documents, fingerprint={self.fingerprint[:12]})"


def document_from_record(record: dict[str, Any]) -> Document:
    """A :class:`Document` from one corpus JSON record (``id`` + ``contents``, or ``title`` + ``text``)."""
    if "id" not in record:
        raise ValueError(f"corpus record has no 'id': {str(record)[:120]}")
    if "contents" in record:
        contents = str(record["contents"])
    else:
        body = record.get("text", record.get("abstract", record.get("abstractText")))
        if body is None:
            raise ValueError(f"corpus record {record['id']!r} has neither 'contents' nor 'text'/'abstract'")
        contents = f'"{record.get("title", "")}"\n{body}'
    return Document(str(record["id"]), contents)


def load_corpus(path: str | os.PathLike, *, progress: bool = True) -> Corpus:
    """Read a corpus JSONL file (optionally gzipped) in file order."""
    records = read_jsonl(path)
    if progress:
        records = tqdm(records, desc=f"reading {Path(path).name}", unit=" docs", leave=False)
    return Corpus(document_from_record(r) for r in records)
