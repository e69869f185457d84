"""bfcl-eval's own evaluation path for one response, per model style, without running model text.

bfcl-eval grades a local model's raw generation with its model handler's decoders (``prompting``:
Python call syntax; ``fc``: Qwen's ``<tool_call>`` blocks; :class:`HarnessDecoder` says how each
reads), and the verdicts come from eval_runner's own per-entry functions called with a stand-in
handler that holds those decoders. Where bfcl-eval calls ``eval`` on model text, this evaluates
only bounded literal arithmetic and resolves calls only to the episode's backend methods
(:func:`execute_call_source`).
"""

from __future__ import annotations

import ast
import json
import operator
import warnings
from functools import lru_cache
from typing import Any, Mapping, Sequence

from ...tools import ToolCall
from .checker import CHECKER_MODEL, eval_runner_module
from .data import BFCLTask, bfcl_module

#: The model styles whose bfcl-eval decoders the env applies (see the module docstring).
MODEL_STYLES = ("fc", "prompting")
#: bfcl-eval refuses to execute calls to these names (``execute_multi_turn_func_call``).
_REFUSED_NAMES = ("kill", "exit", "quit", "remove", "unlink", "popen", "Popen", "run")
_INSTANCE_PREFIX = "ttg_instance_"


def strip_reasoning(text: str) -> str:
    """The part of a generation bfcl-eval's Qwen handlers grade: after the last ``</think>``."""
    if "</think>" in text:
        return text.split("</think>")[-1].lstrip("\n")
    return text


@lru_cache(maxsize=None)
def _fc_handler_class():
    return bfcl_module("bfcl_eval.model_handler.local_inference.qwen_fc").QwenFCHandler


def _utils():
    return bfcl_module("bfcl_eval.model_handler.utils")


class HarnessDecoder:
    """The ``decode_ast`` / ``decode_execute`` pair of bfcl-eval's handler for ``style``.

    It is what eval_runner's per-entry functions receive as ``handler``; they raise on undecodable
    text exactly as with the real handler. bfcl-eval grades a local model's raw generation with
    these decoders:

    - ``prompting`` (``QwenHandler``, ``LlamaHandler``...: ``default_decode_ast_prompting`` /
      ``default_decode_execute_prompting``): Python call syntax ``[f(a=1)]``, keyword arguments only,
      no code-fence strip, Java/JavaScript categories parsed as Java/JavaScript source (every value
      is its source text); scored with the docs' dotted names (``underscore_to_dot=False``).
    - ``fc`` (``QwenFCHandler``): ``<tool_call>\\n{"name": ..., "arguments": {...}}\\n</tool_call>`` blocks
      exactly as Qwen's template writes them (a block without those newlines, or whose JSON does not
      load, is not a call); JSON values; also dotted names, ``underscore_to_dot=False``.

    Both Qwen handlers keep only the text after the last ``</think>``. The verdicts come from
    eval_runner's own per-entry functions (``_evaluate_single_ast_entry``,
    ``_evaluate_single_relevance_entry``) called with a stand-in handler that holds those decoders.
    """

    def __init__(self, style: str):
        if style not in MODEL_STYLES:
            raise ValueError(f"model_style must be one of {MODEL_STYLES}, got {style!r}")
        self.style = style

    def decode_ast(self, result: str, language, has_tool_call_tag: bool = False) -> list[dict]:
        """bfcl-eval's AST decode of ``result`` (``[{name: {param: value}}]``); raises when undecodable."""
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", SyntaxWarning)  # Python's parser warns on text like "1x"
            return self._decode_ast(result, language, has_tool_call_tag)

    def decode_execute(self, result: str, has_tool_call_tag: bool = False) -> list[str]:
        """bfcl-eval's executable decode of ``result`` (call source strings); raises when undecodable."""
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", SyntaxWarning)
            return self._decode_execute(result, has_tool_call_tag)

    def _decode_ast(self, result: str, language, has_tool_call_tag: bool) -> list[dict]:
        if self.style == "fc":
            handler = _fc_handler_class()
            return handler.decode_ast(handler, result, language, has_tool_call_tag)
        utils = _utils()
        if language == utils.ReturnFormat.PYTHON:
            _refuse_unsafe_arithmetic(result)
        return utils.default_decode_ast_prompting(result, language, has_tool_call_tag)

    def _decode_execute(self, result: str, has_tool_call_tag: bool) -> list[str]:
        if self.style == "fc":
            handler = _fc_handler_class()
            return handler.decode_execute(handler, result, has_tool_call_tag)
        _refuse_unsafe_arithmetic(result)
        return _utils().default_decode_execute_prompting(result, has_tool_call_tag)


def decoded_calls(decoded: Sequence[Mapping[str, Any]]) -> list[ToolCall]:
    """``[{name: arguments}]`` as ToolCalls (for the transcript), skipping items of another shape."""
    calls = []
    for item in decoded:
        if isinstance(item, Mapping):
            for name, arguments in item.items():
                calls.append(ToolCall(str(name), dict(arguments) if isinstance(arguments, Mapping) else {}))
    return calls


def _formats(category: str):
    enums = bfcl_module("bfcl_eval.constants.enums")
    if category == "simple_java":
        return enums.Language.JAVA, enums.ReturnFormat.JAVA
    if category == "simple_javascript":
        return enums.Language.JAVASCRIPT, enums.ReturnFormat.JAVASCRIPT
    return enums.Language.PYTHON, enums.ReturnFormat.PYTHON


def single_turn_verdict(task: BFCLTask, text: str, style: str) -> dict[str, Any]:
    """eval_runner's verdict on ``text`` as the response to single-turn ``task`` (``{"valid", "error", "error_type"}``)."""
    runner = eval_runner_module()
    decoder = HarnessDecoder(style)
    result = strip_reasoning(text)
    prompt = {"id": task.id, "function": [dict(f) for f in task.checker_functions]}
    if "relevance" in task.category:
        verdict = runner._evaluate_single_relevance_entry(decoder, task.id, result, prompt, CHECKER_MODEL, task.category)
    else:
        language, return_format = _formats(task.category)
        verdict = runner._evaluate_single_ast_entry(
            decoder, task.id, result, task.ground_truth, prompt, CHECKER_MODEL, task.category, language, return_format, False
        )
    return {k: verdict[k] for k in ("valid", "error", "error_type") if k in verdict}


def single_turn_calls(task: BFCLTask, text: str, style: str) -> list[ToolCall]:
    """The calls bfcl-eval's decoder reads in ``text`` for ``task`` (empty when it reads none)."""
    return_format = _formats("simple_python" if "relevance" in task.category else task.category)[1]
    try:
        return decoded_calls(HarnessDecoder(style).decode_ast(strip_reasoning(text), return_format, False))
    except Exception:  # undecodable: bfcl-eval reads no call
        return []


def literal_bound_problem(task: BFCLTask, text: str, style: str) -> str | None:
    """The size bound (:class:`TooLarge`) that official ``prompting`` decoding of ``text`` hits, or None."""
    if style != "prompting" or _formats(task.category)[1] != _utils().ReturnFormat.PYTHON:
        return None
    try:
        _refuse_unsafe_arithmetic(strip_reasoning(text))
    except TooLarge as exc:
        return str(exc)
    except _Unsafe:
        return None
    return None


# ------------------------------------------------------------------ multi-turn execution
def execute_call_source(source: str, instances: Mapping[str, Any], owner: Mapping[str, str]) -> str:
    """Run one call string from ``decode_execute`` (or a ground-truth call) as bfcl-eval's
    ``execute_multi_turn_func_call`` does, with names resolved only to the backends' public methods.

    Two places where bfcl-eval calls ``eval`` on model text are not followed: an arithmetic
    expression in an argument (``x=2*3``) is evaluated only when it is literal arithmetic of bounded
    size (anything else is a decode failure, where bfcl-eval would evaluate it in its module), and a
    multi-turn call is executed here, with names resolved only to the episode's backend methods
    (bfcl-eval's ``eval`` would also reach Python builtins).

    ``instances``: class name -> backend instance; ``owner``: method name -> class name. The result
    text, errors included, is what the harness records.
    """
    utils = bfcl_module("bfcl_eval.eval_checker.multi_turn_eval.multi_turn_utils")
    private = private_name(source)
    if private is not None:
        return f"Error during execution: {refusal(private)}"
    mapping = {name: _INSTANCE_PREFIX + cls for name, cls in owner.items()}
    prefixed = utils._process_method_calls(source, mapping)
    try:
        head = prefixed.split("(")[0] if "(" in prefixed else prefixed
        if "." in head:
            head = head.split(".")[1]
        if head in _REFUSED_NAMES:
            raise Exception(f"Function call {head} is not allowed.")
        value = _Evaluator(instances, owner).run(prefixed)
        if type(value) is str:  # the harness tests the exact type
            return value
        if type(value) is dict:
            try:
                return json.dumps(value)
            except Exception:
                return str(value)
        return str(value)
    except Exception as exc:  # the harness reports any failure as the call's result
        return f"Error during execution: {exc!s}"


def call_of_source(source: str) -> ToolCall:
    """A call string as a ToolCall for the transcript (literal values; anything else as its source text)."""
    try:
        node = ast.parse(source, mode="eval").body
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return ToolCall(source)
    if not isinstance(node, ast.Call):
        return ToolCall(source)
    arguments = {}
    for kw in node.keywords:
        try:
            arguments[str(kw.arg)] = ast.literal_eval(kw.value)
        except (ValueError, TypeError, SyntaxError, RecursionError, MemoryError):
            arguments[str(kw.arg)] = ast.unparse(kw.value)
    return ToolCall(ast.unparse(node.func), arguments)


def private_name(source: str) -> str | None:
    """The first name or attribute starting with ``_`` in a call string (``ttg_instance_X._load_scenario``,
    ``ls.__globals__``), None when there is none or it does not parse. A call may reach only the
    backends' public methods, the ones the task declares: a private one bypasses the step's undo
    copy and the state bounds (:class:`.backends.Backends` saves and checks the instances of the
    methods a call names)."""
    try:
        tree = ast.parse(source, mode="eval")
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    for node in ast.walk(tree):
        name = node.attr if isinstance(node, ast.Attribute) else node.id if isinstance(node, ast.Name) else None
        if name is not None and name.startswith("_"):
            return name
    return None


def refusal(name: str) -> str:
    """Why a call naming the private ``name`` was not run."""
    return f"the call was not run: it reaches {name!r}, a private attribute (a call may reach only the task's public tool methods)"


class _Evaluator:
    """Evaluates a prefixed call string: literals, literal arithmetic and calls of backend methods."""

    def __init__(self, instances: Mapping[str, Any], owner: Mapping[str, str]):
        self.instances = {_INSTANCE_PREFIX + k: v for k, v in instances.items()}
        #: Per prefixed instance name, the public methods it may be called through (the task's tools).
        self.methods: dict[str, set[str]] = {}
        for name, cls in owner.items():
            self.methods.setdefault(_INSTANCE_PREFIX + cls, set()).add(name)

    def run(self, source: str) -> Any:
        return self.value(ast.parse(source, mode="eval").body)

    def value(self, node: ast.AST) -> Any:
        if isinstance(node, ast.Call):
            function = self.function(node.func)
            args = [self.value(a) for a in node.args]
            kwargs = {kw.arg: self.value(kw.value) for kw in node.keywords}
            return function(*args, **kwargs)
        if isinstance(node, ast.Constant):
            return node.value
        if isinstance(node, ast.List):
            return [self.value(e) for e in node.elts]
        if isinstance(node, ast.Tuple):
            return tuple(self.value(e) for e in node.elts)
        if isinstance(node, ast.Set):
            return {self.value(e) for e in node.elts}
        if isinstance(node, ast.Dict):
            return {self.value(k): self.value(v) for k, v in zip(node.keys, node.values)}
        if isinstance(node, (ast.UnaryOp, ast.BinOp)):
            return _bounded_arithmetic(node)
        if isinstance(node, ast.Name):
            raise NameError(f"name {node.id!r} is not defined")
        raise ValueError(f"the env does not evaluate {type(node).__name__} expressions in calls")

    def function(self, node: ast.AST):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in self.instances:
            if node.attr not in self.methods.get(node.value.id, ()):
                raise NameError(f"{node.attr!r} is not a tool of {node.value.id[len(_INSTANCE_PREFIX) :]}")
            return getattr(self.instances[node.value.id], node.attr)
        base = node
        while isinstance(base, ast.Attribute):
            base = base.value
        if isinstance(base, ast.Name):
            raise NameError(f"name {base.id!r} is not defined")
        raise ValueError("the env calls only backend methods")


# ------------------------------------------------------------------ arithmetic in arguments
class _Unsafe(ValueError):
    pass


class TooLarge(_Unsafe):
    """Literal arithmetic whose value would cross a size bound (named in the message); never evaluated."""


_BINARY = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
    ast.BitAnd: operator.and_,
    ast.BitOr: operator.or_,
    ast.BitXor: operator.xor,
    ast.LShift: operator.lshift,
    ast.RShift: operator.rshift,
}
_UNARY = {ast.USub: operator.neg, ast.UAdd: operator.pos, ast.Invert: operator.invert, ast.Not: operator.not_}
#: Bits of an integer the env computes (~4,900 digits; Python prints at most 4,300 by default).
_MAX_BITS = 1 << 14
#: Characters of a string, or of all strings in a list, the env computes.
_MAX_LENGTH = 1 << 20
#: Elements of a list (nested ones counted every time they are reached) the env computes.
_MAX_ITEMS = 10_000


def _bounded_arithmetic(node: ast.AST) -> Any:
    """The value of a literal-arithmetic expression, or :class:`_Unsafe` when it is not literal or too big."""
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, (ast.List, ast.Tuple)):
        items = [_bounded_arithmetic(e) for e in node.elts]
        return items if isinstance(node, ast.List) else tuple(items)
    if isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
        return _UNARY[type(node.op)](_bounded_arithmetic(node.operand))
    if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
        left, right = _bounded_arithmetic(node.left), _bounded_arithmetic(node.right)
        _check_size(type(node.op), left, right)
        return _BINARY[type(node.op)](left, right)
    raise _Unsafe(f"the env evaluates only literal arithmetic, not {ast.unparse(node)!r}")


def _bits(value: Any) -> int:
    # Only int powers grow without bound; float and complex ones overflow, which eval raises too.
    return abs(value).bit_length() if isinstance(value, int) and not isinstance(value, bool) else 0


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _size(value: Any) -> tuple[int, int]:
    """(elements, characters) of a str/bytes/list/tuple as its printed form holds them: a list
    repeated by ``*`` shares its rows, which are counted once per reference. Stops past the bounds."""
    if isinstance(value, (str, bytes)):
        return 0, len(value)
    items = chars = 0
    stack = [value]
    while stack and items <= _MAX_ITEMS and chars <= _MAX_LENGTH:
        item = stack.pop()
        if isinstance(item, (str, bytes)):
            chars += len(item)
        elif isinstance(item, (list, tuple)):
            items += len(item)
            stack.extend(item)
    return items, chars


def _check_size(op: type, left: Any, right: Any) -> None:
    if op is ast.Pow and _bits(left) > 1 and _is_int(right):
        if _bits(left) * abs(right) > _MAX_BITS:
            raise TooLarge(f"the power would have more than {_MAX_BITS} bits (the bound on integers), so it is not evaluated")
    if op is ast.LShift and _is_int(left) and _is_int(right) and _bits(left) + right > _MAX_BITS:
        raise TooLarge(f"the shift would have more than {_MAX_BITS} bits (the bound on integers), so it is not evaluated")
    if op is ast.Mult and _is_int(left) and _is_int(right) and _bits(left) + _bits(right) > _MAX_BITS:
        raise TooLarge(f"the product would have more than {_MAX_BITS} bits (the bound on integers), so it is not evaluated")
    grown = None
    if op is ast.Mult:
        for seq, times in ((left, right), (right, left)):
            if isinstance(seq, (str, bytes, list, tuple)) and _is_int(times) and times > 0:
                items, chars = _size(seq)
                grown = (items * times, chars * times)
    elif op is ast.Add and isinstance(left, (str, bytes, list, tuple)) and isinstance(right, (str, bytes, list, tuple)):
        (li, lc), (ri, rc) = _size(left), _size(right)
        grown = (li + ri, lc + rc)
    if grown is not None and (grown[0] > _MAX_ITEMS or grown[1] > _MAX_LENGTH):
        raise TooLarge(
            f"the value would hold more than {_MAX_ITEMS} elements or {_MAX_LENGTH} characters "
            "(the bound on literal sizes), so it is not evaluated"
        )


def _refuse_unsafe_arithmetic(result: str) -> None:
    """Raise where bfcl-eval's Python decode would ``eval`` an expression that is not bounded literal arithmetic.

    Mirrors the decoder's own preprocessing and walk (``resolve_ast_call`` / ``resolve_ast_by_type``),
    so only expressions the decoder would evaluate are looked at.
    """
    text = result.strip("`\n ")
    if not text.startswith("["):
        text = "[" + text
    if not text.endswith("]"):
        text = text + "]"
    try:
        tree = ast.parse(text.strip().strip("'"), mode="eval")
    except Exception:  # bfcl-eval's own parse fails the same way, before evaluating anything
        return
    body = tree.body
    calls = [body] if isinstance(body, ast.Call) else list(getattr(body, "elts", []))
    for call in calls:
        if isinstance(call, ast.Call):
            _check_keywords(call)


def _check_keywords(call: ast.Call) -> None:
    for kw in call.keywords:
        _check_value(kw.value)


def _check_value(node: ast.AST | None) -> None:
    if isinstance(node, ast.BinOp):
        try:
            _bounded_arithmetic(node)
        except _Unsafe:
            raise
        except Exception:  # e.g. 1/0: eval raises the same, which is a decode failure
            return
    elif isinstance(node, (ast.List, ast.Tuple)):
        for e in node.elts:
            _check_value(e)
    elif isinstance(node, ast.Dict):
        for k, v in zip(node.keys, node.values):
            _check_value(k)
            _check_value(v)
    elif isinstance(node, ast.Call) and node.keywords:
        _check_keywords(node)
