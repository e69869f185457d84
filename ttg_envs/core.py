"""The TextEnv base class: text in, text out, one chat transcript, deterministic tasks, branching.

A ``TextEnv`` is a :class:`gymnasium.Env` whose observations and actions are ``str``. It keeps the
episode transcript ``messages`` (OpenAI chat format), the one source of truth for the history that
actors and progress meters read. Subclasses plug a real engine in through a handful of hooks
(``num_tasks``, ``_start``, ``_apply``, ``_state_key`` and optionally ``_snapshot``/``_restore``).
"""

from __future__ import annotations

import copy
import string
from dataclasses import dataclass
from typing import Any, ClassVar, Sequence

import gymnasium as gym
import numpy as np
from gymnasium import spaces

# ReAct parsing lives beside tool-call parsing; these names stay importable from here.
from .tools.react import ACTION_FORMATS, REACT_FORMAT, ParsedAction, parse_lenient, parse_react
from .tools.tags import ascii_lower, tag_blocks

__all__ = [
    "ACTION_FORMATS",
    "MAX_ACTION_CHARS",
    "MAX_OBSERVATION_CHARS",
    "MAX_TEXT_CHARS",
    "BranchDivergenceError",
    "Generation",
    "ParsedAction",
    "StepOutcome",
    "TextEnv",
    "TextSpace",
    "ascii_lower",
    "cap_text",
    "copy_rng",
    "parse_lenient",
    "parse_react",
    "tag_blocks",
]

#: Upper bound on observation and action length in characters (the spaces' ``max_length``).
MAX_TEXT_CHARS = 1 << 20


class TextSpace(spaces.Text):
    """A ``Text`` space that contains any Python ``str`` up to ``max_length`` characters.

    Gymnasium's ``Text`` only contains strings over its charset, which rejects ordinary prose
    (newlines, punctuation, non-ASCII). Samples are drawn from printable ASCII, so random actions
    look like the junk a model may write.
    """

    def __init__(self, max_length: int = MAX_TEXT_CHARS, *, min_length: int = 0, seed: int | None = None):
        super().__init__(max_length, min_length=min_length, charset=string.printable, seed=seed)

    def sample(self, mask: Any = None, probability: Any = None) -> str:
        """A random printable string of at most 64 characters (shorter than ``max_length`` on purpose)."""
        if mask is None and probability is None:
            mask = (int(self.np_random.integers(self.min_length, max(self.min_length, 64) + 1)), None)
        return super().sample(mask=mask, probability=probability)

    def contains(self, x: Any) -> bool:
        """True for any ``str`` whose length is within bounds, whatever its characters."""
        return isinstance(x, str) and self.min_length <= len(x) <= self.max_length

    def __repr__(self) -> str:
        return f"TextSpace(max_length={self.max_length})"


@dataclass(frozen=True)
class Generation:
    """An assistant response with the token ids the actor generated for it.

    Pass one to ``env.step`` instead of a plain ``str`` so that ``TokenCounter`` counts exactly the
    generated tokens (``len(token_ids)``) rather than re-tokenising the text.
    """

    text: str
    token_ids: Sequence[int] | None = None


#: Longest assistant response any env parses, in characters (``TextEnv.max_action_chars``); a
#: longer one is an invalid step whose observation states the limit.
MAX_ACTION_CHARS = 1 << 18
#: Longest observation ``step`` returns (characters); a longer one is cut by :func:`cap_text`.
MAX_OBSERVATION_CHARS = 1 << 17


def cap_text(text: str, limit: int) -> str:
    """``text`` if it has at most ``limit`` characters, else its head and tail around a marker
    saying how many characters were cut (the result has at most ``limit`` characters plus the marker)."""
    if len(text) <= limit:
        return text
    head = limit // 2
    tail = limit - head
    return f"{text[:head]}\n[... {len(text) - limit} characters cut (the limit is {limit}) ...]\n{text[len(text) - tail :]}"


