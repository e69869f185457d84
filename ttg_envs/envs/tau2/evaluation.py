"""tau2's evaluation of an episode (``evaluate_simulation``, type ALL) at the cost of what it changed.

tau2's own evaluator builds two environments from the database files (the agent's, replaying the
episode's tool calls, and gold's, replaying the task's gold actions) and hashes both databases
whole: about a second per episode in retail, which every gold-path label replay paid
(``training/meter/evaluation.py``). :func:`evaluate_episode` scores the same way with three
changes that keep the result: both environments are forks of one built once per process
(:func:`.state.fresh_environment`), gold's is made once per task, and the databases are compared
record by record over the records that are not the same object on both sides (a record neither
side took out of its table is the pristine one on both), which gives what equal hashes give.
A read-only tool replayed here hands out its records uncopied, as in the env (:func:`.state.reading`).
Domains whose databases are not shared record by record (telecom) go to tau2's evaluator as before.
"""

from __future__ import annotations

import contextlib
import json
import threading
from types import SimpleNamespace
from typing import Any

from .data import tau2
from .state import SharedRecords, _is_read_only, _pristine, fresh_environment, reading, shares_records

_GOLD: dict[tuple[str, str], Any] = {}
_GOLD_LOCK = threading.Lock()


def evaluate_episode(task: Any, messages: list[Any], domain: str) -> Any:
    """tau2's ``RewardInfo`` for an episode of ``task`` whose conversation is ``messages`` (tau2
    messages, ``turn_idx`` set), as ``evaluate_simulation(..., EvaluationType.ALL, solo_mode=False)``
    gives it for a run that the user stopped."""
    evaluator = tau2("tau2.evaluator.evaluator")
    if task.evaluation_criteria is None or not shares_records(_pristine(domain)):
        return tau2_evaluation(task, messages, domain)
    env_info = environment_reward(task, messages, domain)
    action_info = evaluator.ActionEvaluator.calculate_reward(task=task, full_trajectory=messages)
    communicate_info = evaluator.CommunicateEvaluator.calculate_reward(task=task, full_trajectory=messages)
    return _combine(task, env_info, action_info, communicate_info)


def tau2_evaluation(task: Any, messages: list[Any], domain: str) -> Any:
    """tau2's own ``evaluate_simulation(..., EvaluationType.ALL, solo_mode=False)`` of the episode
    (both environments built from the files): the reference :func:`evaluate_episode` equals."""
    evaluator = tau2("tau2.evaluator.evaluator")
    return evaluator.evaluate_simulation(
        simulation=_simulation(task, messages), task=task, evaluation_type=evaluator.EvaluationType.ALL, solo_mode=False, domain=domain
    )


def _simulation(task: Any, messages: list[Any]) -> Any:
    import uuid

    simulation = tau2("tau2.data_model.simulation")
    now = messages[-1].timestamp
    return simulation.SimulationRun(
        id=str(uuid.uuid4()),
        task_id=task.id,
        start_time=now,
        end_time=now,
        duration=0.0,
        termination_reason=simulation.TerminationReason.USER_STOP,
        messages=messages,
    )


def _initial(task: Any) -> tuple[Any, Any, list[Any]]:
    initial = task.initial_state
    if initial is None:
        return None, None, []
    return initial.initialization_data, initial.initialization_actions, list(initial.message_history or [])


def _replaying_reads(environment: Any) -> Any:
    """``environment`` with its ``get_response`` running read-only tools under :func:`reading`."""
    respond = environment.get_response

    def get_response(message: Any) -> Any:
        if _is_read_only(environment, message):
            with reading():
                return respond(message)
        return respond(message)

    environment.get_response = get_response
    return environment


def gold_environment(task: Any, domain: str) -> Any:
    """The environment after the task's gold actions (tau2's gold side of the comparison), made once
    per task and never changed after."""
    key = (domain, str(task.id))
    with _GOLD_LOCK:
        if key not in _GOLD:
            data, actions, history = _initial(task)
            gold = _replaying_reads(fresh_environment(domain))
            gold.set_state(initialization_data=data, initialization_actions=actions, message_history=history)
            for action in task.evaluation_criteria.actions or []:
                call = SimpleNamespace(name=action.name, requestor=action.requestor)
                try:
                    with reading() if _is_read_only(gold, call) else contextlib.nullcontext():
                        gold.make_tool_call(tool_name=action.name, requestor=action.requestor, **action.arguments)
                except Exception:  # tau2 logs a warning and goes on
                    pass
            _GOLD[key] = gold
        return _GOLD[key]


