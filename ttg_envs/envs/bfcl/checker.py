"""bfcl-eval's official checkers, called without its model registry or its ``eval`` executor.

- Single-turn: ``ast_checker`` on the decoded calls ``[{name: arguments}]`` with the un-hinted docs.
- Irrelevance / relevance: "no call" / "some call", as bfcl-eval's relevance runner decides.
- Multi-turn: per finished turn, the checks of ``multi_turn_checker`` in its order (calls where the
  ground truth has some, ``state_checker``, ``response_checker``), run when each turn ends.

``ast_checker`` and ``eval_runner`` import bfcl-eval's model registry (every provider SDK) only to
read ``underscore_to_dot``, so they are imported with a stand-in registry that is removed from
``sys.modules`` right after. Official scoring uses :data:`CHECKER_MODEL` (dotted names, as bfcl-eval
scores the local prompting and Qwen-FC handlers); lenient scoring :data:`LENIENT_CHECKER_MODEL`
(tools shown with ``_`` for ``.``, scored with ``underscore_to_dot``, as for OpenAI-style FC models).
"""

from __future__ import annotations

import importlib
import sys
import types
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from ...tools import ToolCall
from .data import bfcl_module

#: The model name passed to bfcl-eval's checkers in official scoring ("ttg_envs" -> registry key "ttg/envs").
CHECKER_MODEL = "ttg_envs"
#: The model name of lenient scoring (registry key "ttg/envs/lenient", ``underscore_to_dot=True``).
LENIENT_CHECKER_MODEL = "ttg_envs_lenient"
_AST_MODULE = "bfcl_eval.eval_checker.ast_eval.ast_checker"
_RUNNER_MODULE = "bfcl_eval.eval_checker.eval_runner"
_REGISTRY_MODULE = "bfcl_eval.constants.model_config"


@dataclass(frozen=True)
class _CheckerConfig:
    underscore_to_dot: bool


def _import_with_stand_in_registry(name: str, registry: dict):
    if name in sys.modules:
        return sys.modules[name]
    bfcl_module("bfcl_eval")
    stand_in = types.ModuleType(_REGISTRY_MODULE)
    stand_in.MODEL_CONFIG_MAPPING = registry
    previous = sys.modules.get(_REGISTRY_MODULE)
    sys.modules[_REGISTRY_MODULE] = stand_in
    try:
        return importlib.import_module(name)
    finally:
        if previous is None:
            del sys.modules[_REGISTRY_MODULE]
        else:
            sys.modules[_REGISTRY_MODULE] = previous


def _ast_module():
    module = _import_with_stand_in_registry(_AST_MODULE, {})
    module.MODEL_CONFIG_MAPPING.setdefault(CHECKER_MODEL.replace("_", "/"), _CheckerConfig(underscore_to_dot=False))
    module.MODEL_CONFIG_MAPPING.setdefault(LENIENT_CHECKER_MODEL.replace("_", "/"), _CheckerConfig(underscore_to_dot=True))
    return module


def eval_runner_module():
    """bfcl-eval's ``eval_runner`` (its per-entry evaluation functions), sharing ``ast_checker``'s registry."""
    return _import_with_stand_in_registry(_RUNNER_MODULE, _ast_module().MODEL_CONFIG_MAPPING)


def _language(category: str):
    enums = bfcl_module("bfcl_eval.constants.enums")
    if category == "simple_java":
        return enums.Language.JAVA
    if category == "simple_javascript":
        return enums.Language.JAVASCRIPT
    return enums.Language.PYTHON


def check_single_turn(
    category: str, calls: Sequence[ToolCall] | None, functions: Sequence[Mapping[str, Any]], ground_truth: Any
) -> dict[str, Any]:
    """Lenient scoring's verdict ``{"valid": bool, ...}`` on one single-turn response's parsed calls.

    ``calls`` is None when the response could not be parsed (malformed call markup). Official
    scoring is :func:`~.harness.single_turn_verdict` (bfcl-eval's decode and per-entry evaluation).
    """
    decoded = bool(calls)
    if "irrelevance" in category:
        if decoded:
            return {
                "valid": False,
                "error_type": "irrelevance_error:decoder_success",
                "error": ["Valid syntax. Successfully decode AST when it should not."],
            }
        return {"valid": True}
    if category == "live_relevance":
        if decoded:
            return {"valid": True}
        return {
            "valid": False,
            "error_type": "relevance_error:decoder_failed",
            "error": ["Invalid syntax. Failed to decode AST when it should have."],
        }
    if calls is None:
        return {"valid": False, "error_type": "ast_decoder:decoder_failed", "error": ["Invalid syntax. Failed to decode AST."]}
    model_output = [{c.name: dict(c.arguments)} for c in calls]
    verdict = _ast_module().ast_checker(list(functions), model_output, ground_truth, _language(category), category, LENIENT_CHECKER_MODEL)
    return dict(verdict)


def check_turn(
    turn_index: int,
    model_backends,
    truth_backends,
    model_results: Sequence[str],
    truth_results: Sequence[str],
    truth_calls: Sequence[str],
    model_call_steps: int,
) -> dict[str, Any]:
    """``multi_turn_checker``'s verdict on one finished turn (see the module docstring)."""
    if not truth_calls:
        return {"valid": True}
    if model_call_steps == 0:
        return {
            "valid": False,
            "error_type": "multi_turn:empty_turn_model_response",
            "error_message": f"Model response list is empty for turn {turn_index}",
        }
    checker = bfcl_module("bfcl_eval.eval_checker.multi_turn_eval.multi_turn_checker")
    verdict = checker.state_checker(model_backends.instances, truth_backends.instances)
    if verdict["valid"]:
        verdict = checker.response_checker(list(model_results), list(truth_results), turn_index)
    return _summary(verdict)


def _summary(verdict: Mapping[str, Any]) -> dict[str, Any]:
    # The checker's details hold live backend objects; keep the verdict JSON-friendly.
    return {k: verdict[k] for k in ("valid", "error_type", "error_message") if k in verdict}
