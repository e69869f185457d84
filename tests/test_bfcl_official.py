"""ttg/BFCL-v0's official scoring gives bfcl-eval's harness verdicts on the same response text.

Each response goes through the env (``scoring="official"``) and, independently, through bfcl-eval's
own path as its harness runs a local model: the real ``QwenHandler`` (prompting) and
``QwenFCHandler`` (function calling) classes with their registry settings read from bfcl-eval's
``model_config.py``, the handlers' own response parsing, eval_runner's per-entry functions on
entries loaded with bfcl-eval's loaders, and for multi-turn the handler's own inference loop
(``inference_multi_turn_prompting``, with the model's replies scripted) and ``multi_turn_checker``,
which executes calls with ``eval`` as the harness does. The verdicts must be equal.
"""

from __future__ import annotations

import ast
import contextlib
import copy
import io
import itertools
import json
import random
import sys
import types
from collections import Counter
from pathlib import Path
from types import SimpleNamespace

import pytest

pytest.importorskip("bfcl_eval")
pytest.importorskip("tree_sitter_java")

from ttg_envs.envs.bfcl import BFCLEnv  # noqa: E402
from ttg_envs.envs.bfcl.policies import END_TURN, python_calls, single_turn_calls  # noqa: E402
from ttg_envs.envs.perturb import changed
from ttg_envs.tools import ToolCall, format_tool_calls, parse_tool_calls, tool_index  # noqa: E402

SINGLE_TURN = (
    "simple_python",
    "simple_java",
    "simple_javascript",
    "multiple",
    "parallel",
    "parallel_multiple",
    "live_simple",
    "live_multiple",
    "live_parallel",
    "live_parallel_multiple",
    "irrelevance",
    "live_irrelevance",
    "live_relevance",
)
MULTI_TURN = ("multi_turn_base", "multi_turn_miss_func", "multi_turn_miss_param", "multi_turn_long_context")
STYLES = ("fc", "prompting")
#: bfcl-eval registry entries whose handler and settings the reference uses, per model style.
REFERENCE_MODELS = {"prompting": "Qwen/Qwen3-8B", "fc": "Qwen/Qwen3-8B-FC"}
SAMPLE = 30
SEED = 16


# ------------------------------------------------------------------ bfcl-eval's own path
def _registry_settings(key: str) -> dict:
    """``is_fc_model``, ``underscore_to_dot``, ``model_name`` and the handler class name of a registry
    entry, read from bfcl-eval's model_config.py source (importing it needs every provider SDK)."""
    import bfcl_eval

    source = (Path(bfcl_eval.__file__).parent / "constants" / "model_config.py").read_text()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Dict):
            for k, v in zip(node.keys, node.values):
                if isinstance(k, ast.Constant) and k.value == key and isinstance(v, ast.Call):
                    kw = {a.arg: a.value for a in v.keywords}
                    return {
                        "model_name": ast.literal_eval(kw["model_name"]),
                        "handler": kw["model_handler"].id,
                        "is_fc_model": ast.literal_eval(kw["is_fc_model"]),
                        "underscore_to_dot": ast.literal_eval(kw["underscore_to_dot"]),
                    }
    raise KeyError(key)