def copy_rng(rng: Any) -> Any:
    """An independent copy of ``rng`` that draws what ``rng`` would: what ``copy.deepcopy`` gives, faster.

    A numpy ``Generator`` is rebuilt as a new one of the same types over its bit generator's state
    (about 4x faster than ``deepcopy``, which pickles it); its seed sequence is a new
    ``SeedSequence`` with the original's entropy, spawn key and children count, so ``spawn`` on the
    copy gives what it would on a deep copy. ``None`` stays ``None``; anything else is deep-copied.
    """
    if rng is None:
        return None
    if type(rng) is not np.random.Generator:
        return copy.deepcopy(rng)
    bits = rng.bit_generator
    seq = bits.seed_seq
    if type(seq) is not np.random.SeedSequence:
        return copy.deepcopy(rng)
    seq = np.random.SeedSequence(seq.entropy, spawn_key=seq.spawn_key, pool_size=seq.pool_size, n_children_spawned=seq.n_children_spawned)
    fresh = type(bits)(seq)
    fresh.state = bits.state
    return np.random.Generator(fresh)


@dataclass
class StepOutcome:
    """What an engine returns for one applied command (``TextEnv._apply``).

    By default the transcript gets ``{"role": "assistant", "content": text}`` then
    ``{"role": "user", "content": observation}``; tool envs set ``assistant_message`` (e.g. with
    ``tool_calls``) and ``messages`` (e.g. one ``tool`` message per call) instead.
    """

    observation: str
    reward: float = 0.0
    terminated: bool = False
    success: bool = False
    action_valid: bool = True
    info: dict[str, Any] | None = None
    error: str | None = None
    assistant_message: dict[str, Any] | None = None
    messages: list[dict[str, Any]] | None = None


class BranchDivergenceError(RuntimeError):
    """A branch rebuilt by replaying the action log did not reach the original's state."""