def same_database(a: Any, b: Any) -> bool:
    """Whether two databases of one domain have the same hash (tau2's ``get_dict_hash`` of their
    dumps), comparing only the records that are not the same object on both sides; ``None`` equals
    ``None`` only."""
    if a is None or b is None:
        return a is b
    from tau2.utils.utils import get_dict_hash

    tables = [name for name, value in vars(a).items() if isinstance(value, dict)]
    if not tables or not all(isinstance(vars(db)[name], SharedRecords) for db in (a, b) for name in tables):
        return get_dict_hash(a.model_dump()) == get_dict_hash(b.model_dump())
    parts = ({}, {})
    for name in tables:
        ta, tb = vars(a)[name], vars(b)[name]
        keys = set(dict.keys(ta)) ^ set(dict.keys(tb))
        keys.update(k for k in dict.keys(ta) if k in tb and dict.__getitem__(ta, k) is not dict.__getitem__(tb, k))
        for part, table in zip(parts, (ta, tb)):
            part[name] = {k: dict.__getitem__(table, k) for k in keys if k in table}
    dumps = [json.dumps(db.model_copy(update=part).model_dump(), sort_keys=True, default=str) for db, part in zip((a, b), parts)]
    return dumps[0] == dumps[1]


def _db(environment: Any, attr: str) -> Any:
    return getattr(getattr(environment, attr), "db", None)


def environment_reward(task: Any, messages: list[Any], domain: str) -> Any:
    """tau2's ``EnvironmentEvaluator.calculate_reward`` (database match and env assertions) for a
    task with evaluation criteria."""
    sim = tau2("tau2.data_model.simulation")
    reward_type = tau2("tau2.data_model.tasks").RewardType
    criteria = task.evaluation_criteria
    if criteria.actions is None and criteria.env_assertions is None:
        return sim.RewardInfo(
            reward=1.0, db_check=sim.DBCheck(db_match=True, db_reward=1.0), info={"note": "No expected actions or env assertions"}
        )
    data, actions, _ = _initial(task)
    predicted = _replaying_reads(fresh_environment(domain))
    predicted.set_state(initialization_data=data, initialization_actions=actions, message_history=messages)
    gold = gold_environment(task, domain)
    match = all(same_database(_db(gold, attr), _db(predicted, attr)) for attr in ("tools", "user_tools"))
    db_check = sim.DBCheck(db_match=match, db_reward=1.0 if match else 0.0)
    checks = []
    assertion_reward = 1.0
    for assertion in criteria.env_assertions or []:
        met = predicted.run_env_assertion(assertion, raise_assertion_error=False)
        checks.append(sim.EnvAssertionCheck(env_assertion=assertion, met=met, reward=1.0 if met else 0.0))
        assertion_reward *= 1.0 if met else 0.0
    reward, breakdown = 1.0, {}
    if reward_type.DB in criteria.reward_basis:
        breakdown[reward_type.DB] = db_check.db_reward
        reward *= db_check.db_reward
    if reward_type.ENV_ASSERTION in criteria.reward_basis:
        breakdown[reward_type.ENV_ASSERTION] = assertion_reward
        reward *= assertion_reward
    return sim.RewardInfo(
        reward=reward, db_check=db_check, env_assertions=checks, reward_basis=criteria.reward_basis, reward_breakdown=breakdown
    )


def _combine(task: Any, env_info: Any, action_info: Any, communicate_info: Any) -> Any:
    """The ALL combination of ``evaluate_simulation`` (no natural-language assertions)."""
    sim = tau2("tau2.data_model.simulation")
    reward_type = tau2("tau2.data_model.tasks").RewardType
    basis = set(task.evaluation_criteria.reward_basis)
    if basis & {reward_type.NL_ASSERTION}:
        raise ValueError("NL assertions are part of the reward basis, but they are not being evaluated.")
    reward, breakdown = 1.0, {}
    for bases, info in (
        ({reward_type.DB, reward_type.ENV_ASSERTION}, env_info),
        ({reward_type.ACTION}, action_info),
        ({reward_type.COMMUNICATE}, communicate_info),
    ):
        if basis & bases:
            breakdown.update(info.reward_breakdown or {})
            reward *= info.reward
    return sim.RewardInfo(
        reward=reward,
        db_check=env_info.db_check,
        env_assertions=env_info.env_assertions,
        action_checks=action_info.action_checks,
        nl_assertions=None,
        communicate_checks=communicate_info.communicate_checks,
        reward_basis=task.evaluation_criteria.reward_basis,
        reward_breakdown=breakdown,
        info={"env": env_info.info, "nl": None, "communicate": communicate_info.info, "action": action_info.info},
    )
