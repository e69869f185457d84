"""Wrappers that add token counts, recording and branching to any ttg env."""

from .branching import BranchableWrapper, Trial, branch, try_actions
from .lookahead import Lookahead
from .recorder import TrajectoryRecorder, read_trajectories, write_trajectory
from .token_counter import TokenCounter, token_to_go

__all__ = [
    "BranchableWrapper",
    "Lookahead",
    "TokenCounter",
    "TrajectoryRecorder",
    "Trial",
    "branch",
    "read_trajectories",
    "token_to_go",
    "try_actions",
    "write_trajectory",
]
