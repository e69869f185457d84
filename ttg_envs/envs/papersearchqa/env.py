"""``ttg/PaperSearchQA-v0``: answer a biomedical question by searching abstracts (Search-R1 protocol).

Each turn the assistant writes ``<search> query </search>``, and the env answers with the top-k
passages inside ``<information>...</information>`` (formatted as Search-R1 formats them), or
``<answer> ... </answer>``, which ends the episode with reward 1 on exact match (after SQuAD
normalisation) with any accepted answer. At most 6 turns (paper table 4).
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Sequence
from functools import lru_cache
from typing import Any

from ...core import ParsedAction, StepOutcome, TextEnv, ascii_lower
from ...registry import turn_limit
from ...retrieval import Hit, Retriever, load_corpus, make_retriever
from .data import BUNDLED_CORPUS, QATask, load_tasks
from .scoring import exact_match, normalize_answer

SYSTEM_PROMPT = (
    "Answer the given biomedical question. Reason inside <think> and </think> every time you get new "
    "information. If you lack knowledge, call the search engine over PubMed abstracts with "
    "<search> query </search>; it returns the top results between <information> and </information>. "
    "You may search several times. When no further knowledge is needed, give the answer, a short "
    "entity without explanation, inside <answer> and </answer>, for example <answer> HBB </answer>."
)
_FORMAT = "<search> query </search> to search or <answer> answer </answer> to answer"
_KINDS = ("search", "answer")
#: Longest search query accepted, in characters.
MAX_QUERY_CHARS = 4096


def _first_block(text: str) -> tuple[str, int, int] | str | None:
    """The earliest-opening complete ``<search>``/``<answer>`` block as ``(kind, start, end)`` of its
    body (tags case-insensitive; it ends at the first matching close tag), else the kind of the first
    unclosed opening tag, else ``None``. Linear time, as a lazy regex with a backreference is not."""
    lowered = ascii_lower(text)
    last_close = {kind: lowered.rfind(f"</{kind}>") for kind in _KINDS}
    following = {kind: lowered.find(f"<{kind}>") for kind in _KINDS}
    first_open = None
    while True:
        open_at = [(at, kind) for kind, at in following.items() if at >= 0]
        if not open_at:
            return first_open
        at, kind = min(open_at)
        first_open = first_open or kind
        body = at + len(kind) + 2
        if last_close[kind] >= body:
            return kind, body, lowered.find(f"</{kind}>", body)
        following[kind] = -1  # no later opening of this kind is closed either


def parse_search_action(text: str) -> ParsedAction:
    """The first complete ``<search>`` or ``<answer>`` block as ``("search"|"answer", text)``.

    Search-R1 stops generating at the first ``</search>`` or ``</answer>``, so the earliest complete
    block is the action and anything after it is ignored. Linear time; never raises.
    """
    found = _first_block(text)
    if not isinstance(found, tuple):
        why = (
            f"the <{found}> block is not closed with </{found}>"
            if found
            else "no <search>...</search> or <answer>...</answer> block was found"
        )
        return ParsedAction(None, f"Invalid response: {why}. Write {_FORMAT}.")
    kind, start, end = found
    body = " ".join(text[start:end].split())
    if not body:
        return ParsedAction(None, f"Invalid response: the <{kind}> block is empty. Write {_FORMAT}.")
    if kind == "search" and len(body) > MAX_QUERY_CHARS:
        return ParsedAction(None, f"Invalid response: the search query is longer than {MAX_QUERY_CHARS} characters.")
    return ParsedAction((kind, body))


def format_passages(hits: Sequence[Hit]) -> str:
    """Search-R1's passage block: ``Doc i(Title: <first line>) <rest>`` per hit, one per line."""
    return "".join(f"Doc {i}(Title: {h.document.title}) {h.document.text}\n" for i, h in enumerate(hits, 1))


@lru_cache(maxsize=8)
def _shared_retriever(backend: str, corpus_path: str, stat: tuple[int, int]) -> Retriever:
    # One index per (backend, corpus file) per process: env instances and branches share it.
    return make_retriever(backend, corpus=load_corpus(corpus_path, progress=False), progress=False)


class PaperSearchQAEnv(TextEnv):
    """PaperSearchQA questions answered by searching a corpus of abstracts.

    Args:
        split: ``train`` or ``test``.
        subset: ``all``, ``original`` or ``paraphrased`` (the paper's two test subsets).
        source: ``bundled``: the project's offline synthetic bundle (questions and corpus).
        questions: a released PaperSearchQA split file (parquet or JSONL) instead of the bundle.
        corpus: corpus JSONL for the bm25s/tantivy backends (default: the bundled one).
        retriever: a backend name (``bm25s``, ``tantivy``, ``lucene``, ``http``) or a
            :class:`~ttg_envs.retrieval.Retriever`; ``retriever_kwargs`` go to
            :func:`~ttg_envs.retrieval.make_retriever` (e.g. ``url`` or ``index_dir``).
        topk: passages per search (Search-R1 and PaperSearchQA use 3).
        max_steps: truncation limit (paper table 4: 6).
    """

    default_max_steps = turn_limit("ttg/PaperSearchQA-v0")

    def __init__(
        self,
        split: str = "test",
        *,
        subset: str = "all",
        source: str = "bundled",
        questions: str | os.PathLike | None = None,
        corpus: str | os.PathLike | None = None,
        retriever: str | Retriever = "bm25s",
        retriever_kwargs: dict[str, Any] | None = None,
        topk: int = 3,
        max_steps: int | None = None,
        render_mode: str | None = None,
        action_format: str = "strict",
    ):
        super().__init__(max_steps=max_steps, render_mode=render_mode, action_format=action_format)
        self.tasks: list[QATask] = load_tasks(split, subset=subset, source=source, questions=questions)
        if topk < 1:
            raise ValueError(f"topk must be >= 1, got {topk}")
        self.topk = int(topk)
        self.retriever = self._make_retriever(retriever, corpus, retriever_kwargs or {})
        self._retrieved: list[tuple[str, ...]] = []
        self._answer: str | None = None

    @staticmethod
    def _make_retriever(retriever: str | Retriever, corpus: Any, kwargs: dict[str, Any]) -> Retriever:
        if isinstance(retriever, Retriever):
            return retriever
        if retriever in ("bm25s", "tantivy") and not kwargs:
            path = os.path.abspath(corpus if corpus is not None else BUNDLED_CORPUS)
            st = os.stat(path)
            return _shared_retriever(retriever, path, (st.st_size, st.st_mtime_ns))
        if retriever in ("bm25s", "tantivy"):
            kwargs = {"corpus": corpus if corpus is not None else BUNDLED_CORPUS, **kwargs}
        return make_retriever(retriever, **kwargs)

    # ------------------------------------------------------------ TextEnv hooks
    @property
    def system_prompt(self) -> str:
        """Search-R1-style instructions for the search/answer protocol."""
        return SYSTEM_PROMPT

    @property
    def current_task(self) -> QATask:
        """The task of the running episode."""
        return self.tasks[self.task_index]

    def parse_action(self, text: str) -> ParsedAction:
        """See :func:`parse_search_action`."""
        return parse_search_action(text)

    def _start(self, index: int) -> tuple[str, dict[str, Any]]:
        self._retrieved = []
        self._answer = None
        return f"Question: {self.tasks[index].question}", {}

    def _apply(self, command: tuple[str, str]) -> StepOutcome:
        kind, body = command
        if kind == "search":
            hits = self.retriever.search(body, self.topk)
            ids = [h.document.id for h in hits]
            self._retrieved.append(tuple(ids))
            return StepOutcome(observation=f"<information>{format_passages(hits)}</information>", info={"retrieved_ids": ids})
        self._answer = body
        won = exact_match(body, self.current_task.answers)
        return StepOutcome(observation="Your answer has been recorded.", reward=1.0 if won else 0.0, terminated=True, success=won)

    def _state_key(self) -> str:
        # The knowledge state: which passages the agent has seen, and its answer once given.
        seen = sorted({doc_id for ids in self._retrieved for doc_id in ids})
        answer = None if self._answer is None else normalize_answer(self._answer)
        blob = json.dumps({"task": self.current_task.id, "seen": seen, "answer": answer})
        return hashlib.sha256(blob.encode()).hexdigest()[:32]

    def _snapshot(self) -> tuple[tuple[tuple[str, ...], ...], str | None]:
        return tuple(self._retrieved), self._answer

    def _restore(self, snapshot: tuple[tuple[tuple[str, ...], ...], str | None]) -> None:
        retrieved, self._answer = snapshot
        self._retrieved = list(retrieved)

    def _adopt(self, branch: PaperSearchQAEnv) -> bool:
        self._retrieved, self._answer = branch._retrieved, branch._answer
        return True

    def _clone(self) -> PaperSearchQAEnv:
        clone = super()._clone()
        clone._retrieved = list(self._retrieved)
        return clone
