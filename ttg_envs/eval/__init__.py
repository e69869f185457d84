"""Rollouts of scripted policies, evaluation under selection conditions, reports and plots (over :mod:`ttg_envs.runner`)."""

from ..runner import EpisodeResult, EpisodeTask, run_episode, run_tasks
from .evaluate import DEFAULT_CONDITIONS, evaluate, evaluation_tasks, make_agent, parse_condition
from .report import guidance_wins, markdown_table, seed_summary
from .rollout import rollout, rollout_table, rollout_tasks, summarize

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
    "rollout_table",
    "rollout_tasks",
    "run_episode",
    "run_tasks",
    "seed_summary",
    "summarize",
]
