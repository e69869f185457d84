"""Actors that propose assistant responses, and selectors that pick among them.

``load_actor(spec)`` builds an actor (``scripted:``, ``hf:``, ``vllm:``, ``openai:``); model
backends are imported on first use. ``NaturalSelector`` (k=1), ``RandomSelector`` and
``GuidedSelector`` (best-of-k by the progress meter) turn an actor into a rollout policy;
``PlannerSelector`` (best-of-k by the planner's plan length) is guidance's ceiling where a planner exists,
``GoldSelector`` (best-of-k by the gold tokens that still win) where a gold policy does.
"""

from .._optional import lazy_attributes
from .base import Actor, ChatActor, SamplingParams
from .conditions import DEFAULT_CONDITIONS, make_agent, parse_condition
from .loading import load_actor
from .scripted import ScriptedActor
from .selectors import GoldSelector, GuidedSelector, NaturalSelector, PlannerSelector, RandomSelector, Selection

_LAZY = {"TransformersActor": ".hf", "VLLMActor": ".vllm", "OpenAIActor": ".http"}

__all__ = [
    "DEFAULT_CONDITIONS",
    "Actor",
    "ChatActor",
    "GoldSelector",
    "GuidedSelector",
    "NaturalSelector",
    "PlannerSelector",
    "OpenAIActor",
    "RandomSelector",
    "SamplingParams",
    "ScriptedActor",
    "Selection",
    "TransformersActor",
    "VLLMActor",
    "load_actor",
    "make_agent",
    "parse_condition",
]


__getattr__ = lazy_attributes(__name__, _LAZY)
