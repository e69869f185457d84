"""ALFWorld on alfworld's PDDL engine: the env, its task lists and the scripted expert policies."""

from .env import ALFWorldEnv
from .policies import ExpertPolicy, NoisyExpertPolicy
from .tasks import SPLITS, TASK_TYPES, AlfredTask, load_tasks

__all__ = ["ALFWorldEnv", "AlfredTask", "ExpertPolicy", "NoisyExpertPolicy", "SPLITS", "TASK_TYPES", "load_tasks"]
