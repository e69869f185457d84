"""``ttg/BFCL-v0``: the Berkeley Function-Calling Leaderboard (v3 categories) on bfcl-eval's data,
function backends and official checkers."""

from __future__ import annotations

import copy
import hashlib
import json
from dataclasses import dataclass, field, replace
from typing import Any, Iterable

from ...core import ParsedAction, StepOutcome
from ...registry import turn_limit
from ...tools import ParsedResponse, Tool, ToolCall, ToolEnv, parse_tool_calls, render_tool_list, tool_index
from ...tools.statecopy import copy_state
from .backends import Backends
from .checker import check_single_turn, check_turn
from .data import BFCLTask, bfcl_module, load_tasks, to_tool, tool_name
from .harness import MODEL_STYLES
from .scoring import EMPTY_RESPONSE, SCORINGS, make_scoring

#: bfcl-eval's per-turn limit on steps with calls (``MAXIMUM_STEP_LIMIT``); past it the entry fails.
MAX_STEPS_PER_TURN = 20
#: ``scoring=``: ``official`` (bfcl-eval's decode and verdicts) or ``lenient`` (the forgiving parser; README).
SCORING_MODES = tuple(SCORINGS)
__all__ = ["EMPTY_RESPONSE", "MAX_STEPS_PER_TURN", "SCORING_MODES", "BFCLEnv"]


@dataclass
class _Episode:
    """The mutable state of one multi-turn episode (snapshotted for branching)."""

    model: Backends
    truth: Backends
    tools: list[Tool]
    turn: int = 0
    turn_steps: int = 0
    call_steps: int = 0
    results: list[str] = field(default_factory=list)
    verdicts: list[dict[str, Any]] = field(default_factory=list)