class _Reference:
    """bfcl-eval's evaluation functions, handlers and loaders."""

    def __init__(self):
        import os

        os.environ.setdefault("BFCL_PROJECT_ROOT", str(Path.home() / ".cache" / "ttg_envs" / "bfcl"))
        name = "bfcl_eval.constants.model_config"
        if "bfcl_eval.eval_checker.eval_runner" not in sys.modules:
            stand_in = types.ModuleType(name)
            stand_in.MODEL_CONFIG_MAPPING = {}
            previous = sys.modules.get(name)
            sys.modules[name] = stand_in
            try:
                import bfcl_eval.eval_checker.eval_runner  # noqa: F401
            finally:
                if previous is None:
                    del sys.modules[name]
                else:
                    sys.modules[name] = previous
        from bfcl_eval import utils
        from bfcl_eval.eval_checker import eval_runner
        from bfcl_eval.eval_checker.ast_eval import ast_checker
        from bfcl_eval.eval_checker.multi_turn_eval import multi_turn_utils
        from bfcl_eval.model_handler.local_inference import qwen, qwen_fc

        self.runner, self.utils, self.mt_utils = eval_runner, utils, multi_turn_utils
        self.settings = {style: _registry_settings(key) for style, key in REFERENCE_MODELS.items()}
        self.classes = {"QwenHandler": qwen.QwenHandler, "QwenFCHandler": qwen_fc.QwenFCHandler}
        for style, key in REFERENCE_MODELS.items():
            config = SimpleNamespace(**self.settings[style])
            for mapping in (ast_checker.MODEL_CONFIG_MAPPING, eval_runner.MODEL_CONFIG_MAPPING):
                mapping[key] = config
        self.handlers = {style: self.handler(style) for style in STYLES}
        self._entries: dict[str, dict] = {}
        self._truth: dict[str, dict] = {}
        self._runs = itertools.count()

    def handler(self, style: str, script=None):
        settings = self.settings[style]
        cls = self.classes[settings["handler"]]
        if script is not None:
            cls = _scripted(cls)
        handler = cls(
            model_name=settings["model_name"], temperature=0, registry_name=REFERENCE_MODELS[style], is_fc_model=settings["is_fc_model"]
        )
        handler.script = script
        return handler

    def entries(self, category: str) -> dict[str, dict]:
        if category not in self._entries:
            self._entries[category] = {
                e["id"]: e for e in self.utils.load_dataset_entry(category, include_prereq=False, include_language_specific_hint=False)
            }
            if "relevance" not in category:
                prompts = list(self._entries[category])
                truth = self.utils.load_ground_truth_entry(category)
                self._truth[category] = {i: t["ground_truth"] for i, t in zip(prompts, truth)}
        return self._entries[category]

    def single_turn(self, style: str, category: str, entry_id: str, text: str) -> bool:
        handler = self.handlers[style]
        entry = self.entries(category)[entry_id]
        response = handler._parse_query_response_prompting(_api_response(text))["model_responses"]
        model = REFERENCE_MODELS[style].replace("/", "_")
        runner, utils = self.runner, self.utils
        if utils.is_relevance_or_irrelevance(category):
            return runner._evaluate_single_relevance_entry(handler, entry_id, response, entry, model, category)["valid"]
        enums = sys.modules["bfcl_eval.constants.enums"]
        if utils.is_java(category):
            language, fmt = enums.Language.JAVA, enums.ReturnFormat.JAVA
        elif utils.is_js(category):
            language, fmt = enums.Language.JAVASCRIPT, enums.ReturnFormat.JAVASCRIPT
        else:
            language, fmt = enums.Language.PYTHON, enums.ReturnFormat.PYTHON
        return runner._evaluate_single_ast_entry(
            handler, entry_id, response, self._truth[category][entry_id], entry, model, category, language, fmt, False
        )["valid"]

    def multi_turn(self, style: str, category: str, entry_id: str, script) -> bool:
        """The harness's inference loop on the scripted replies, then its multi-turn evaluation."""
        run = next(self._runs)
        handler = self.handler(style, script)
        handler.model_name_underline_replaced = f"ttg_reference_{run}"  # a fresh instance cache per run
        entry = self.entries(category)[entry_id]
        inference_entry = copy.deepcopy(_hinted_entry(self.utils, category, entry_id))
        with contextlib.redirect_stdout(io.StringIO()):
            result, _ = handler.inference_multi_turn_prompting(inference_entry, False, True)
            verdict = self.runner._evaluate_single_multi_turn_entry(
                handler, entry_id, result, self._truth[category][entry_id], copy.deepcopy(entry), f"ttg_reference_eval_{run}", category
            )
        for key in [k for k in vars(self.mt_utils) if k.startswith((f"ttg_reference_{run}_", f"ttg_reference_eval_{run}_"))]:
            delattr(self.mt_utils, key)
        return verdict["valid"]


_HINTED: dict[str, dict] = {}


def _hinted_entry(utils, category: str, entry_id: str) -> dict:
    if category not in _HINTED:
        _HINTED[category] = {e["id"]: e for e in utils.load_dataset_entry(category, include_prereq=False)}
    return _HINTED[category][entry_id]


def _api_response(text: str):
    return SimpleNamespace(choices=[SimpleNamespace(text=text)], usage=SimpleNamespace(prompt_tokens=0, completion_tokens=0))


def _scripted(cls):
    """The handler class with its model replaced by ``script(turn, step) -> text``."""

    def _query_prompting(self, inference_data):
        text = self.script(self.turn, self.step)
        self.step += 1
        return _api_response(text), 0.0

    def _add_next_turn_user_message_prompting(self, inference_data, user_message):
        self.turn, self.step = self.turn + 1, 0
        return cls._add_next_turn_user_message_prompting(self, inference_data, user_message)

    # bfcl-eval's handlers use overrides.EnforceOverrides, which wants overriding methods marked.
    for method in (_query_prompting, _add_next_turn_user_message_prompting):
        method.__override__ = True
    return type(
        "Scripted" + cls.__name__,
        (cls,),
        {
            "turn": 0,
            "step": 0,
            "_query_prompting": _query_prompting,
            "_add_next_turn_user_message_prompting": _add_next_turn_user_message_prompting,
        },
    )


