"""The gold path of a tool env (BFCL, tau2: envs with a ``gold`` policy): the gold episode's moves
of a task, the tokens still to go before each, and whether a suffix of them still wins from a state.

Meter evaluation labels steps by them (``training.meter.evaluation.label_gold_path``) and the
``gold-<k>`` selector chooses by them (``agents.selectors.GoldSelector``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..tools import action_text

__all__ = ["gold_actions", "gold_to_go", "replay_wins"]


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


def gold_to_go(moves: Sequence[dict[str, Any]]) -> list[int]:
    """Tokens of gold's moves still to do before each of ``moves`` and after the last (len + 1
    values, the last 0): Qwen3 tokens of the text that makes each move, as ``TokenCounter`` counts them."""
    from ..tokenization import load_tokenizer
    from .token_counter import token_to_go

    tokenizer = load_tokenizer(None)
    return [*token_to_go([tokenizer.count(action_text(m)) for m in moves]), 0]
