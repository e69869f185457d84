"""A small HTTP server speaking Search-R1's ``/retrieve`` protocol, over any :class:`Retriever`.

One process holds the index; rollout workers on this or other machines use
:class:`~ttg_envs.retrieval.http.HttpRetriever` (or Search-R1's own client) against it::

    python -m ttg_envs.retrieval.server --corpus corpus.jsonl --backend bm25s --port 8000
    python -m ttg_envs.retrieval.server --index /data/pubmed-lucene --backend lucene --host 0.0.0.0

Endpoints: ``POST /retrieve`` (see :mod:`ttg_envs.retrieval.http`) and ``GET /health``.
"""

from __future__ import annotations

import argparse
import json
import threading
from collections.abc import Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from .base import Retriever

#: Largest request body and batch the server accepts (protects it from one runaway client).
MAX_BODY_BYTES = 16 * 1024 * 1024
MAX_QUERIES = 4096
MAX_TOPK = 1000


class _BadRequest(ValueError):
    pass


def _parse_request(body: bytes, default_topk: int) -> tuple[list[str], int, bool]:
    try:
        payload = json.loads(body.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise _BadRequest(f"body is not JSON: {exc}") from None
    if not isinstance(payload, dict):
        raise _BadRequest("body must be a JSON object")
    queries = payload.get("queries")
    if not isinstance(queries, list) or not all(isinstance(q, str) for q in queries):
        raise _BadRequest("'queries' must be a list of strings")
    if len(queries) > MAX_QUERIES:
        raise _BadRequest(f"at most {MAX_QUERIES} queries per request")
    topk = payload.get("topk") or default_topk
    if not isinstance(topk, int) or isinstance(topk, bool) or not 0 < topk <= MAX_TOPK:
        raise _BadRequest(f"'topk' must be an integer in 1..{MAX_TOPK}")
    return queries, topk, bool(payload.get("return_scores", False))


class RetrievalServer:
    """Serve ``retriever`` on ``host:port`` (port 0 picks a free one; see :attr:`url`)."""

    def __init__(self, retriever: Retriever, *, host: str = "127.0.0.1", port: int = 8000, topk: int = 3):
        self.retriever = retriever
        self.topk = topk
        self._httpd = ThreadingHTTPServer((host, port), self._handler_class())
        self._httpd.daemon_threads = True
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        """The ``/retrieve`` URL clients should use."""
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}/retrieve"

    def retrieve(self, queries: Sequence[str], topk: int, return_scores: bool) -> dict[str, Any]:
        """The protocol's response body for one request."""
        result = []
        for hits in self.retriever.batch_search(queries, topk):
            docs = [{"id": h.document.id, "contents": h.document.contents} for h in hits]
            if return_scores:
                docs = [{"document": d, "score": h.score} for d, h in zip(docs, hits)]
            result.append(docs)
        return {"result": result, "retriever_type": self.retriever.name}

    def _handler_class(self):
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def _send(self, status: int, payload: dict[str, Any]) -> None:
                body = json.dumps(payload).encode("utf-8")
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_GET(self):
                if self.path.rstrip("/") == "/health":
                    self._send(200, {"status": "ok", "retriever_type": server.retriever.name})
                else:
                    self._send(404, {"error": f"no endpoint {self.path}; use POST /retrieve"})

            def do_POST(self):
                if self.path.rstrip("/") != "/retrieve":
                    self._send(404, {"error": f"no endpoint {self.path}; use POST /retrieve"})
                    return
                length = int(self.headers.get("Content-Length") or 0)
                if length > MAX_BODY_BYTES:
                    self._send(413, {"error": f"body larger than {MAX_BODY_BYTES} bytes"})
                    self.close_connection = True
                    return
                try:
                    queries, topk, scores = _parse_request(self.rfile.read(length), server.topk)
                except _BadRequest as exc:
                    self._send(400, {"error": str(exc)})
                    return
                try:
                    response = server.retrieve(queries, topk, scores)
                except Exception as exc:  # the backend failed: tell the client instead of hanging up
                    self._send(500, {"error": f"{type(exc).__name__}: {exc}"})
                    return
                self._send(200, response)

            def log_message(self, format, *args):
                pass

        return Handler

    def start(self) -> RetrievalServer:
        """Serve in a background daemon thread (for tests and notebooks); returns self."""
        self._thread = threading.Thread(target=self._httpd.serve_forever, name="ttg-retrieval", daemon=True)
        self._thread.start()
        return self

    def serve_forever(self) -> None:
        """Serve in this thread until interrupted."""
        self._httpd.serve_forever()

    def close(self) -> None:
        """Stop serving and release the port."""
        if self._thread is not None:
            self._httpd.shutdown()
            self._thread.join()
            self._thread = None
        self._httpd.server_close()

    def __enter__(self) -> RetrievalServer:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.close()


def main(argv: Sequence[str] | None = None) -> int:
    """CLI: load a corpus (or Lucene index) and serve it."""
    from . import make_retriever

    parser = argparse.ArgumentParser(description="Serve BM25 retrieval over Search-R1's /retrieve protocol.")
    parser.add_argument("--backend", default="bm25s", choices=["bm25s", "tantivy", "lucene"])
    parser.add_argument("--corpus", help="corpus JSONL (bm25s, tantivy)")
    parser.add_argument("--index", help="prebuilt Lucene index folder (lucene)")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--topk", type=int, default=3, help="top-k when a request gives none")
    args = parser.parse_args(argv)
    retriever = make_retriever(args.backend, corpus=args.corpus, index_dir=args.index)
    server = RetrievalServer(retriever, host=args.host, port=args.port, topk=args.topk)
    print(f"serving {args.backend} retrieval at {server.url}", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
