"""Scripted BFCL policies that replay the ground truth, whole, with its last call dropped, or with departures.

``gold`` sends each multi-turn turn's ground-truth calls in one response, then a text reply that
ends the turn; for a single-turn entry it sends the calls built from the possible answers (first
acceptable value of each argument; an argument whose answers include "" is left out). Irrelevance
entries get a reply without a call. ``gold_drop_last`` does the same but leaves out the episode's
last ground-truth call, which must make the official checker fail. ``perturbed:eps`` departs from
the ground truth at a call step with probability ``eps``: a call dropped, an extra call (one of the
entry's other turns' ground-truth calls) or a wrong argument (:mod:`ttg_envs.envs.perturb`); meters
of the tool envs learn from these (``scripts/build_meters.sh bfcl``).

The call syntax follows the env: official ``fc`` gets Hermes ``<tool_call>`` blocks, official
``prompting`` BFCL's ``[f(a=1)]`` (the ground-truth strings themselves in multi-turn), lenient any
``style``; names are the ones the env scores (:meth:`BFCLEnv.scored_name`).
"""

from __future__ import annotations

import json
import re
from typing import Any

from ...tools import ToolCall, format_tool_calls
from ...tools.gold import GoldReplay
from ..perturb import Perturber
from .data import BFCLTask, tool_name
from .env import BFCLEnv
from .literals import java_literal, js_literal

#: The text that ends a multi-turn turn (any response without a call does).
END_TURN = "I have completed the request."
#: The reply to an entry that no function can serve.
NO_CALL = "None of the provided functions can be used for this request."


def _bfcl(env) -> BFCLEnv:
    base = env.unwrapped
    if not isinstance(base, BFCLEnv):
        raise TypeError(f"BFCL policies need a BFCLEnv, got {type(base).__name__}")
    return base


def single_turn_calls(task: BFCLTask, name=tool_name, source: bool = False) -> list[ToolCall]:
    """One call per possible-answer item, each argument at its first acceptable value.

    An argument whose answers include "" may be left out; it is, unless the doc marks it required.
    Dict answers that hold acceptable values per key are resolved the same way. Java and
    JavaScript values are written as source literals of the declared type (with ``source``, String
    values quoted too, as bfcl-eval's Java/JS source parsers read them). ``name`` maps a doc's
    function name to the name written (default: ``_`` for ``.``).
    """
    docs = {doc["name"]: doc.get("parameters") or {} for doc in task.checker_functions}
    calls = []
    for item in task.ground_truth:
        ((doc_name, params),) = item.items()
        schema = docs.get(doc_name, {})
        arguments = _pick(params, set(schema.get("required") or ()))
        if task.category in ("simple_java", "simple_javascript"):
            arguments = {k: _source(v, (schema.get("properties") or {}).get(k, {}), task.category, source) for k, v in arguments.items()}
        calls.append(ToolCall(name(doc_name), arguments))
    return calls


def _pick(options_by_key: dict[str, list[Any]], required: set[str]) -> dict[str, Any]:
    picked = {}
    for key, options in options_by_key.items():
        values = [v for v in options if v != ""]
        if values and (key in required or "" not in options):
            picked[key] = _resolve(values[0])
    return picked


def _resolve(value: Any) -> Any:
    if _is_options(value):
        return _pick(value, set())
    if isinstance(value, list) and value and all(_is_options(v) for v in value):
        return [_pick(v, set()) for v in value]
    return value


def _is_options(value: Any) -> bool:
    return isinstance(value, dict) and bool(value) and all(isinstance(v, list) for v in value.values())


#: Answer strings that are already Java/JavaScript source: a name or dotted path, a number, an array,
#: object or ``new`` expression, a call.
_SOURCE_RE = re.compile(r"[A-Za-z_$][\w$]*(\.[A-Za-z_$][\w$]*)*|-?\d+(\.\d+)?[fFdDlLn]?|new .*|\[.*\]|\{.*\}|.*\(.*\)", re.DOTALL)


def _source(value: Any, schema: dict[str, Any], category: str, quote_strings: bool = False) -> str:
    kind = schema.get("type", "String")
    if quote_strings and isinstance(value, str) and (kind == "String" or not _SOURCE_RE.fullmatch(value)):
        return json.dumps(value)  # a string literal in Java/JavaScript source, for the source parsers
    if category == "simple_java":
        return java_literal(value, kind, (schema.get("items") or {}).get("type"))
    return js_literal(value, kind)


