"""BFCL's two scorings as strategies that :class:`~.env.BFCLEnv` picks once, at construction.

``official`` gives bfcl-eval's harness verdict for the same text under ``model_style`` (its decoder
reads the response, the docs' dotted names, its own prompts under ``prompting``); ``lenient`` is the
forgiving parse the README lists departure by departure (any call syntax, positional arguments,
``_`` for ``.``; a malformed multi-turn step is an invalid step and the turn goes on).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Iterable

from ...core import ParsedAction, StepOutcome
from ...tools import ParsedResponse, ToolCall, format_tool_responses, parse_tool_calls, tool_index
from ...tools.bounds import MAX_CALLS_PER_STEP, BoundExceeded
from .data import bfcl_module, tool_name
from .harness import (
    HarnessDecoder,
    TooLarge,
    call_of_source,
    literal_bound_problem,
    single_turn_calls,
    single_turn_verdict,
    strip_reasoning,
)

#: The env a scoring acts on (a :class:`~.env.BFCLEnv`; not imported: the env imports this module).
BFCLEnv = Any

#: The error of an empty reply (or one that is only reasoning): an invalid step in both scorings.
EMPTY_RESPONSE = "Empty response: call a tool, or answer in text."
#: What a single-turn entry's calls get as results: they are scored, not executed.
RECORDED = "Recorded for scoring (single-turn entries are not executed)."


def flag(outcome: StepOutcome, error: str | None) -> StepOutcome:
    """``outcome`` marked as an invalid step when ``error`` is set (what the scoring did stays)."""
    if error is not None:
        outcome.action_valid, outcome.error = False, error
    return outcome


class Scoring:
    """What both scorings hold: the model style, and whether bfcl-eval's prompting texts are shown."""

    name: str
    #: Tools keep the docs' dotted names (else ``_`` stands for ``.``).
    keep_dots: bool

    def __init__(self, model_style: str):
        self.model_style = model_style
        #: bfcl-eval's own prompting texts (system prompt, added-function turns) are shown.
        self.prompting = False


class LenientScoring(Scoring):
    """Tool calls in any supported syntax (dotted names also resolve), executed call by call."""

    name = "lenient"
    keep_dots = False

    def max_steps(self, max_steps: int, per_turn: int, longest: int) -> int:
        """The episode's truncation limit: the one asked for."""
        return max_steps

    def call_style(self, style: str) -> str:
        """The call syntax a scripted policy writes (``style``: the one it was asked for)."""
        return style

    def parse(self, env: BFCLEnv, text: str) -> ParsedAction:
        """Tool calls in any supported syntax; BFCL's dotted names (``math.factorial``) also resolve."""
        index = tool_index(env.callable_tools)
        aliases = {name: index[tool_name(name)] for name in env._dotted_names if tool_name(name) in index}
        response = parse_tool_calls(text, {**aliases, **index})
        if response.error:
            return ParsedAction(None, response.error)
        calls = tuple(ToolCall(tool_name(c.name), c.arguments) if c.name in aliases else c for c in response.calls)
        return ParsedAction(replace(response, calls=calls))

    def apply(self, env: BFCLEnv, response: ParsedResponse) -> StepOutcome:
        """Score a single-turn response, run a step's calls, or end the turn on a response without any."""
        empty = None if response.calls or strip_reasoning(response.content).strip() else EMPTY_RESPONSE
        if env._episode is None:
            return flag(env._score_single(response.calls, response), empty)
        if response.calls:
            return env._tool_step(response)
        return flag(env._end_turn(response), empty)

    def record_single(self, env: BFCLEnv, outcome: StepOutcome, response: ParsedResponse) -> None:
        """Put a single-turn response's calls into ``outcome``'s transcript turn, validated."""
        turn = env._run_calls(response, lambda call: RECORDED)
        outcome.assistant_message, outcome.messages = turn.assistant_message, turn.messages
        outcome.action_valid, outcome.error = turn.valid, turn.error

    def truth_results(self, env: BFCLEnv, truth_calls: list[str]) -> list[str]:
        """Run one turn's ground-truth calls on the episode's truth backends."""
        return [env._episode.truth.execute(call) for call in env._truth_calls(truth_calls)]


