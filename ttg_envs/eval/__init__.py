"""Rollout runners, metrics, reports and plots."""

from .evaluate import DEFAULT_CONDITIONS, evaluate, evaluation_jobs, make_agent, parse_condition
from .report import guidance_wins, markdown_table as seed_markdown_table, seed_summary
from .rollout import EpisodeResult, RolloutJob, markdown_table, run_episode, run_jobs, summarize

__all__ = [
    "DEFAULT_CONDITIONS",
    "EpisodeResult",
    "RolloutJob",
    "evaluate",
    "evaluation_jobs",
    "guidance_wins",
    "make_agent",
    "markdown_table",
    "parse_condition",
    "run_episode",
    "run_jobs",
    "seed_markdown_table",
    "seed_summary",
    "summarize",
]