def python_calls(calls: list[ToolCall], category: str = "") -> str:
    """BFCL's ``[f(a=1)]`` for bfcl-eval's prompting decoder; Java/JavaScript source values are written as
    double-quoted strings (its parsers strip the quotes) and any argument name is kept (``from=``)."""
    if category in ("simple_java", "simple_javascript"):
        return "[" + ", ".join(f"{c.name}({', '.join(f'{k}={v}' for k, v in c.arguments.items())})" for c in calls) + "]"
    return format_tool_calls(calls, "python")


class GoldPolicy(GoldReplay):
    """Replays the ground truth through ``env.step`` (see the module docstring).

    ``style`` (``hermes``, ``json``, ``python``) is the call syntax under lenient scoring; official
    scoring writes what its ``model_style`` reads.
    """

    def __call__(self, env) -> str:
        """The next response for ``env``."""
        base = _bfcl(env)
        task = base.task_entry
        prompting = base.scoring_rule.prompting
        style = base.scoring_rule.call_style(self.style)

        def write(calls: list[ToolCall]) -> str:
            return python_calls(calls, task.category) if prompting else format_tool_calls(calls, style)

        if not task.multi_turn:
            if task.ground_truth is None:
                tools = base.tools
                return write([ToolCall(tools[0].name)]) if "relevance" == task.group else NO_CALL
            calls = single_turn_calls(task, base.scored_name, source=prompting)
            if self.drop_last:
                calls = calls[:-1]
            return write(calls) if calls else NO_CALL
        episode = base._episode
        truth = task.ground_truth
        if episode.call_steps:
            return END_TURN
        calls = base._truth_calls(truth[episode.turn])
        if self.drop_last and episode.turn == max(i for i, t in enumerate(truth) if t):
            calls = calls[:-1]
        return write(calls) if calls else END_TURN


class PerturbedGoldPolicy(GoldPolicy):
    """The gold policy with a departure (:data:`~ttg_envs.envs.perturb.KINDS`) at a call step with
    probability ``eps``: the call steps of multi-turn turns and single-turn entries (an irrelevance
    entry's departure is a call of its first function, a relevance entry's the reply without one)."""

    def __init__(self, eps: float = 0.3, seed: int | None = None, style: str = "hermes"):
        super().__init__(style=style)
        self.perturber = Perturber(eps, seed)
        self.name = f"perturbed_{eps:g}"

    def __call__(self, env) -> str:
        """The next response for ``env``."""
        base = _bfcl(env)
        task = base.task_entry
        if task.multi_turn and base._episode.call_steps:
            return END_TURN
        kind = self.perturber.draw()
        if kind is None:
            return super().__call__(env)
        if task.multi_turn:
            turn = base._episode.turn
            calls = base._truth_calls(task.ground_truth[turn])
            others = [c for i, t in enumerate(task.ground_truth) if i != turn and t for c in base._truth_calls(t)]
        elif task.ground_truth is None:
            first = [ToolCall(base.tools[0].name)] if base.tools else []  # some live entries offer no function
            calls, others = (first if task.group == "relevance" else []), first
        else:
            calls, others = single_turn_calls(task, base.scored_name, source=self._prompting(base)), []
        return self._write(base, self.perturber.depart(kind, calls, others))

    @staticmethod
    def _prompting(base: BFCLEnv) -> bool:
        return base.scoring_rule.prompting

    def _write(self, base: BFCLEnv, calls: list[ToolCall]) -> str:
        if not calls:
            return END_TURN if base.task_entry.multi_turn else NO_CALL
        if self._prompting(base):
            return python_calls(calls, base.task_entry.category)
        return format_tool_calls(calls, base.scoring_rule.call_style(self.style))


#: Scripted policies by name, as ``ttg rollout --policies`` names them.
POLICY_NAMES = ("gold", "gold_drop_last", "perturbed")


def make_policy(name: str, *, seed: int | None = None, style: str = "hermes", eps: float = 0.3):
    """Build a scripted BFCL policy by name (``gold``, ``gold_drop_last``, or ``perturbed`` with ``eps``,
    seeded by ``seed``; the first two are deterministic)."""
    if name not in POLICY_NAMES:
        raise ValueError(f"unknown BFCL policy {name!r}; choose from {POLICY_NAMES}")
    if name == "perturbed":
        return PerturbedGoldPolicy(eps=eps, seed=seed, style=style)
    return GoldPolicy(style=style, drop_last=name == "gold_drop_last")
