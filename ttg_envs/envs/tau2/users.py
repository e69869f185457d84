"""The user side of a tau2 conversation: an LLM behind an OpenAI-compatible endpoint, or a script.

A user answers the agent's text messages (and the results of its own tool calls) with a tau2
``UserMessage``: text, or tool calls on its side of the environment (telecom's phone). Users keep
their conversation state in plain attributes, so a deep copy branches them.
"""

from __future__ import annotations

import copy
import json
import re
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
    turn the user answers with the stop token. The script is a tuple, never changed, so a copy (an
    env's branch deep-copies its user) shares it and copies only the position.
    """

    def __init__(self, turns: Sequence[UserTurn]):
        self.turns: tuple[UserTurn, ...] = tuple(turns)
        self.position = 0
        self.calls_made = False

    def __deepcopy__(self, memo: dict) -> ScriptedUser:
        """A copy with its own position that shares the (immutable) script."""
        clone = object.__new__(type(self))
        memo[id(self)] = clone
        for name, value in self.__dict__.items():
            clone.__dict__[name] = value if name == "turns" else copy.deepcopy(value, memo)
        return clone

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


class ScenarioUser:
    """An offline user that converses from the task's user scenario, for trying an own agent without
    an LLM user: rule-based, deterministic, and not tau2's benchmark user (report its scores as such).

    It opens with the scenario's reason for calling, in the first person; it answers a question about
    who it is or which order, reservation or account (name, zip code, email, user id, any id) with its
    known information and every id its scenario holds, says what it does not know when asked for that,
    agrees when asked to confirm, and ends the conversation (``###STOP###``) when asked whether there is
    anything else or after ``max_turns`` answers.

    Args:
        task: the tau2 task (its ``user_scenario.instructions``).
        max_turns: answers before it stops.
    """

    def __init__(self, task: Any, max_turns: int = 10):
        instructions = task.user_scenario.instructions
        text = lambda name: first_person(str(getattr(instructions, name, "") or "")).strip()  # noqa: E731
        if not hasattr(instructions, "reason_for_call"):  # free-text instructions
            self.reason, self.known, self.unknown = first_person(str(instructions)).strip(), "", ""
        else:
            self.reason, self.known, self.unknown = text("reason_for_call"), text("known_info"), text("unknown_info")
        self.ids = _ids(f"{self.reason} {self.known}")
        self.max_turns = int(max_turns)
        self.turns = 0
        self.confirmed = False

    def respond(self, incoming: Sequence[Any]) -> Any:
        """The user's answer to the agent's last text message in ``incoming``."""
        message_module = tau2("tau2.data_model.message")
        said = " ".join(str(getattr(m, "content", "") or "") for m in incoming).lower()
        self.turns += 1
        return message_module.UserMessage(role="user", content=self.answer(said))

    def answer(self, said: str) -> str:
        """The reply to ``said`` (the agent's words, lower case); the first call opens the conversation."""
        if self.turns == 1:
            return self.reason or "I need some help."
        if self.turns > self.max_turns or re.search(r"anything else|something else|further assist", said):
            return f"No, that's all. Thank you! {STOP}"
        asks_id = re.search(r"\b(name|zip|postal|email|e-mail|user ?id|order|reservation|booking|account|phone|number|id)\b", said)
        if asks_id:
            if re.search(r"e-?mail", said) and "email" in self.unknown.lower():
                return self.unknown + (f" {self.known}" if self.known else "")
            ids = [i for i in self.ids if i not in self.known]
            extra = f" The ids I have: {', '.join(ids)}." if ids else ""
            return (self.known or "I don't have that information.") + extra
        if re.search(r"confirm|proceed|shall i|should i|would you like|do you want|is that (ok|correct|right)|\(yes\)|yes or no", said):
            self.confirmed = True
            return "Yes, please go ahead."
        if self.confirmed:
            return f"Thank you, that's everything I needed. {STOP}"
        return f"To be clear: {self.reason}"


_PRONOUNS = [
    (r"\byou (?=(?:name|zip|email|order|user id)\b)", "my "),  # "You name is ..." occurs in tau2's data
    (r"\byou are\b", "I am"),
    (r"\byou were\b", "I was"),
    (r"\byou have\b", "I have"),
    (r"\byou'd\b", "I'd"),
    (r"\byou're\b", "I'm"),
    (r"\byou've\b", "I've"),
    (r"\byou'll\b", "I'll"),
    (r"\byourself\b", "myself"),
    (r"\byours\b", "mine"),
    (r"\byour\b", "my"),
    (r"\b(to|for|with|from|tell|give|send|help|ask|asks|offer|offers|call|calls) you\b", r"\1 me"),
    (r"\byou\b", "I"),
]


def first_person(text: str) -> str:
    """``text`` written to the user in the second person, rewritten in the first ("You want your order" ->
    "I want my order"); a plain pronoun swap, good enough for a scenario's short sentences."""
    for pattern, repl in _PRONOUNS:
        text = re.sub(pattern, lambda m, r=repl: _cased(m.expand(r), m.group(0)), text, flags=re.IGNORECASE)
    return text


def _cased(word: str, like: str) -> str:
    return word[0].upper() + word[1:] if like[0].isupper() else word


def _ids(text: str) -> list[str]:
    """Order, reservation and user ids in a scenario (``#W2378156``, ``EHGLP3``, ``yusuf_rossi_9620``)."""
    found = re.findall(r"#?\b(?=[A-Za-z0-9_]*\d)[A-Za-z0-9]+(?:_[A-Za-z0-9]+)*\b", text)
    return list(dict.fromkeys(i for i in found if len(i.strip("#")) >= 5 and not i.isdigit()))
