"""BFCL (v3 categories) on bfcl-eval's data, backends and checkers: the env, its tasks, the gold policies."""

from .data import CATEGORIES, GROUPS, BFCLTask, load_tasks
from .env import BFCLEnv
from .policies import GoldPolicy, make_policy

__all__ = ["BFCLEnv", "BFCLTask", "CATEGORIES", "GROUPS", "GoldPolicy", "load_tasks", "make_policy"]