class TextEnv(gym.Env[str, str]):
    """Base class of every ttg environment.

    Subclasses implement:

    - ``tasks`` (items with ``info()``), or ``num_tasks`` and ``_task_info(index)``: the task
      list, in a fixed order;
    - ``_start(index) -> (observation, info)``: start the engine on a task;
    - ``_apply(command) -> StepOutcome``: run one parsed command on the engine;
    - ``_state_key() -> str``: hash of the canonical engine state;
    - optionally ``_snapshot()``/``_restore(snapshot)`` for O(1) branching (default: replay),
      ``_adopt(branch)`` so that a guided step takes over its chosen branch (:meth:`offer_step`),
      ``parse_action`` for another action syntax, ``_invalid_outcome`` for a richer error turn,
      ``known_commands`` (what lenient parsing may match), ``system_prompt`` and
      ``_opening_messages`` (the transcript's first turns).

    ``action_format``: ``"strict"`` (the paper's protocol: one ``<action>`` block) or ``"lenient"``
    (see :func:`parse_lenient`), for envs that read ReAct tags.
    """

    metadata: ClassVar[dict[str, Any]] = {"render_modes": ["ansi", "human"], "render_fps": 1}
    #: Truncation limit used when ``max_steps`` is not given (a registered env's: its record's ``max_turns``).
    default_max_steps: ClassVar[int] = 50
    #: Longest response ``step`` parses (characters); longer is an invalid step stating the limit.
    max_action_chars: ClassVar[int] = MAX_ACTION_CHARS
    #: Whether :meth:`task_state_key` is declared: a step that leaves it unchanged leaves the
    #: remaining work unchanged (ALFWorld). False for the tool envs, where a read-only call can be
    #: progress (the assistant learns what it needs), so no step there is declared a no-op.
    declares_task_state: ClassVar[bool] = False

    def __init__(self, *, max_steps: int | None = None, render_mode: str | None = None, action_format: str = "strict"):
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            raise ValueError(f"render_mode must be one of {self.metadata['render_modes']}, got {render_mode!r}")
        if action_format not in ACTION_FORMATS:
            raise ValueError(f"action_format must be one of {ACTION_FORMATS}, got {action_format!r}")
        if action_format != "strict" and type(self).parse_action is not TextEnv.parse_action:
            raise ValueError(
                f"{type(self).__name__} has an action syntax of its own; action_format={action_format!r} "
                "applies to envs that read ReAct <action> tags"
            )
        self.action_format = action_format
        self.max_steps = int(max_steps) if max_steps is not None else self.default_max_steps
        if self.max_steps < 1:
            raise ValueError(f"max_steps must be >= 1, got {max_steps}")
        self.render_mode = render_mode
        self.observation_space = TextSpace()
        self.action_space = TextSpace()
        self.messages: list[dict[str, Any]] = []
        self.actions: list[str] = []
        self.task: dict[str, Any] | None = None
        self.task_index: int | None = None
        self.elapsed_steps = 0
        self.done = False
        self.success = False

    # ----------------------------------------------------------------- hooks for subclasses
    #: The env's task list in a fixed order; each task has ``info() -> dict``.
    tasks: Sequence[Any] = ()

    @property
    def num_tasks(self) -> int:
        """Number of tasks this env instance can reset to."""
        return len(self.tasks)

    def _task_info(self, index: int) -> dict[str, Any]:
        """The ``info["task"]`` dict of task ``index`` (at least ``id``, ``type``, ``split``)."""
        return self.tasks[index].info()

    def _start(self, index: int) -> tuple[str, dict[str, Any]]:
        """Start the engine on task ``index``; return the first observation and extra info."""
        raise NotImplementedError

    def _apply(self, command: Any) -> StepOutcome:
        """Apply one parsed command (``ParsedAction.command``) to the engine."""
        raise NotImplementedError

    def _state_key(self) -> str:
        """A hash of the canonical engine state (equal keys mean equal states)."""
        raise NotImplementedError

    def task_state_key(self) -> str | None:
        """A hash of the state as far as the task is concerned, where the env declares one
        (:attr:`declares_task_state`; None otherwise): equal keys before and after a step mean the
        step changed nothing the rest of the task depends on (ALFWorld: the engine's facts without
        its bookkeeping facts), so the remaining work after it equals the remaining work before."""
        return None

    def _snapshot(self) -> Any:
        """An engine snapshot for branching, or None to branch by replaying the action log."""
        return None

    def _restore(self, snapshot: Any) -> None:
        """Make this (cloned) env's engine state equal to ``snapshot``."""
        raise NotImplementedError

    def start_trials(self, actions: Sequence[str | Generation], method: str = "auto") -> list[TextEnv] | None:
        """Hook: one :meth:`branch` per action with the engine's work of stepping that action in it
        already under way, all at once (AWM: every branch's app works on its first call while the
        next branch forks), for :func:`~ttg_envs.wrappers.branching.try_actions`. Each branch,
        stepped with its action, returns what a fresh branch would. None (the default): the trials
        branch and step one after another."""
        return None

    def _fallback_snapshot(self) -> Any:
        """A snapshot for :meth:`_restore` to branch from when a replay diverged, or None (the
        divergence is raised). For engines whose replays are preferred but which can copy their
        state now (AWM forks a running app, its memory included)."""
        return None

    @property
    def system_prompt(self) -> str:
        """The system message that opens every transcript."""
        return f"Reason inside <think> </think>, then give exactly one command as {REACT_FORMAT}."

    def parse_action(self, text: str) -> ParsedAction:
        """Turn assistant text into a command (default: ReAct ``<action>`` tags; with
        ``action_format="lenient"``, :func:`parse_lenient` over :meth:`known_commands`). Never raises."""
        if self.action_format == "lenient":
            return parse_lenient(text, self.known_commands())
        return parse_react(text)

    def known_commands(self) -> Sequence[str] | None:
        """The commands the engine accepts now, for lenient parsing (None: not known)."""
        return None

    def _opening_messages(self, observation: str) -> list[dict[str, Any]]:
        """The transcript after the system message at reset (default: the first observation as a user message)."""
        return [{"role": "user", "content": observation}]

    def _invalid_outcome(self, error: str) -> StepOutcome:
        """The turn returned for a response that did not parse: the error is the observation."""
        return StepOutcome(observation=error, action_valid=False, error=error)

    # ----------------------------------------------------------------- gymnasium API
    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        """Start an episode.

        The task is ``options["task_index"]`` or ``options["task_id"]`` when given, otherwise drawn
        from the env's RNG, so the same ``seed`` gives the same task in any process.
        """
        super().reset(seed=seed)
        index = self._select_task(options or {})
        task = dict(self._task_info(index))
        # _start may fail (an engine that cannot load the task): then nothing here has changed.
        observation, extra = self._start(index)
        self.task_index = index
        self.task = task
        self.messages = [{"role": "system", "content": self.system_prompt}, *self._opening_messages(observation)]
        self.actions = []
        self.elapsed_steps = 0
        self.done = False
        self.success = False
        info = {"task": dict(self.task), **self._step_info(success=False, action_valid=True), **extra}
        return observation, info

    def step(self, action: str | Generation) -> tuple[str, float, bool, bool, dict[str, Any]]:
        """Apply one assistant response; malformed text is an invalid action, never an exception."""
        if self.task is None:
            raise gym.error.ResetNeeded("Cannot call step() before reset().")
        if self.done:
            raise gym.error.ResetNeeded("The episode is over (terminated or truncated); call reset().")
        text = action.text if isinstance(action, Generation) else action
        adopted = self._take_offer(text)
        if adopted is not None:
            return adopted
        if not isinstance(text, str):
            text = "" if text is None else str(text)
            outcome = self._invalid_outcome(f"Invalid response: expected text, got {type(action).__name__}. Answer as {REACT_FORMAT}.")
        elif len(text) > self.max_action_chars:
            outcome = self._invalid_outcome(
                f"Invalid response: it is {len(text)} characters long; the limit is {self.max_action_chars} characters."
            )
        else:
            parsed = self.parse_action(text)
            outcome = self._invalid_outcome(parsed.error) if parsed.error else self._apply(parsed.command)
        outcome.observation = cap_text(str(outcome.observation), MAX_OBSERVATION_CHARS)
        for message in outcome.messages or ():
            if isinstance(message.get("content"), str):
                message["content"] = cap_text(message["content"], MAX_OBSERVATION_CHARS)
        self.actions.append(text)
        self.messages.append(outcome.assistant_message or {"role": "assistant", "content": text})
        self.messages.extend(outcome.messages or [{"role": "user", "content": outcome.observation}])
        self.elapsed_steps += 1
        self.success = bool(outcome.success)
        terminated = bool(outcome.terminated)
        truncated = not terminated and self.elapsed_steps >= self.max_steps
        self.done = terminated or truncated
        info = self._step_info(success=self.success, action_valid=outcome.action_valid)
        if outcome.error:
            info["error"] = outcome.error
        info.update(outcome.info or {})
        if self.render_mode == "human":
            self.render()
        if self._keeps_last_step:
            self._last_step = (outcome.observation, float(outcome.reward), terminated, truncated, dict(info))
        return outcome.observation, float(outcome.reward), terminated, truncated, info

    def render(self) -> str | None:
        """``ansi``: the transcript as text; ``human``: print the last turn."""
        if self.render_mode is None:
            return None
        if self.render_mode == "human":
            print(f"[{self.messages[-1]['role']}] {self.messages[-1]['content']}")
            return None
        return "\n\n".join(f"[{m['role']}]\n{m['content']}" for m in self.messages)

    # ----------------------------------------------------------------- branching
    def branch(self, method: str = "auto") -> TextEnv:
        """An independent env in the same state, whose future equals this one's under the same actions.

        ``method="auto"`` uses the engine snapshot when the env has one and falls back to replay;
        ``"replay"`` forces reset + replay of the action log, checked with ``state_key``. Under
        ``"auto"`` a replay that diverges falls back to the env's :meth:`_fallback_snapshot` where it
        has one; else (and under ``"replay"``) it raises :class:`BranchDivergenceError`.
        """
        if self.task is None:
            raise gym.error.ResetNeeded("Cannot branch before reset().")
        if method not in ("auto", "snapshot", "replay"):
            raise ValueError(f"method must be 'auto', 'snapshot' or 'replay', got {method!r}")
        snapshot = self._snapshot() if method != "replay" else None
        if method == "snapshot" and snapshot is None:
            raise NotImplementedError(f"{type(self).__name__} has no engine snapshot; use method='replay'.")
        clone = self._clone()
        if snapshot is not None:
            clone._restore(snapshot)
        else:
            try:
                clone._replay_from(self)
            except BranchDivergenceError:
                fallback = self._fallback_snapshot() if method == "auto" else None
                if fallback is None:
                    clone.close()
                    raise
                clone._restore(fallback)
        clone.messages = [dict(m) for m in self.messages]
        clone.actions = list(self.actions)
        clone.task = dict(self.task)
        clone.task_index = self.task_index
        clone.elapsed_steps = self.elapsed_steps
        clone.done = self.done
        clone.success = self.success
        clone._np_random = copy_rng(self._np_random)
        clone._offer = clone._last_step = None
        clone._keeps_last_step = True
        return clone

    # A branch keeps its last step's results so that the env it came from can adopt it.
    _keeps_last_step: ClassVar[bool] = False
    _last_step: tuple | None = None
    _offer: tuple | None = None

    def offer_step(self, branch: TextEnv) -> bool:
        """Let the next ``step`` of this env take over ``branch`` instead of running the engine.

        ``branch`` is a :meth:`branch` of this env, from its current state, that took one step. If
        the next ``step`` here has that step's text, this env takes the branch's engine state (the
        :meth:`_adopt` hook), transcript and counters, and returns the branch's step results: the
        same as stepping again. Anything else (another text, a reset, an env without the hook)
        steps as usual. The branch must not be used after. False when this env cannot adopt.
        """
        if type(self)._adopt is TextEnv._adopt or branch._last_step is None or branch.elapsed_steps != self.elapsed_steps + 1:
            return False
        self._offer = (branch, self.messages, len(self.messages))
        return True

    def _adopt(self, branch: TextEnv) -> bool:
        """Hook: take over the engine state of ``branch`` (see :meth:`offer_step`), or return False
        to run the step instead. The branch is dropped after, never closed."""
        return False

    def _take_offer(self, text: Any) -> tuple | None:
        offer, self._offer = self._offer, None
        if offer is None:
            return None
        branch, messages, length = offer
        if (
            messages is not self.messages
            or length != len(self.messages)
            or branch.elapsed_steps != self.elapsed_steps + 1
            or branch.actions[-1] != text
            or not self._adopt(branch)
        ):
            branch.close()
            return None
        self.messages.extend(branch.messages[length:])
        self.actions.append(branch.actions[-1])
        self.elapsed_steps, self.done, self.success = branch.elapsed_steps, branch.done, branch.success
        self._np_random = branch._np_random
        if self.render_mode == "human":
            self.render()
        if self._keeps_last_step:
            self._last_step = branch._last_step
        observation, reward, terminated, truncated, info = branch._last_step
        return observation, reward, terminated, truncated, dict(info)

    def _clone(self) -> TextEnv:
        """A new env object sharing this one's immutable resources (task list, caches).

        Subclasses whose attributes hold per-episode mutable state override this to detach it.
        """
        return copy.copy(self)

    def _replay_from(self, original: TextEnv) -> None:
        self._start(original.task_index)
        self.done = False
        for text in original.actions:
            parsed = self.parse_action(text)
            if not parsed.error:
                self._apply(parsed.command)
        if self._state_key() != original._state_key():
            raise BranchDivergenceError(
                f"Replaying {len(original.actions)} actions of task {original.task['id']!r} reached a different "
                "engine state than the original episode; the engine is not deterministic under replay."
            )

    # ----------------------------------------------------------------- helpers
    def _select_task(self, options: dict[str, Any]) -> int:
        n = self.num_tasks
        if n == 0:
            raise ValueError(f"{type(self).__name__} has no tasks to reset to.")
        if "task_index" in options:
            index = int(options["task_index"])
            if not 0 <= index < n:
                raise IndexError(f"task_index {index} out of range for {n} tasks")
            return index
        if "task_id" in options:
            return self.task_index_of(options["task_id"])
        return int(self.np_random.integers(n))

    def task_index_of(self, task_id: str) -> int:
        """The index of the task whose id is ``task_id``."""
        for i in range(self.num_tasks):
            if self._task_info(i)["id"] == task_id:
                return i
        raise KeyError(f"no task with id {task_id!r}")

    def _step_info(self, *, success: bool, action_valid: bool) -> dict[str, Any]:
        return {
            "success": success,
            "action_valid": action_valid,
            "state_key": self._state_key(),
            "elapsed_steps": self.elapsed_steps,
        }
