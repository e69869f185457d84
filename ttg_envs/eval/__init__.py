"""Rollouts of scripted policies, evaluation under selection conditions, reports and plots (over :mod:`ttg_envs.runner`)."""

from ..runner import EpisodeResult, EpisodeTask, run_episode, run_tasks
from .evaluate import (
    DEFAULT_CONDITIONS,
    evaluate,
    evaluation_tasks,
    make_agent,
    parse_condition,
)
from .report import guidance_wins, seed_summary
from .report import markdown_table as seed_markdown_table
from .rollout import markdown_table, rollout, rollout_tasks, summarize

__all__ = [
    "DEFAULT_CONDITIONS",
    "EpisodeResult",
    "EpisodeTask",
    "evaluate",
    "evaluation_tasks",
    "guidance_wins",
    "make_agent",
    "markdown_table",
    "parse_condition",
    "rollout",
    "rollout_tasks",
    "run_episode",
    "run_tasks",
    "seed_markdown_table",
    "seed_summary",
    "summarize",
]
