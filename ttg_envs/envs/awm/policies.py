"""Scripted AWM policies: replay of a task's gold tool calls, and an epsilon-noisy version of it.

Gold sequences ship with the bundled scenarios (``data/gold_calls.jsonl``, the project's own file;
AgentWorldModel-1K itself has none). The expert looks at the transcript, finds how many gold calls
have already succeeded in order, and makes the next one (one call per response); after the last
it gives the task's final answer. The noisy expert replaces a step, with probability ``eps``, by a
call copied from another gold step of the same scenario, which may be a read, a wrong write or an
invalid call.
"""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path
from typing import Any

from ..._io import read_jsonl
from ...tools import ToolCall, format_tool_calls
from ..noisy import EXPERT_POLICY_NAMES, NoisyPolicy, make_expert_policy
from .env import BUNDLED_DATA_DIR, AWMEnv

GOLD_FILE = "gold_calls.jsonl"


@lru_cache(maxsize=4)
def load_gold(folder: str = str(BUNDLED_DATA_DIR)) -> dict[str, dict[str, Any]]:
    """Gold call sequences by task id (``scenario/index``) from a folder's ``gold_calls.jsonl``."""
    path = Path(folder) / GOLD_FILE
    if not path.exists():
        return {}
    return {f"{r['scenario']}/{r['task_idx']}": r for r in read_jsonl(path)}


def _awm(env) -> AWMEnv:
    base = env.unwrapped
    if not isinstance(base, AWMEnv):
        raise TypeError(f"AWM policies need an AWMEnv, got {type(base).__name__}")
    return base


def _gold(base: AWMEnv) -> dict[str, Any]:
    gold = load_gold().get(base.current_task.id)
    if gold is None:
        raise LookupError(f"no gold calls for task {base.current_task.id!r} (only the bundled scenarios have them)")
    return gold


def executed_calls(messages: list[dict[str, Any]]) -> list[tuple[str, dict[str, Any]]]:
    """``(name, arguments)`` of every call in the transcript whose result was not an error."""
    results = {m.get("tool_call_id"): m.get("content", "") for m in messages if m.get("role") == "tool"}
    done = []
    for message in messages:
        for call in message.get("tool_calls") or []:
            if not str(results.get(call["id"], "Error")).startswith("Error"):
                function = call["function"]
                done.append((function["name"], json.loads(function["arguments"])))
    return done


def call_text(name: str, arguments: dict[str, Any]) -> str:
    """An assistant response making one call."""
    return "<think>Next step.</think>\n" + format_tool_calls([ToolCall(name, arguments)])


class ExpertPolicy:
    """Makes the next gold call not yet made, then answers."""

    name = "expert"

    def __call__(self, env) -> str:
        """The next response for ``env``."""
        base = _awm(env)
        gold = _gold(base)
        done = executed_calls(base.messages)
        position = 0
        for name, arguments in done:
            if position < len(gold["calls"]) and (name, arguments) == (
                gold["calls"][position]["name"],
                gold["calls"][position]["arguments"],
            ):
                position += 1
        if position < len(gold["calls"]):
            call = gold["calls"][position]
            return call_text(call["name"], call["arguments"])
        return f"<think>The task is done.</think>\n{gold['final_answer']}"


class NoisyExpertPolicy(NoisyPolicy):
    """The expert with probability ``1 - eps``; otherwise a call from another gold step of the scenario."""

    expert = ExpertPolicy()

    def noise(self, env) -> str:
        """A call drawn from the scenario's gold and wrong call sequences."""
        scenario = _awm(env).current_task.scenario
        pool = [
            c for task_id, g in sorted(load_gold().items()) if task_id.startswith(scenario + "/") for c in g["calls"] + g["wrong_calls"]
        ]
        call = pool[int(self.rng.integers(len(pool)))]
        return call_text(call["name"], call["arguments"])


#: Scripted policies by name, as ``ttg rollout --policies`` and ``scripted:<name>`` actors name them.
POLICY_NAMES = EXPERT_POLICY_NAMES


def make_policy(name: str, *, seed: int | None = None, eps: float = 0.3):
    """Build a scripted AWM policy by name (``expert`` or ``noisy_expert``)."""
    return make_expert_policy(name, ExpertPolicy, NoisyExpertPolicy, "AWM", seed=seed, eps=eps)
