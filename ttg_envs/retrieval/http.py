"""Client of Search-R1's retrieval protocol: ``POST /retrieve`` with a batch of queries.

Request ``{"queries": [...], "topk": k, "return_scores": true}``; response ``{"result": [[{"document":
{"id", "contents", ...}, "score": s}, ...], ...]}`` (with ``return_scores: false`` each item is the
document itself). Any server that speaks this, Search-R1's own FastAPI one or
:mod:`ttg_envs.retrieval.server`, can serve many rollout workers.
"""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from collections.abc import Sequence
from typing import Any

from .base import Hit, Retriever, RetrieverError
from .corpus import Document


def hit_from_item(item: Any) -> Hit:
    """A :class:`Hit` from one result item, with or without the ``{"document", "score"}`` wrapper."""
    if isinstance(item, dict) and isinstance(item.get("document"), dict):
        doc, score = item["document"], item.get("score", 0.0)
    elif isinstance(item, dict):
        doc, score = item, 0.0
    else:
        raise RetrieverError(f"retrieval server returned a non-object result item: {str(item)[:120]}")
    if "contents" in doc:
        contents = str(doc["contents"])
    else:
        contents = f'"{doc.get("title", "")}"\n{doc.get("text", "")}'
    return Hit(Document(str(doc.get("id", "")), contents), float(score or 0.0))


class HttpRetriever(Retriever):
    """A retriever that asks a Search-R1-protocol server (``url`` ends in ``/retrieve``).

    Connection failures are retried ``retries`` times with exponential back-off, then raise
    :class:`RetrieverError`: a dead server stops the rollout instead of feeding the agent empty
    results.
    """

    name = "http"

    def __init__(self, url: str = "http://127.0.0.1:8000/retrieve", *, timeout: float = 30.0, retries: int = 3):
        self.url = url
        self.timeout = timeout
        self.retries = retries

    def _post(self, payload: dict[str, Any]) -> dict[str, Any]:
        body = json.dumps(payload).encode("utf-8")
        delay = 0.5
        for attempt in range(self.retries + 1):
            request = urllib.request.Request(self.url, data=body, headers={"Content-Type": "application/json"})
            try:
                with urllib.request.urlopen(request, timeout=self.timeout) as response:
                    return json.loads(response.read().decode("utf-8"))
            except urllib.error.HTTPError as exc:
                detail = exc.read().decode("utf-8", "replace")[:300]
                raise RetrieverError(f"retrieval server {self.url} answered HTTP {exc.code}: {detail}") from None
            except (urllib.error.URLError, ConnectionError, TimeoutError) as exc:
                if attempt == self.retries:
                    raise RetrieverError(f"retrieval server {self.url} unreachable after {self.retries + 1} tries: {exc}") from None
                time.sleep(delay)
                delay *= 2
            except json.JSONDecodeError as exc:
                raise RetrieverError(f"retrieval server {self.url} sent invalid JSON: {exc}") from None
        raise AssertionError("unreachable")

    def batch_search(self, queries: Sequence[str], k: int = 3) -> list[list[Hit]]:
        """One request for all ``queries``; hits in the server's order."""
        if not queries:
            return []
        data = self._post({"queries": list(queries), "topk": int(k), "return_scores": True})
        result = data.get("result") if isinstance(data, dict) else None
        if not isinstance(result, list) or len(result) != len(queries):
            raise RetrieverError(f"retrieval server {self.url} returned no 'result' list for {len(queries)} queries")
        return [[hit_from_item(item) for item in (row or [])] for row in result]