@pytest.fixture(scope="module")
def reference():
    return _Reference()


# ------------------------------------------------------------------ responses a model might write
def _hermes(calls) -> str:
    return format_tool_calls(calls, "hermes")


def _write(calls, style: str, category: str) -> str:
    return _hermes(calls) if style == "fc" else python_calls(calls, category)


def _py_call(name: str, args: list[str], kwargs: dict[str, str]) -> str:
    return f"{name}({', '.join(args + [f'{k}={v}' for k, v in kwargs.items()])})"


def _dot_to_underscore(calls):
    return [ToolCall(c.name.replace(".", "_") if "." in c.name else c.name + "_x", c.arguments) for c in calls]


def single_turn_texts(task, style: str) -> dict[str, str]:
    """Named perturbations of the ground truth (or, for (ir)relevance, of a plausible call)."""
    category = task.category
    source = category in ("simple_java", "simple_javascript")
    if task.ground_truth is None:
        doc = task.checker_functions[0]
        props = (doc.get("parameters") or {}).get("properties") or {}
        sample = {"string": "Paris", "integer": 3, "float": 2.5, "boolean": True, "array": ["a"], "dict": {"k": "v"}}
        args = {k: sample.get(props[k].get("type"), "Paris") for k in (doc.get("parameters") or {}).get("required") or []}
        calls = [ToolCall(doc["name"], args)]
        typed = calls
    else:
        calls = single_turn_calls(task, lambda name: name, source=source and style == "prompting")
        # Java/JavaScript: the answers' own values (true, 3) instead of source text; Python: numbers as strings.
        typed = [
            ToolCall(name, {k: next((o for o in options if o != ""), "") for k, options in params.items()})
            for item in task.ground_truth
            for name, params in item.items()
        ]
        if not source:
            typed = [
                ToolCall(
                    c.name, {k: str(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else v for k, v in c.arguments.items()}
                )
                for c in typed
            ]
    gold = _write(calls, style, category)
    first = calls[0]
    items = list(first.arguments.items())
    texts = {
        "gold": gold,
        "prose": "I cannot help with that using the available functions.",
        "empty": "",
        "think": "<think>\nThe user wants this; I will call the function.\n</think>\n\n" + gold,
        "fenced": f"```python\n{python_calls(calls, category)}\n```" if style == "prompting" else f"```\n{gold}\n```",
        "underscored_names": _write(_dot_to_underscore(calls), style, category),
        "other_style": python_calls(calls, category) if style == "fc" else _hermes(calls),
        "tight_blocks": "".join(f"<tool_call>{json.dumps({'name': c.name, 'arguments': c.arguments})}</tool_call>" for c in calls)
        if style == "fc"
        else gold.strip("[]"),
        "json_literals": "[" + ", ".join(_py_call(c.name, [], {k: json.dumps(v) for k, v in c.arguments.items()}) for c in calls) + "]",
        "typed_values": _hermes(typed)
        if style == "fc"
        else "[" + ", ".join(_py_call(c.name, [], {k: json.dumps(v) for k, v in c.arguments.items()}) for c in typed) + "]",
        "positional_unknown_function": "[no_such_function('Paris', 3)]",
    }
    if items:
        (k0, v0), rest = items[0], dict(items[1:])
        lit = (lambda v: v) if source and style == "prompting" else repr
        texts["positional"] = (
            "["
            + ", ".join(
                [_py_call(first.name, [lit(v0)], {k: lit(v) for k, v in rest.items()})]
                + [_py_call(c.name, [], {k: lit(v) for k, v in c.arguments.items()}) for c in calls[1:]]
            )
            + "]"
        )
        texts["unquoted_value"] = "[" + _py_call(first.name, [], {k0: "Paris", **{k: repr(v) for k, v in rest.items()}}) + "]"
        wrong = [ToolCall(first.name, {**first.arguments, k0: changed(v0)})] + calls[1:]
        texts["wrong_value"] = _write(wrong, style, category)
        texts["missing_argument"] = _write([ToolCall(first.name, dict(items[:-1]))] + calls[1:], style, category)
        if isinstance(v0, int) and not isinstance(v0, bool):
            texts["arithmetic"] = "[" + _py_call(first.name, [], {k0: f"{v0 - 1}+1", **{k: repr(v) for k, v in rest.items()}}) + "]"
            texts["float_for_int"] = _write([ToolCall(first.name, {**first.arguments, k0: float(v0)})] + calls[1:], style, category)
    texts["extra_argument"] = _write([ToolCall(first.name, {**first.arguments, "ttg_extra": 1})] + calls[1:], style, category)
    texts["dropped_call"] = _write(calls[:-1], style, category) if len(calls) > 1 else "[]"
    texts["reordered_calls"] = _write(calls[::-1], style, category)
    return texts


def _sample(env: BFCLEnv, category: str) -> list[str]:
    ids = [t.id for t in env.tasks if t.category == category]
    return sorted(random.Random(f"{SEED}-{category}").sample(ids, min(SAMPLE, len(ids))))


# ------------------------------------------------------------------ single-turn
@pytest.mark.parametrize("style", STYLES)
def test_single_turn_verdicts_equal_the_harness(reference, style):
    env = BFCLEnv(list(SINGLE_TURN), model_style=style)
    by_id = {t.id: t for t in env.tasks}
    index = {t.id: i for i, t in enumerate(env.tasks)}
    agree, total, kinds, passed = Counter(), Counter(), set(), Counter()
    mismatches = []
    for category in SINGLE_TURN:
        for entry_id in _sample(env, category):
            for kind, text in single_turn_texts(by_id[entry_id], style).items():
                env.reset(options={"task_index": index[entry_id]})
                ours = env.step(text)[4]["success"]
                theirs = reference.single_turn(style, category, entry_id, text)
                total[category] += 1
                kinds.add(kind)
                passed[category] += theirs
                if ours == theirs:
                    agree[category] += 1
                else:
                    mismatches.append((entry_id, kind, ours, theirs, text[:200]))
    report = {c: f"{agree[c]}/{total[c]} (harness passes {passed[c]})" for c in SINGLE_TURN}
    print(f"\n[{style}] single-turn agreement per category: {json.dumps(report, indent=1)}")
    assert len(kinds) >= 8 and all(total[c] >= 8 * min(SAMPLE, 16) for c in SINGLE_TURN)
    assert not mismatches, mismatches[:10]


# ------------------------------------------------------------------ multi-turn
_EXTRA_CALLS = {
    "GorillaFileSystem": ToolCall("touch", {"file_name": "ttg_extra.txt"}),
    "MessageAPI": ToolCall("add_contact", {"user_name": "ttg_extra"}),
    "TicketAPI": ToolCall("create_ticket", {"title": "ttg extra"}),
    "TradingBot": ToolCall("add_to_watchlist", {"stock": "ZZZZ"}),
    "TwitterAPI": ToolCall("post_tweet", {"content": "ttg extra"}),
    "VehicleControlAPI": ToolCall("set_navigation", {"destination": "ttg extra"}),
}


def _truth_calls(env: BFCLEnv, task, turn: int) -> list[ToolCall]:
    parsed = parse_tool_calls("[" + ", ".join(task.ground_truth[turn]) + "]", tool_index(env._all_tools))
    return list(parsed.calls)


def multi_turn_scripts(env: BFCLEnv, task, style: str, step_limit: bool = True) -> dict[str, dict[int, list[str]]]:
    """Named perturbations of the ground truth: per turn, the replies of each step (then END_TURN)."""
    turns = range(len(task.ground_truth))
    gold = {t: _truth_calls(env, task, t) for t in turns}
    target = max(t for t in turns if gold[t])
    write = lambda calls: _write(calls, style, task.category)
    scripts: dict[str, dict[int, list[str]]] = {"gold": {t: [write(gold[t])] if gold[t] else [] for t in turns}}

    def variant(calls_at_target: list[ToolCall] | None = None, steps: list[str] | None = None, turn: int = target):
        script = {t: list(v) for t, v in scripts["gold"].items()}
        script[turn] = steps if steps is not None else ([write(calls_at_target)] if calls_at_target else [])
        return script

    calls = gold[target]
    scripts["dropped_call"] = variant(calls[:-1])
    last = calls[-1]
    if last.arguments:
        k, v = next(iter(last.arguments.items()))
        scripts["wrong_argument"] = variant(calls[:-1] + [ToolCall(last.name, {**last.arguments, k: changed(v)})])
    extra = next((_EXTRA_CALLS[c] for c in task.entry["involved_classes"] if c in _EXTRA_CALLS), None)
    if extra is not None:
        scripts["extra_state_changing_call"] = variant(calls + [extra])
    # One call per step, then a malformed step before the last one: the harness ends the turn there.
    one_by_one = [write([c]) for c in calls]
    scripts["one_call_per_step"] = variant(steps=one_by_one)
    scripts["malformed_step_mid_turn"] = variant(steps=one_by_one[:-1] + ["[" + one_by_one[-1][:-2]] + one_by_one[-1:])
    scripts["think_then_calls"] = variant(steps=["<think>\nplan\n</think>\n\n" + write(calls)])
    # bfcl-eval's step limit (20 call steps per turn): the 21st stops the entry, which still counts on
    # the last turn. Calls of an unknown function change nothing but count as steps.
    if not step_limit:
        return scripts
    # Texts the harness treats in its own way: positional ground-truth source (dropped by the prompting
    # decoder), a Python builtin (eval would run it), an empty dict argument (the prompting decoder fails
    # on it), a nested call (executed as a call).
    scripts["builtin_call_first"] = variant([ToolCall("print", {"x": 1})] + calls)
    scripts["empty_dict_argument"] = variant(steps=[write(calls), write([ToolCall(last.name, {**last.arguments, "ttg": {}})])])
    if style == "prompting":
        scripts["ground_truth_source"] = variant(steps=["[" + ", ".join(task.ground_truth[target]) + "]"])
        if last.arguments:
            k = next(iter(last.arguments))
            nested = f"[{last.name}({k}={calls[0].name}(ttg=1))]"
            scripts["nested_call_argument"] = variant(steps=[write(calls[:-1]), nested] if calls[:-1] else [nested])
    idle = write([ToolCall("no_such_function", {"x": 1})])
    first = min(t for t in turns if gold[t])
    scripts["past_step_limit_first_turn"] = variant(steps=[write(gold[first])] + [idle] * 20, turn=first)
    scripts["at_step_limit_last_turn"] = variant(steps=[write(calls)] + [idle] * 19)
    scripts["past_step_limit_last_turn"] = variant(steps=[write(calls)] + [idle] * 20)
    return scripts


def _play(env: BFCLEnv, entry_id: str, script) -> bool:
    env.reset(options={"task_index": next(i for i, t in enumerate(env.tasks) if t.id == entry_id)})
    turn, step = 0, 0
    done, info = False, {}
    while not done:
        if env.turn != turn:
            turn, step = env.turn, 0
        _, _, terminated, truncated, info = env.step(script(turn, step))
        step += 1
        done = terminated or truncated
    return bool(info["success"])


def _as_function(script: dict[int, list[str]]):
    return lambda turn, step: script.get(turn, [])[step] if step < len(script.get(turn, [])) else END_TURN


MT_SAMPLE = 4


@pytest.mark.slow  # a long integration test (CI runs it; -m 'not slow' leaves it out)
@pytest.mark.parametrize("style", STYLES)
def test_multi_turn_verdicts_equal_the_harness(reference, style):
    official = BFCLEnv(list(MULTI_TURN), model_style=style)
    lenient = BFCLEnv(list(MULTI_TURN), scoring="lenient")
    by_id = {t.id: t for t in official.tasks}
    agree, total, mismatches = Counter(), Counter(), []
    wins = {"official": Counter(), "lenient": Counter()}
    for category in MULTI_TURN:
        ids = [t.id for t in official.tasks if t.category == category]
        for n, entry_id in enumerate(sorted(random.Random(f"{SEED}-{category}").sample(ids, MT_SAMPLE))):
            official.reset(options={"task_index": next(i for i, t in enumerate(official.tasks) if t.id == entry_id)})
            for kind, script in multi_turn_scripts(official, by_id[entry_id], style, step_limit=n == 0).items():
                play = _as_function(script)
                ours = _play(official, entry_id, play)
                theirs = reference.multi_turn(style, category, entry_id, play)
                total[category] += 1
                wins["official"][kind] += ours
                if style == "fc":
                    wins["lenient"][kind] += _play(lenient, entry_id, play)
                if ours == theirs:
                    agree[category] += 1
                else:
                    mismatches.append((entry_id, kind, ours, theirs))
    report = {c: f"{agree[c]}/{total[c]}" for c in MULTI_TURN}
    print(f"\n[{style}] multi-turn agreement per category: {report}")
    print(
        f"[{style}] wins per perturbation (of {len(MULTI_TURN) * MT_SAMPLE}; step-limit ones of {len(MULTI_TURN)}): official {dict(wins['official'])}"
        + (f"; lenient {dict(wins['lenient'])}" if style == "fc" else "")
    )
    assert not mismatches, mismatches[:10]
    assert wins["official"]["gold"] == len(MULTI_TURN) * MT_SAMPLE and wins["official"]["dropped_call"] == 0
    assert wins["official"]["past_step_limit_first_turn"] == 0 and wins["official"]["at_step_limit_last_turn"] == len(MULTI_TURN)
