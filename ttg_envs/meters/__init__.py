"""Progress meters: estimate whether an agent will finish its task and how many tokens it still needs.

``load_meter(spec)`` builds one; every meter has ``estimate(histories) -> list[Estimate]``.
Backends (imported on first use): ``TransformersMeter`` (generative, batched greedy),
``VLLMMeter`` (offline engine, prefix caching), ``OpenAIMeter`` (any OpenAI-compatible server),
``EncoderMeter`` (encoder + regression head, CPU friendly) and ``ScriptedMeter`` (a function).
"""

from .._optional import lazy_attributes
from .answer import ANSWER_PREFIX, format_answer, parse_answer
from .base import (
    TASK_NOTE_ROLE,
    CachedMeter,
    Estimate,
    History,
    ProgressMeter,
    history_key,
    meter_history,
    split_task_note,
    with_task_note,
)
from .loading import load_meter
from .prompt import METER_SYSTEM_PROMPT, PromptConfig, meter_messages, render_history
from .scripted import ScriptedMeter
from .timed import TimedMeter

_LAZY = {
    "TransformersMeter": ".hf",
    "VLLMMeter": ".vllm",
    "OpenAIMeter": ".http",
    "MeterServerError": ".http",
    "EncoderMeter": ".encoder",
    "EncoderConfig": ".encoder",
}

__all__ = [
    "ANSWER_PREFIX",
    "METER_SYSTEM_PROMPT",
    "CachedMeter",
    "EncoderConfig",
    "EncoderMeter",
    "Estimate",
    "History",
    "MeterServerError",
    "OpenAIMeter",
    "ProgressMeter",
    "PromptConfig",
    "ScriptedMeter",
    "TASK_NOTE_ROLE",
    "TimedMeter",
    "TransformersMeter",
    "VLLMMeter",
    "format_answer",
    "history_key",
    "load_meter",
    "meter_history",
    "meter_messages",
    "parse_answer",
    "render_history",
    "split_task_note",
    "with_task_note",
]


__getattr__ = lazy_attributes(__name__, _LAZY)