class OfficialScoring(Scoring):
    """bfcl-eval's decoder for ``model_style`` reads the text when it is applied; verdicts are the harness's."""

    name = "official"
    keep_dots = True

    def __init__(self, model_style: str):
        super().__init__(model_style)
        self.prompting = model_style == "prompting"

    def max_steps(self, max_steps: int, per_turn: int, longest: int) -> int:
        """Never truncate before the harness would stop: each turn ends by its ``per_turn + 1``-th step."""
        return max(max_steps, (per_turn + 1) * longest)

    def call_style(self, style: str) -> str:
        """Hermes blocks, what the ``fc`` decoder reads (``prompting`` policies write Python calls)."""
        return "hermes"

    def parse(self, env: BFCLEnv, text: str) -> ParsedAction:
        """The text itself: bfcl-eval's decoder reads it when it is applied."""
        return ParsedAction(text)

    def apply(self, env: BFCLEnv, text: str) -> StepOutcome:
        """The harness's verdict for a single-turn entry, or one step of its multi-turn inference loop."""
        task = env._task
        if env._episode is None:
            calls = single_turn_calls(task, text, self.model_style)
            verdict = single_turn_verdict(task, text, self.model_style)
            outcome = env._single_outcome(verdict, ParsedResponse(text, tuple(calls), self.model_style))
            outcome = flag(outcome, self.error(env, text, [c.name for c in calls]))
            bound = literal_bound_problem(task, text, self.model_style)
            if bound:  # the harness's verdict stands (a decode failure); the step names our bound
                outcome.action_valid, outcome.error = False, f"Bound exceeded: {bound}."
                outcome.observation = f"{outcome.error}\n\n{outcome.observation}"
            return outcome
        # The harness's inference loop: a step it cannot decode, or that decodes to no call, ends the turn.
        try:
            sources = HarnessDecoder(self.model_style).decode_execute(strip_reasoning(text), False)
        except TooLarge as exc:  # a bound of ours, not a decode failure of the harness: the turn goes on
            return self._bound_step(env, str(exc), text, [])
        except Exception:
            sources = []
        utils = bfcl_module("bfcl_eval.eval_checker.multi_turn_eval.multi_turn_utils")
        if not isinstance(sources, list) or utils.is_empty_execute_response(sources):
            return flag(env._end_turn(ParsedResponse(text)), self.error(env, text, []))
        sources = [str(s) for s in sources]
        return flag(self._calls(env, text, sources), self.error(env, text, [call_of_source(s).name for s in sources]))

    def record_single(self, env: BFCLEnv, outcome: StepOutcome, response: ParsedResponse) -> None:
        """Put the decoded calls into ``outcome``'s transcript turn as they are (the verdict is the harness's)."""
        results = [RECORDED] * len(response.calls)
        outcome.assistant_message, outcome.messages = env._transcript(response.content, response.calls, results)

    def truth_results(self, env: BFCLEnv, truth_calls: list[str]) -> list[str]:
        """Run one turn's ground-truth call sources on the truth backends, as the harness does."""
        truth = env._episode.truth
        return [truth.execute_source(call) for call in truth_calls]

    def error(self, env: BFCLEnv, text: str, names: Iterable[str]) -> str | None:
        """Why an officially scored step is invalid (None: valid), by the rule every env follows: an
        empty reply, a call to no tool of the entry, or call markup that bfcl-eval's decoder for
        ``model_style`` does not read. ``names`` are the functions the decoder read in ``text``. Only
        ``action_valid`` and ``error`` follow from it; the verdict stays the harness's."""
        visible = strip_reasoning(text).strip()
        if not visible:
            return EMPTY_RESPONSE
        names = list(names)
        known = {t.name for t in env.callable_tools}
        unknown = [name for name in names if name not in known]
        if unknown:
            return f"Unknown tool {unknown[0]!r}. Available tools: {', '.join(t.name for t in env.tools) or 'none'}."
        if not names:
            parsed = parse_tool_calls(visible)
            if parsed.error:
                return parsed.error
            if parsed.calls:
                return f"Invalid tool call: bfcl-eval's {self.model_style!r} decoder reads no call in this response."
        return None

    def _calls(self, env: BFCLEnv, text: str, sources: list[str]) -> StepOutcome:
        """Execute a step's decoded calls as the harness does (an unknown name is its error result);
        a step whose calls cross a bound is undone whole and is an invalid step naming it."""
        task, episode = env._task, env._episode
        try:
            if len(sources) > MAX_CALLS_PER_STEP:
                raise BoundExceeded(f"the response makes {len(sources)} calls; the bound is {MAX_CALLS_PER_STEP} per step, so none was run")
            with episode.model.atomic():
                results = [episode.model.execute_source(s) for s in sources]
        except BoundExceeded as exc:
            return self._bound_step(env, str(exc), text, sources)
        episode.call_steps += 1
        episode.turn_steps += 1
        episode.results.extend(results)
        assistant, messages = env._transcript(text, [call_of_source(s) for s in sources], results)
        if episode.call_steps <= env.max_steps_per_turn:
            return StepOutcome(observation=format_tool_responses(results), assistant_message=assistant, messages=messages)
        # Past the limit the harness stops the entry; on the last turn its record is still complete and graded.
        if episode.turn == len(task.turns) - 1:
            outcome = env._end_turn(ParsedResponse(text))
        else:
            outcome = env._force_terminate(StepOutcome(observation=""))
            outcome.observation = f"Turn {episode.turn} went past {env.max_steps_per_turn} steps; the episode is over."
        outcome.assistant_message, outcome.messages = assistant, messages + [{"role": "user", "content": outcome.observation}]
        return outcome

    def _bound_step(self, env: BFCLEnv, bound: str, text: str, sources: list[str]) -> StepOutcome:
        """An invalid step that changed nothing: a call crossed a bound (named in the observation)."""
        error = f"Bound exceeded: {bound}."
        assistant, messages = env._transcript(text, [call_of_source(s) for s in sources], [f"Error: {error}"] * len(sources))
        outcome = StepOutcome(observation=error, action_valid=False, error=error, assistant_message=assistant, messages=messages)
        return env._count_turn_step(outcome)


#: The scorings by their ``scoring=`` name.
SCORINGS: dict[str, type[Scoring]] = {"official": OfficialScoring, "lenient": LenientScoring}


def make_scoring(name: str, model_style: str) -> LenientScoring | OfficialScoring:
    """The scoring strategy ``name`` (``official`` or ``lenient``) for ``model_style``."""
    if name not in SCORINGS:
        raise ValueError(f"scoring must be one of {tuple(SCORINGS)}, got {name!r}")
    return SCORINGS[name](model_style)
