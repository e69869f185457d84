"""BM25 index build and query latency, bm25s vs tantivy, with ratios measured in the same run.

Corpora: the bundled PaperSearchQA-format corpus (3,000 abstracts, its 600 test questions) and a
100,000-abstract corpus generated the same way (the bundle generator run with 34 seeds; 1,000 of its
questions). For each backend: cold index build (empty cache, progress bars off), load from the
on-disk cache, single-query latency (p50 and mean over the questions, k=3) and batched throughput.
Recall@3 of each question's source abstract is printed as a sanity check.

Run: ``python benchmarks/bench_retrieval.py [--docs 100000] [--queries 1000]``.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import tempfile
import time

from ttg_envs.datagen.papersearchqa import generate
from ttg_envs.envs.papersearchqa.data import BUNDLED_DATA_DIR, load_tasks
from ttg_envs.retrieval import Corpus, Document, load_corpus, make_retriever


def bundle() -> tuple[Corpus, list[tuple[str, str]]]:
    """The bundled corpus and (question, source doc id) pairs of the test split."""
    lookup = json.loads((BUNDLED_DATA_DIR / "pubmed-lookupPMID.json").read_text())
    corpus = load_corpus(BUNDLED_DATA_DIR / "corpus.jsonl.gz", progress=False)
    return corpus, [(t.question, str(lookup[t.pmid])) for t in load_tasks("test")]


def large(n_docs: int, n_queries: int) -> tuple[Corpus, list[tuple[str, str]]]:
    """A generated corpus of about ``n_docs`` abstracts and ``n_queries`` of its questions."""
    docs: list[Document] = []
    queries: list[tuple[str, str]] = []
    seed = 0
    while len(docs) < n_docs:
        records, rows, lookup = generate(seed)
        offset = len(docs)
        docs.extend(Document(str(offset + r["id"]), r["contents"]) for r in records)
        queries.extend((row["question"], str(offset + lookup[row["pmid"]])) for row in rows["test"])
        seed += 1
    return Corpus(docs[:n_docs]), random.Random(0).sample([q for q in queries if int(q[1]) < n_docs], n_queries)


def measure(backend: str, corpus: Corpus, queries: list[tuple[str, str]]) -> dict[str, float]:
    """Build, load and query timings of one backend on one corpus."""
    with tempfile.TemporaryDirectory() as cache:
        start = time.perf_counter()
        make_retriever(backend, corpus=corpus, cache_dir=cache, progress=False)
        build = time.perf_counter() - start
        start = time.perf_counter()
        retriever = make_retriever(backend, corpus=corpus, cache_dir=cache, progress=False)
        load = time.perf_counter() - start
        texts = [q for q, _ in queries]
        retriever.search(texts[0], 3)  # warm-up
        latencies, found = [], 0
        for text, source in queries:
            t0 = time.perf_counter()
            hits = retriever.search(text, 3)
            latencies.append(time.perf_counter() - t0)
            found += source in [h.document.id for h in hits]
        start = time.perf_counter()
        retriever.batch_search(texts, 3)
        batch = time.perf_counter() - start
    return {
        "build_s": build,
        "load_s": load,
        "p50_ms": 1e3 * statistics.median(latencies),
        "mean_ms": 1e3 * statistics.fmean(latencies),
        "batch_qps": len(texts) / batch,
        "recall@3": found / len(queries),
    }


def report(name: str, corpus: Corpus, queries: list[tuple[str, str]]) -> None:
    """Print one table and the tantivy/bm25s ratios."""
    results = {b: measure(b, corpus, queries) for b in ("bm25s", "tantivy")}
    print(f"\n{name}: {len(corpus):,} documents, {len(queries):,} queries")
    print(f"{'backend':<8} {'build s':>8} {'load s':>7} {'p50 ms':>7} {'mean ms':>8} {'batch q/s':>10} {'R@3':>6}")
    for backend, r in results.items():
        print(
            f"{backend:<8} {r['build_s']:8.2f} {r['load_s']:7.2f} {r['p50_ms']:7.3f} {r['mean_ms']:8.3f} "
            f"{r['batch_qps']:10.0f} {r['recall@3']:6.3f}"
        )
    a, b = results["tantivy"], results["bm25s"]
    print(
        f"tantivy/bm25s: build {a['build_s'] / b['build_s']:.2f}x, load {a['load_s'] / b['load_s']:.2f}x, "
        f"p50 latency {a['p50_ms'] / b['p50_ms']:.2f}x, batch throughput {a['batch_qps'] / b['batch_qps']:.2f}x"
    )


def main() -> None:
    """Run both corpora."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--docs", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=1000)
    args = parser.parse_args()
    report("bundle", *bundle())
    start = time.perf_counter()
    corpus, queries = large(args.docs, args.queries)
    print(f"\n(generated the large corpus in {time.perf_counter() - start:.1f} s)")
    report("generated", corpus, queries)


if __name__ == "__main__":
    main()
