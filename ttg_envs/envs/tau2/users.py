"""The user side of a tau2 conversation: an LLM behind an OpenAI-compatible endpoint, or a script.

A user answers the agent's text messages (and the results of its own tool calls) with a tau2
``UserMessage``: text, or tool calls on its side of the environment (telecom's phone). Users keep
their conversation state in plain attributes, so a deep copy branches them.
"""

from __future__ import annotations

import json
from typing import Any, Sequence

from ...tools import ToolCall
from .data import tau2
from .endpoint import ChatEndpoint
from .gold import UserTurn

#: The token a user writes to end the conversation (tau2's ``###STOP###``).
STOP = "###STOP###"


class LLMUser:
    """tau2's user simulator (its guidelines, the task's scenario, its role flipping) answered by an
    OpenAI-compatible endpoint instead of LiteLLM.

    Args:
        task: the tau2 task (its ``user_scenario`` is the simulator's instructions).
        user_tools: tau2 ``Tool`` objects of the user's side (telecom), or None.
        endpoint: where to ask for completions.
    """

    def __init__(self, task: Any, user_tools: Sequence[Any] | None, endpoint: ChatEndpoint):
        simulator = tau2("tau2.user.user_simulator").UserSimulator(
            tools=list(user_tools) if user_tools else None, instructions=str(task.user_scenario)
        )
        self.endpoint = endpoint
        self.tool_schemas = [t.openai_schema for t in user_tools] if user_tools else []
        self.state = simulator.get_init_state()

    def respond(self, incoming: Sequence[Any]) -> Any:
        """The user's next message after ``incoming`` (the agent's text message, or tool results)."""
        message_module = tau2("tau2.data_model.message")
        before = len(self.state.messages)
        self.state.messages.extend(incoming)
        try:
            prompt = tau2("tau2.utils.llm_utils").to_litellm_messages(self.state.system_messages + self.state.flip_roles())
            reply = self.endpoint.complete(prompt, self.tool_schemas)
        except BaseException:
            del self.state.messages[before:]  # a failed request leaves the user as it was
            raise
        calls = [_call(c) for c in reply.get("tool_calls") or []]
        message = message_module.UserMessage(
            role="user",
            content=reply.get("content") or None,
            tool_calls=[message_module.ToolCall(id=c.id, name=c.name, arguments=c.arguments, requestor="user") for c in calls] or None,
        )
        self.state.messages.append(message)
        return message


def _call(raw: dict[str, Any]) -> ToolCall:
    function = raw.get("function") or {}
    arguments = function.get("arguments") or {}
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments) if arguments.strip() else {}
        except ValueError:  # the tool then answers with its missing-argument error
            arguments = {}
    return ToolCall(str(function.get("name", "")), arguments if isinstance(arguments, dict) else {}, str(raw.get("id", "")))


class ScriptedUser:
    """Replays a fixed script: turn ``i`` answers the agent's ``i``-th text message (turn 0 the greeting).

    A turn's tool calls are made first (one message holding them all), then its text; after the last
    turn the user answers with the stop token.
    """

    def __init__(self, turns: Sequence[UserTurn]):
        self.turns = list(turns)
        self.position = 0
        self.calls_made = False

    def respond(self, incoming: Sequence[Any]) -> Any:
        """The next scripted message (``incoming`` only matters through its order)."""
        message_module = tau2("tau2.data_model.message")
        if self.position >= len(self.turns):
            return message_module.UserMessage(role="user", content=STOP)
        turn = self.turns[self.position]
        if turn.calls and not self.calls_made:
            self.calls_made = True
            return message_module.UserMessage(
                role="user",
                tool_calls=[message_module.ToolCall(id="", name=c.name, arguments=dict(c.arguments), requestor="user") for c in turn.calls],
            )
        self.position += 1
        self.calls_made = False
        return message_module.UserMessage(role="user", content=turn.text)
