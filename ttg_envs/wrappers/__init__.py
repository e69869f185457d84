"""Wrappers that add token counts, progress-meter estimates, recording and branching to any ttg env."""

from .branching import BranchableWrapper, Trial, branch, offer_trial, try_actions
from .lookahead import Lookahead
from .plan_length import PlanLength
from .progress_meter import ProgressMeterWrapper, score_actions, step_all
from .recorder import TrajectoryRecorder, read_trajectories, write_trajectory
from .stack import make_env, wrap_env
from .token_counter import TokenCounter, token_to_go

__all__ = [
    "BranchableWrapper",
    "Lookahead",
    "PlanLength",
    "ProgressMeterWrapper",
    "TokenCounter",
    "TrajectoryRecorder",
    "Trial",
    "branch",
    "make_env",
    "offer_trial",
    "read_trajectories",
    "score_actions",
    "step_all",
    "token_to_go",
    "try_actions",
    "wrap_env",
    "write_trajectory",
]
