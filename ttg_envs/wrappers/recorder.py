"""``TrajectoryRecorder``: every finished episode appended to a JSONL file, and a reader for it.

Each episode is one line, written with a single ``write`` on a file opened in append mode, so a
process killed mid-write leaves at most one torn last line; the next writer terminates it and the
reader skips it (whatever byte it was cut at, mid-character included), and every finished episode
still reads back. Lone surrogates in any string are written as JSON ``\\udXXX`` escapes, so a line
always encodes as UTF-8 and reads back equal.
"""

from __future__ import annotations

import errno
import json
import os
import re
import tempfile
import warnings
from pathlib import Path
from typing import Any, Iterator

import gymnasium as gym
import numpy as np

from ..core import Generation
from .branching import BranchableWrapper


def _jsonable(value: Any) -> Any:
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, (set, frozenset)):
        return sorted(value, key=str)
    return str(value)


class TrajectoryRecorder(BranchableWrapper):
    """Appends each finished episode to ``path`` as one JSON line.

    A record holds ``task``, ``messages`` (the transcript), ``steps`` (reward, terminated,
    truncated and the full ``info`` of every step), ``rewards``, ``success``, ``num_steps``,
    ``assistant_tokens`` and ``ttg_labels`` (when a ``TokenCounter`` sits below this wrapper),
    ``reset_info`` and the ``metadata`` given here (e.g. the policy name).

    Put it outermost so it sees every other wrapper's info fields. Branches do not record unless
    ``record_branches=True`` (trial executions of a selector are not episodes).
    """

    def __init__(self, env: gym.Env, path: str | os.PathLike, *, metadata: dict[str, Any] | None = None, record_branches: bool = False):
        super().__init__(env)
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        # Fail now, not when the first episode ends, if the file cannot be written.
        os.close(os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644))
        self.metadata = dict(metadata or {})
        self.record_branches = record_branches
        self.recording = True
        self._reset_info: dict[str, Any] = {}
        self._steps: list[dict[str, Any]] = []

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        """Reset the env and start a new record."""
        obs, info = self.env.reset(seed=seed, options=options)
        self._reset_info = dict(info)
        self._reset_info["seed"] = seed
        self._steps = []
        return obs, info

    def step(self, action: str | Generation):
        """Step the env; write the episode when it ends."""
        obs, reward, terminated, truncated, info = self.env.step(action)
        self._steps.append({"reward": reward, "terminated": terminated, "truncated": truncated, "info": dict(info)})
        if (terminated or truncated) and self.recording:
            write_trajectory(self.path, self._record())
        return obs, reward, terminated, truncated, info

    def _record(self) -> dict[str, Any]:
        last = self._steps[-1]["info"]
        return {
            "task": self._reset_info.get("task"),
            "metadata": self.metadata,
            "messages": self.env.unwrapped.messages,
            "num_steps": len(self._steps),
            "rewards": [s["reward"] for s in self._steps],
            "success": bool(last.get("success", False)),
            "truncated": bool(self._steps[-1]["truncated"]),
            "assistant_tokens": [s["info"].get("assistant_tokens") for s in self._steps],
            "ttg_labels": last.get("ttg_labels"),
            "reset_info": self._reset_info,
            "steps": self._steps,
        }

    def branch_onto(self, inner: gym.Env) -> TrajectoryRecorder:
        """A copy around ``inner`` that records only when ``record_branches`` is set."""
        clone = super().branch_onto(inner)
        clone.recording = self.record_branches and self.recording
        clone._steps = [dict(s) for s in self._steps]
        clone._reset_info = dict(self._reset_info)
        return clone


_SURROGATES = re.compile("[\ud800-\udfff]")


def _line(record: dict[str, Any]) -> bytes:
    text = json.dumps(record, default=_jsonable, ensure_ascii=False)
    # Raw lone surrogates can only sit inside JSON strings, where their escape means the same.
    text = _SURROGATES.sub(lambda m: f"\\u{ord(m.group()):04x}", text)
    return (text + "\n").encode("utf-8")


def write_trajectory(path: str | os.PathLike, record: dict[str, Any]) -> None:
    """Append one record as a JSON line with a single write (terminating a torn last line first).

    A write that does not complete (a full disk, a file-size limit) raises ``OSError`` and leaves
    no partial record: the file is cut back to where the record began, unless another writer
    appended after it meanwhile (then the torn line stays, and readers skip it).
    """
    line = _line(record)
    fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        size = os.fstat(fd).st_size
        if size and os.pread(fd, 1, size - 1) != b"\n":
            line = b"\n" + line
        cause: OSError | None = None
        try:
            written = os.write(fd, line)
        except OSError as exc:
            written, cause = 0, exc
        if written < len(line):
            if os.fstat(fd).st_size == size + written:
                os.ftruncate(fd, size)
            code = cause.errno if cause is not None and cause.errno else errno.ENOSPC
            message = f"could not write the trajectory record ({written} of {len(line)} bytes); nothing of it was kept"
            raise OSError(code, message, str(path)) from cause
    finally:
        os.close(fd)


def _records(path: str | os.PathLike, verb: str) -> Iterator[tuple[bytes, dict[str, Any]]]:
    """``(line bytes, record)`` of every intact line; a torn or corrupt one is skipped with a warning."""
    with open(path, "rb") as f:
        for lineno, raw in enumerate(f, 1):
            if not raw.strip():
                continue
            try:
                record = json.loads(raw.decode("utf-8"))
            except (UnicodeDecodeError, ValueError, RecursionError):
                record = None
            if not isinstance(record, dict):
                warnings.warn(f"{path}:{lineno}: {verb} a torn or corrupt line", stacklevel=3)
                continue
            yield (raw if raw.endswith(b"\n") else raw + b"\n"), record


def read_trajectories(path: str | os.PathLike) -> Iterator[dict[str, Any]]:
    """Yield every complete episode in a trajectory file, skipping torn lines with a warning."""
    for _, record in _records(path, "skipping"):
        yield record


def sort_by_task(path: str | os.PathLike) -> None:
    """Rewrite a trajectory file with its episodes in task-id order (stable; torn lines dropped with a warning).

    Parallel workers append in completion order; trajectory ids are ``file:line``, so a file
    written by several processes needs this before anything (a train/held-out split) relies on them.
    The new file replaces the old one atomically.
    """
    keyed = []
    for raw, record in _records(path, "dropping"):
        task = record.get("task")
        keyed.append((str(task.get("id", "")) if isinstance(task, dict) else "", raw))
    keyed.sort(key=lambda pair: pair[0])
    path = Path(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        os.fchmod(fd, os.stat(path).st_mode & 0o777)
        with os.fdopen(fd, "wb") as f:
            f.writelines(raw for _, raw in keyed)
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise
