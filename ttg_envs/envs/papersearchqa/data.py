"""PaperSearchQA question lists: the project's offline bundle, or the released question files.

The released dataset (``PaperSearchQA/PaperSearchQA``) has one parquet file per split with the
columns ``question``, ``answer``, ``golden_answers`` (accepted answers), ``question_original``,
``pmid``, ``paper_title``, ``cat_num`` and ``cat``. A row whose ``question`` differs from its
``question_original`` is in the Paraphrased subset, the others in Original (the paper reports the
two test subsets separately). The same columns in JSONL (optionally gzipped) are read too.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from ..._io import read_jsonl
from ..._optional import require

SPLITS: tuple[str, ...] = ("train", "test")
SUBSETS: tuple[str, ...] = ("all", "original", "paraphrased")
BUNDLED_DATA_DIR = Path(__file__).parent / "data"
BUNDLED_CORPUS = BUNDLED_DATA_DIR / "corpus.jsonl.gz"


@dataclass(frozen=True)
class QATask:
    """One question: its wording, accepted answers, split and subset (``original``/``paraphrased``)."""

    id: str
    question: str
    answers: tuple[str, ...]
    split: str
    subset: str
    source: str
    pmid: str = ""
    category: str = ""

    def info(self) -> dict[str, Any]:
        """The ``info["task"]`` dict (without the answers)."""
        return {
            "id": self.id,
            "type": self.subset,
            "split": self.split,
            "source": self.source,
            "question": self.question,
            "category": self.category,
            "pmid": self.pmid,
        }


def task_from_row(row: dict[str, Any], *, id: str, split: str, source: str) -> QATask:
    """A :class:`QATask` from one dataset row."""
    question = str(row["question"]).strip()
    golden = row.get("golden_answers")
    if isinstance(golden, dict):  # Search-R1's reward format {"target": [...]}
        golden = golden.get("target")
    if isinstance(golden, str):
        golden = [golden]
    answers = [str(a) for a in (golden if golden is not None and len(golden) else [row["answer"]])]
    if row.get("answer") is not None and str(row["answer"]) not in answers:
        answers.insert(0, str(row["answer"]))
    original = str(row.get("question_original") or question).strip()
    subset = "paraphrased" if original != question else "original"
    return QATask(id, question, tuple(answers), split, subset, source, str(row.get("pmid") or ""), str(row.get("cat") or ""))


def read_rows(path: str | os.PathLike) -> list[dict[str, Any]]:
    """The rows of a question file: ``.parquet`` (needs pyarrow), ``.jsonl`` or ``.jsonl.gz``."""
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"no PaperSearchQA question file at {path}")
    if path.suffix == ".parquet":
        return require("pyarrow.parquet", "search").read_table(path).to_pylist()
    return list(read_jsonl(path))


def load_tasks(
    split: str = "test", *, subset: str = "all", source: str = "bundled", questions: str | os.PathLike | None = None
) -> list[QATask]:
    """The tasks of a split in file order (``{split}-{row:05d}`` ids), filtered to ``subset``.

    ``questions``: a released split file (e.g. ``test-00000-of-00001.parquet``); then ``split``
    only labels the tasks. Otherwise ``source="bundled"`` reads the project's offline bundle.
    """
    if subset not in SUBSETS:
        raise ValueError(f"subset must be one of {SUBSETS}, got {subset!r}")
    if questions is not None:
        tasks = _tasks_from_file(str(questions), split, "files")
    elif source == "bundled":
        if split not in SPLITS:
            raise ValueError(f"split must be one of {SPLITS}, got {split!r}")
        tasks = _tasks_from_file(str(BUNDLED_DATA_DIR / f"{split}.jsonl.gz"), split, "bundled")
    else:
        raise ValueError(f"source must be 'bundled' (or pass questions=<file>), got {source!r}")
    return [t for t in tasks if subset == "all" or t.subset == subset]


@lru_cache(maxsize=16)
def _tasks_from_file(path: str, split: str, source: str) -> tuple[QATask, ...]:
    return tuple(task_from_row(row, id=f"{split}-{i:05d}", split=split, source=source) for i, row in enumerate(read_rows(path)))