class BFCLEnv(ToolEnv):
    """BFCL v3 entries as episodes; reward and ``success`` from bfcl-eval's official checkers.

    Single-turn entries are one step: the response's calls are scored by the AST checker
    (irrelevance: success means no call). Multi-turn entries are executed: each user turn is an
    observation, the assistant calls tools any number of steps (executed on this episode's own
    backend instances), and a response without a call ends the turn, which is then checked as
    bfcl-eval's ``multi_turn_checker`` does; a failed turn ends the episode. miss_func entries
    reveal their held-out functions at the turn that adds them (new tools listed in that user
    message and in ``info["tools"]``).

    With ``scoring="official"`` every verdict is the one bfcl-eval's harness gives the same text for
    ``model_style`` (see :mod:`.harness`): its decoder reads the response (a multi-turn step it
    cannot decode, or that decodes to no call, ends the turn, as in its inference loop), tools are
    named as that style is scored (the docs' dotted names), and ``prompting`` also gets bfcl-eval's
    own system prompt. ``scoring="lenient"`` is the forgiving parse the README lists departure by
    departure. The two are strategies of :mod:`.scoring`, chosen here once (``self.scoring_rule``).

    Args:
        categories: category or group names (``non_live``, ``live``, ``multi_turn``,
            ``hallucination``, ``all``) or a list of them; see :data:`~.data.CATEGORIES`.
        split: the same as ``categories`` (so ``ttg rollout --splits multi_turn live`` works).
        scoring: ``official`` (default) or ``lenient``.
        model_style: official scoring's model style: ``fc`` (default; Hermes ``<tool_call>`` blocks as
            bfcl-eval's Qwen-FC handler reads them) or ``prompting`` (``[f(a=1)]``, bfcl-eval's prompt).
        max_steps: truncation limit over the whole episode (default: the registry's 100; official
            scoring raises it to 21 steps per turn of the longest entry, so the harness's own per-turn
            limit decides, whoever builds the env).
        max_steps_per_turn: bfcl-eval's limit on steps within one user turn (20).
        stateful_timeout: seconds each of the model's stateful backend calls may run, in the
            process's call worker (:attr:`.backends.Backends.stateful_timeout`; a late call is an
            invalid step naming the bound, undone). ``None`` (default): calls run in this process,
            bounded by the state bounds and the step's time bound only (the worker costs about
            twice a plain step).
    """

    default_max_steps = turn_limit("ttg/BFCL-v0")
    # bfcl-eval passes arguments to the backends unchecked and some ground truth breaks the declared
    # types (multi_turn_base_173 closes ticket 'ticket_001' through an "integer" ticket_id).
    check_argument_types = False

    def __init__(
        self,
        categories: str | Iterable[str] | None = None,
        *,
        split: str | Iterable[str] | None = None,
        scoring: str = "official",
        model_style: str = "fc",
        max_steps: int | None = None,
        max_steps_per_turn: int = MAX_STEPS_PER_TURN,
        stateful_timeout: float | None = None,
        render_mode: str | None = None,
    ):
        super().__init__(max_steps=max_steps, render_mode=render_mode)
        if categories is not None and split is not None:
            raise ValueError("give categories or split, not both")
        #: The scoring strategy (:mod:`.scoring`): every place the two scorings differ asks it.
        self.scoring_rule = make_scoring(scoring, model_style)
        if model_style not in MODEL_STYLES:
            raise ValueError(f"model_style must be one of {MODEL_STYLES}, got {model_style!r}")
        self.scoring = scoring
        self.model_style = model_style
        self.tasks: list[BFCLTask] = load_tasks(categories or split or "all")
        self.max_steps_per_turn = int(max_steps_per_turn)
        self.stateful_timeout = None if stateful_timeout is None else float(stateful_timeout)
        self.max_steps = self.scoring_rule.max_steps(self.max_steps, self.max_steps_per_turn, max(len(t.turns) for t in self.tasks))
        self._task: BFCLTask | None = None
        self._episode: _Episode | None = None
        self._single_tools: list[Tool] = []
        self._dotted_names: list[str] = []
        self._all_tools: list[Tool] = []

    # ------------------------------------------------------------ TextEnv hooks
    @property
    def tools(self) -> list[Tool]:
        """The functions the assistant can call now (miss_func: without those not yet added)."""
        return self._episode.tools if self._episode is not None else self._single_tools

    @property
    def callable_tools(self) -> list[Tool]:
        """Every function of the entry, held-out ones included: bfcl-eval's harness executes any of them
        (multi_turn_miss_func_49's ground truth calls ``tail`` two turns before it is offered)."""
        if self._episode is None:
            return self._single_tools
        shown = {t.name for t in self._episode.tools}
        return self._episode.tools + [t for t in self._all_tools if t.name not in shown]

    @property
    def official(self) -> bool:
        """True when verdicts are bfcl-eval's harness verdicts (``scoring="official"``)."""
        return self.scoring_rule.name == "official"

    @property
    def system_prompt(self) -> str:
        """Official ``prompting``: bfcl-eval's own system prompt (format, functions as JSON) and the
        entry's system message; otherwise the instructions and the Qwen3 ``# Tools`` block."""
        if not self.scoring_rule.prompting:
            return super().system_prompt
        utils = bfcl_module("bfcl_eval.model_handler.utils")
        task = self._task
        text = utils.formulate_system_prompt(utils.extract_prompt_format_from_id(task.id), copy.deepcopy(task.functions))
        system = [m["content"] for m in task.turns[0] if m["role"] == "system"]
        return f"{text}\n\n{system[0]}" if system else text

    def scored_name(self, doc_name: str) -> str:
        """The name a function is shown and scored under: the doc's own (official) or with ``_`` for ``.`` (lenient)."""
        return doc_name if self.scoring_rule.keep_dots else tool_name(doc_name)

    def _to_tool(self, doc) -> Tool:
        return to_tool(doc, keep_dots=self.scoring_rule.keep_dots)

    @property
    def instructions(self) -> str:
        """bfcl-eval's classic system-prompt text (persona, task, multi-turn behaviour) and the entry's own system message."""
        style = bfcl_module("bfcl_eval.constants.default_prompts").PROMPT_STYLE_TEMPLATES["classic"]
        parts = [f"{style['persona']} {style['task']}"]
        if self._task.multi_turn:
            parts.append(style["multiturn_behavior"])
        parts += [m["content"] for m in self._task.turns[0] if m["role"] == "system"]
        return "\n\n".join(parts)

    def _opening_messages(self, observation: str) -> list[dict[str, Any]]:
        """The entry's whole first-turn conversation (live entries replay earlier assistant turns)."""
        return [dict(m) for m in self._task.turns[0] if m["role"] != "system"]

    def _start(self, index: int) -> tuple[str, dict[str, Any]]:
        task = self._task = self.tasks[index]
        self._dotted_names = [doc["name"] for doc in task.functions if "." in doc["name"]]
        self._all_tools = [self._to_tool(doc) for doc in task.functions]
        self._all_tools += [self._to_tool(doc) for docs in task.held_out.values() for doc in docs]
        if task.multi_turn:
            entry = task.entry
            long_context = "long_context" in task.category
            model = Backends(entry["involved_classes"], entry["initial_config"], long_context=long_context)
            if self.stateful_timeout is not None:
                model.stateful_timeout = self.stateful_timeout
            self._episode = _Episode(
                model=model,
                truth=Backends(entry["involved_classes"], entry["initial_config"], long_context=long_context),
                tools=[self._to_tool(doc) for doc in task.functions],
            )
        else:
            self._episode = None
            self._single_tools = [self._to_tool(doc) for doc in task.functions]
        return self._turn_text(0), {"tools": self.tools_info()}

    def parse_action(self, text: str) -> ParsedAction:
        """Official: the text itself (bfcl-eval's decoder reads it when it is applied). Lenient: tool
        calls in any supported syntax; BFCL's dotted names (``math.factorial``) also resolve."""
        return self.scoring_rule.parse(self, text)

    def _apply(self, response: ParsedResponse | str) -> StepOutcome:
        return self.scoring_rule.apply(self, response)

    def _invalid_outcome(self, error: str) -> StepOutcome:
        if self._episode is None:
            outcome = self._score_single(None, None)
            outcome.action_valid, outcome.error = False, error
            outcome.observation = f"{error}\n\n{outcome.observation}"
            return outcome
        return self._count_turn_step(super()._invalid_outcome(error))

    def _state_key(self) -> str:
        h = hashlib.sha256(self._task.id.encode())
        episode = self._episode
        if episode is None:
            h.update(b"answered" if self.elapsed_steps else b"open")
        else:
            h.update(
                json.dumps(
                    [
                        episode.turn,
                        episode.turn_steps,
                        episode.call_steps,
                        episode.results,
                        [t.name for t in episode.tools],
                        episode.verdicts,
                    ]
                ).encode()
            )
            h.update(episode.model.state_digest().encode())
        return h.hexdigest()

    def _snapshot(self) -> tuple[_Episode | None]:
        # A 1-tuple, never None: single-turn entries (no episode state) branch by snapshot too.
        episode = self._episode
        if episode is None:
            return (None,)
        # The tool list is shared: its tools are frozen and a turn that adds some makes a new list
        # (copying their schemas was most of a branch's cost). The backends share their instances
        # until either side calls into one (``Backends.fork``: copy on write).
        copied = copy_state(replace(episode, tools=[], model=None, truth=None))
        copied.tools, copied.model, copied.truth = episode.tools, episode.model.fork(), episode.truth.fork()
        return (copied,)

    def _restore(self, snapshot: tuple[_Episode | None]) -> None:
        self._episode = snapshot[0]

    def _adopt(self, branch: BFCLEnv) -> bool:
        self._episode = branch._episode
        return True

    # ------------------------------------------------------------ BFCL extras
    @property
    def task_entry(self) -> BFCLTask:
        """The current entry (prompt, docs, ground truth)."""
        return self._task

    @property
    def turn(self) -> int:
        """Index of the current user turn (0 for single-turn entries)."""
        return self._episode.turn if self._episode is not None else 0

    # ------------------------------------------------------------ single-turn
    def _score_single(self, calls, response: ParsedResponse | None) -> StepOutcome:
        task = self._task
        verdict = check_single_turn(task.category, calls, task.checker_functions, task.ground_truth)
        return self._single_outcome(verdict, response)

    def _single_outcome(self, verdict: dict[str, Any], response: ParsedResponse | None) -> StepOutcome:
        success = bool(verdict["valid"])
        observation = "The response was scored by BFCL's checker: " + ("correct." if success else "incorrect.")
        outcome = StepOutcome(
            observation=observation, reward=float(success), terminated=True, success=success, info={"evaluation": verdict}
        )
        if response is not None and response.calls:
            self.scoring_rule.record_single(self, outcome, response)
        return outcome

    # ------------------------------------------------------------ transcript
    def _transcript(self, content: str, calls, results: list[str]) -> tuple[dict[str, Any], list[dict[str, Any]]]:
        calls = [c.with_id(f"call_{self.elapsed_steps}_{i}") for i, c in enumerate(calls)]
        assistant = {"role": "assistant", "content": content, "tool_calls": [c.openai() for c in calls]}
        messages = [{"role": "tool", "tool_call_id": c.id, "name": c.name, "content": r} for c, r in zip(calls, results)]
        return assistant, messages

    # ------------------------------------------------------------ multi-turn
    def _tool_step(self, response: ParsedResponse) -> StepOutcome:
        episode = self._episode
        with episode.model.atomic():
            turn = self._run_calls(response, episode.model.execute)
        if turn.bound is not None:
            # The backends are back where the step began: no call of it happened.
            error = f"Bound exceeded: {turn.bound}."
            results = [f"Error: {error}"] * len(turn.calls)
            messages = [dict(m, content=r) for m, r in zip(turn.messages, results)]
            outcome = StepOutcome(
                observation=error, action_valid=False, error=error, assistant_message=turn.assistant_message, messages=messages
            )
            return self._count_turn_step(outcome)
        episode.call_steps += 1
        episode.results.extend(r for r, e in zip(turn.results, turn.errors) if e is None)
        outcome = turn.outcome()
        return self._count_turn_step(outcome)

    def _count_turn_step(self, outcome: StepOutcome) -> StepOutcome:
        episode = self._episode
        episode.turn_steps += 1
        return self._force_terminate(outcome) if episode.turn_steps > self.max_steps_per_turn else outcome

    def _force_terminate(self, outcome: StepOutcome) -> StepOutcome:
        """``outcome`` ending the episode as bfcl-eval does past its per-turn step limit (the turn's failed verdict)."""
        episode = self._episode
        verdict = {
            "valid": False,
            "error_type": "multi_turn:force_terminated",
            "error_message": f"More than {self.max_steps_per_turn} steps in turn {episode.turn}.",
        }
        episode.verdicts.append(verdict)
        outcome.terminated = True
        outcome.info = {**(outcome.info or {}), "evaluation": verdict}
        return outcome

    def _end_turn(self, response: ParsedResponse) -> StepOutcome:
        episode, task = self._episode, self._task
        index = episode.turn
        truth_calls = task.ground_truth[index]
        truth_results = self.scoring_rule.truth_results(self, truth_calls)
        verdict = check_turn(index, episode.model, episode.truth, episode.results, truth_results, truth_calls, episode.call_steps)
        episode.verdicts.append(verdict)
        assistant = {"role": "assistant", "content": response.content}
        if not verdict["valid"]:
            return StepOutcome(
                observation=f"Turn {index} failed BFCL's check; the episode is over.",
                terminated=True,
                info={"evaluation": verdict},
                assistant_message=assistant,
            )
        episode.turn, episode.turn_steps, episode.call_steps = index + 1, 0, 0
        if episode.turn == len(task.turns):
            return StepOutcome(
                observation="All turns passed BFCL's check; the episode is over.",
                reward=1.0,
                terminated=True,
                success=True,
                info={"evaluation": {"valid": True}},
                assistant_message=assistant,
            )
        info: dict[str, Any] = {}
        if episode.turn in task.held_out:
            episode.tools = episode.tools + [self._to_tool(doc) for doc in task.held_out[episode.turn]]
            info["tools"] = self.tools_info()
        return StepOutcome(observation=self._turn_text(episode.turn), info=info, assistant_message=assistant)

    def _turn_text(self, index: int) -> str:
        task = self._task
        if index in task.held_out:
            prompts = bfcl_module("bfcl_eval.constants.default_prompts")
            if self.scoring_rule.prompting:
                return prompts.DEFAULT_USER_PROMPT_FOR_ADDITIONAL_FUNCTION_PROMPTING.format(functions=task.held_out[index])
            added = [self._to_tool(doc) for doc in task.held_out[index]]
            return f"{render_tool_list(added)}\n{prompts.DEFAULT_USER_PROMPT_FOR_ADDITIONAL_FUNCTION_FC}"
        messages = [m for m in task.turns[index] if m["role"] != "system"]
        # The observation is what the user says last (live entries replay earlier assistant turns).
        last_assistant = max((i for i, m in enumerate(messages) if m["role"] == "assistant"), default=-1)
        return "\n\n".join(m["content"] for m in messages[last_assistant + 1 :])

    def _truth_calls(self, calls: list[str]) -> list[ToolCall]:
        parsed = parse_tool_calls("[" + ", ".join(calls) + "]", tool_index(self._all_tools))
        if parsed.error:
            raise ValueError(f"cannot read the ground truth of {self._task.id}: {parsed.error}")
        return list(parsed.calls)
