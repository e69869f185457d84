"""PaperSearchQA: biomedical questions answered by BM25 search over abstracts (Search-R1 protocol)."""

from .data import SPLITS, SUBSETS, QATask, load_tasks
from .env import PaperSearchQAEnv, format_passages, parse_search_action
from .policies import ExpertPolicy, NoisyExpertPolicy
from .scoring import exact_match, normalize_answer

__all__ = [
    "SPLITS",
    "SUBSETS",
    "ExpertPolicy",
    "NoisyExpertPolicy",
    "PaperSearchQAEnv",
    "QATask",
    "exact_match",
    "format_passages",
    "load_tasks",
    "normalize_answer",
    "parse_search_action",
]
