"""The gold path of a tool env (BFCL, tau2: envs with a ``gold`` policy): the gold episode's moves
of a task, each move as the text that makes it, and whether a suffix of them still wins from a state.

Meter evaluation labels steps by them (``training.meter.evaluation.label_gold_path``) and the
``gold-<k>`` selector chooses by them (``agents.selectors.GoldSelector``).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

__all__ = ["action_text", "gold_actions", "replay_wins"]


def gold_actions(env: Any, task_id: Any, env_id: str) -> list[dict[str, Any]] | None:
    """The assistant messages of the ``gold`` policy's episode on ``task_id`` (``env``: any wrapper
    stack of ``env_id``), or None when gold does not succeed there (its path then labels nothing)."""
    from ..registry import make_policy

    policy = make_policy(env_id, "gold", seed=0)
    _, info = env.reset(seed=0, options={"task_id": task_id})
    steps, done = 0, False
    while not done:
        _, _, terminated, truncated, info = env.step(policy(env))
        steps, done = steps + 1, terminated or truncated
    if not info.get("success"):
        return None
    return [m for m in env.unwrapped.messages if m.get("role") == "assistant"][-steps:]


def action_text(message: dict[str, Any]) -> str:
    """The text that makes ``message``'s move when sent to ``env.step``: its content, with its calls
    written as Hermes blocks where the transcript keeps them apart (tau2 stores the calls, not their text).

    >>> action_text({"role": "assistant", "content": "", "tool_calls": [{"function": {"name": "f", "arguments": '{"x": 1}'}}]})
    '<tool_call>\\n{"name": "f", "arguments": {"x": 1}}\\n</tool_call>'
    """
    from ..tools import ToolCall, format_tool_calls

    content = str(message.get("content") or "")
    calls = message.get("tool_calls") or ()
    if not calls or "<tool_call>" in content:
        return content
    text = format_tool_calls([ToolCall(c["function"]["name"], json.loads(c["function"]["arguments"] or "{}")) for c in calls], "hermes")
    return f"{content}\n{text}" if content.strip() else text


def replay_wins(env: Any, moves: Sequence[dict[str, Any]]) -> bool:
    """Whether the assistant messages ``moves``, sent one per step from ``env``'s state (a branch of
    it, closed after), win the episode; an env already done counts its own outcome."""
    if env.done:
        return bool(env.success)
    branch = env.branch()
    try:
        info: dict[str, Any] = {}
        for move in moves:
            _, _, terminated, truncated, info = branch.step(action_text(move))
            if terminated or truncated:
                break
        return bool(branch.done and info.get("success"))
    finally:
        branch.close()
