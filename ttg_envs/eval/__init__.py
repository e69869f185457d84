"""Rollout runners, metrics and reports."""

from .rollout import EpisodeResult, RolloutJob, markdown_table, run_episode, run_jobs, summarize

__all__ = ["EpisodeResult", "RolloutJob", "markdown_table", "run_episode", "run_jobs", "summarize"]
