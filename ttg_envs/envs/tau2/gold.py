"""The gold conversation of a tau2 task, derived from its evaluation criteria.

The task's gold actions are split into runs by requestor. The agent plays the assistant runs (one
tool call per step) and asks the user to act before each user run; the scripted user opens with
the task's reason for calling, performs each user run with its own (user-side) tools and answers
"Done."; the agent's last message states every ``communicate_info`` item, and the user then ends
the conversation with tau2's stop token.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from itertools import groupby
from typing import Any, Union

from ...tools import ToolCall

#: What the gold agent says before each run of user-side actions.
ASK_USER = "Please do the next step on your device and tell me when it is done."
#: The scripted user's answer after performing its actions.
USER_DONE = "Done."


@dataclass(frozen=True)
class UserTurn:
    """One scripted user turn: tool calls made on the user's side (telecom), then a text message."""

    text: str
    calls: tuple[ToolCall, ...] = field(default_factory=tuple)


#: One gold agent step: a tool call or a text message to the user.
AgentMove = Union[ToolCall, str]


def gold_actions(task: Any, drop_last: bool = False) -> list[Any]:
    """The task's gold actions (tau2 ``Action`` objects), without the last one if ``drop_last``."""
    criteria = task.evaluation_criteria
    actions = list(criteria.actions or []) if criteria is not None else []
    return actions[:-1] if drop_last else actions


def last_action_writes(task: Any, environment: Any) -> bool:
    """True when the task's last gold action is a write tool of ``environment`` (tau2's ``ToolType.WRITE``).

    Only then must dropping it change tau2's verdict: a read-only last action (``get_order_details``,
    ``calculate``, ``transfer_to_human_agents``...) leaves the databases as they were.
    """
    actions = gold_actions(task)
    if not actions:
        return False
    toolkit = environment.user_tools if actions[-1].requestor == "user" else environment.tools
    return toolkit.tool_type(actions[-1].name).value == "write"


def gold_plan(task: Any, drop_last: bool = False) -> tuple[list[AgentMove], list[UserTurn]]:
    """The gold agent's moves and the scripted user's turns for ``task``."""
    runs = [(requestor, list(group)) for requestor, group in groupby(gold_actions(task, drop_last), key=lambda a: a.requestor)]
    first_calls: tuple[ToolCall, ...] = ()
    if runs and runs[0][0] == "user":
        first_calls = tuple(ToolCall(a.name, dict(a.arguments)) for a in runs.pop(0)[1])
    user = [UserTurn(_opening(task), first_calls)]
    agent: list[AgentMove] = []
    for requestor, actions in runs:
        calls = [ToolCall(a.name, dict(a.arguments)) for a in actions]
        if requestor == "user":
            agent.append(ASK_USER)
            user.append(UserTurn(USER_DONE, tuple(calls)))
        else:
            agent.extend(calls)
    agent.append(_closing(task))
    return agent, user


def _opening(task: Any) -> str:
    instructions = getattr(task.user_scenario, "instructions", None)
    reason = getattr(instructions, "reason_for_call", None)
    return f"Hi. {reason}" if reason else "Hi, I need some help."


def _closing(task: Any) -> str:
    criteria = task.evaluation_criteria
    info = list(criteria.communicate_info or []) if criteria is not None else []
    # tau2 matches each item against the message with its commas removed, so items are not comma-joined.
    return "Your request has been handled." + (" Details: " + "; ".join(info) + "." if info else "")
