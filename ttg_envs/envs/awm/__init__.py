"""AgentWorldModel: SQLite-backed tool-use environments in the AWM-1K format, run in a sandbox."""

from .env import AWMEnv, AWMTask
from .format import Scenario, load_scenarios
from .policies import ExpertPolicy, NoisyExpertPolicy

__all__ = ["AWMEnv", "AWMTask", "ExpertPolicy", "NoisyExpertPolicy", "Scenario", "load_scenarios"]
