"""``ToolEnv``: the part of a tool-use env that does not depend on the benchmark.

It parses responses with :func:`~ttg_envs.tools.parse_tool_calls`, puts the tool schemas in the
system prompt (Qwen3 layout) and in ``info["tools"]``, and turns one response's calls into the
transcript turn: an assistant message with OpenAI ``tool_calls`` and one ``tool`` message per call.
Calls that fail validation are not executed; their tool message says why.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from ..core import StepOutcome, TextEnv, cap_text
from .bounds import MAX_CALLS_PER_STEP, MAX_RESULT_CHARS, BoundExceeded, value_problem
from .calls import ParsedResponse, ToolCall
from .parsing import parse_tool_calls
from .prompt import format_tool_responses, render_tools_prompt
from .react import ParsedAction
from .schema import Tool, tool_index, validate_call


@dataclass
class ToolTurn:
    """The result of running one response's calls (see :meth:`ToolEnv._run_calls`)."""

    calls: list[ToolCall]
    results: list[str]
    errors: list[str | None]
    assistant_message: dict[str, Any]
    messages: list[dict[str, Any]]
    observation: str
    #: The bound a call crossed (:class:`~ttg_envs.tools.bounds.BoundExceeded`); later calls were not run.
    bound: str | None = None

    @property
    def valid(self) -> bool:
        """True when every call passed validation."""
        return all(e is None for e in self.errors)

    @property
    def error(self) -> str | None:
        """The validation errors joined, or None."""
        problems = [e for e in self.errors if e]
        return " ".join(problems) or None

    def outcome(self) -> StepOutcome:
        """The step's outcome: the results as the observation, validity, and the transcript turn."""
        return StepOutcome(
            observation=self.observation,
            action_valid=self.valid,
            error=self.error,
            assistant_message=self.assistant_message,
            messages=self.messages,
        )


class ToolEnv(TextEnv):
    """Base class of tool-use envs. Subclasses provide ``tools`` and ``instructions`` and implement
    ``_apply(response: ParsedResponse)`` with :meth:`_run_calls` for the calls."""

    #: Reject calls whose argument values do not match the schema's types (names are always checked).
    check_argument_types: bool = True
    #: A subclass's per-episode engine state, if it keeps one there (clones start without it).
    _episode: Any = None

    @property
    def tools(self) -> list[Tool]:
        """The tools the assistant can call in the current state, in prompt order."""
        raise NotImplementedError

    @property
    def callable_tools(self) -> list[Tool]:
        """The tools a call may name: ``tools`` unless the env also executes tools it has not shown."""
        return self.tools

    @property
    def instructions(self) -> str:
        """Task text placed before the tools block in the system prompt."""
        return ""

    @property
    def system_prompt(self) -> str:
        """``instructions`` and the ``# Tools`` block, as Qwen3's chat template lays them out."""
        return render_tools_prompt(self.tools, self.instructions)

    def _clone(self) -> ToolEnv:
        # A clone gets no per-episode engine state (``_episode``) of its own: branching restores it.
        clone = super()._clone()
        clone._episode = None
        return clone

    def tools_info(self) -> list[dict[str, Any]]:
        """``info["tools"]``: the current tools in OpenAI function format."""
        return [tool.openai() for tool in self.tools]

    def parse_action(self, text: str) -> ParsedAction:
        """A :class:`ParsedResponse` (text and calls), or the parse error. Never raises."""
        response = parse_tool_calls(text, tool_index(self.callable_tools))
        return ParsedAction(None, response.error) if response.error else ParsedAction(response)

    def call_error(self, call: ToolCall, index: dict[str, Tool] | None = None) -> str | None:
        """Why :meth:`_run_calls` would not execute ``call`` (its validation or bounds error), or None.

        ``index``: :func:`~ttg_envs.tools.schema.tool_index` of :attr:`callable_tools`, where the caller has it.
        """
        index = tool_index(self.callable_tools) if index is None else index
        return validate_call(call, index, check_types=self.check_argument_types) or _bounded(call)

    def _run_calls(self, response: ParsedResponse, execute: Callable[[ToolCall], str]) -> ToolTurn:
        """Validate and execute ``response.calls`` in order with ``execute(call) -> result text``.

        Calls get deterministic ids ``call_<step>_<i>``. An invalid call is not executed and its
        result is the validation error, as is a call whose arguments cross
        :data:`~ttg_envs.tools.bounds.ARGUMENT_BOUNDS`; an exception from ``execute`` becomes an
        ``Error: ...`` result. A response with more than
        :data:`~ttg_envs.tools.bounds.MAX_CALLS_PER_STEP` calls runs none of them. When ``execute``
        raises :class:`~ttg_envs.tools.bounds.BoundExceeded` the calls after it are not run and
        ``bound`` says why (the executor decides what is undone). Each result is cut to
        :data:`~ttg_envs.tools.bounds.MAX_RESULT_CHARS` characters, with a marker saying how many were cut.
        """
        index = tool_index(self.callable_tools)
        calls = [c.with_id(f"call_{self.elapsed_steps}_{i}") for i, c in enumerate(response.calls)]
        results, errors = [], []
        bound = None
        if len(calls) > MAX_CALLS_PER_STEP:
            bound = f"the response makes {len(calls)} calls; the bound is {MAX_CALLS_PER_STEP} per step, so none was run"
        for call in calls:
            if bound is not None:
                error = f"Not run: {bound}."
            else:
                error = self.call_error(call, index)
            if error is None:
                try:
                    result = execute(call)
                except BoundExceeded as exc:
                    bound = str(exc)
                    error = f"Bound exceeded: {exc}."
                    result = f"Error: {error}"
                except Exception as exc:  # a backend bug must not escape step(); the model sees it
                    result = f"Error: {type(exc).__name__}: {exc}"
            else:
                result = f"Error: {error}"
            errors.append(error)
            results.append(cap_text(result, MAX_RESULT_CHARS))
        assistant: dict[str, Any] = {"role": "assistant", "content": response.content}
        if calls:
            assistant["tool_calls"] = [c.openai() for c in calls]
        messages = [{"role": "tool", "tool_call_id": c.id, "name": c.name, "content": r} for c, r in zip(calls, results)]
        return ToolTurn(calls, results, errors, assistant, messages, format_tool_responses(results), bound)


def _bounded(call: ToolCall) -> str | None:
    problem = value_problem(call.arguments)
    return f"Invalid arguments for {call.name!r}: {problem}." if problem else None
