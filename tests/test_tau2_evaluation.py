"""The env's evaluator (``envs/tau2/evaluation.py``) gives tau2's own verdict: the same reward and
database check as ``evaluate_simulation`` on won and lost episodes, and its record-by-record database
comparison tells a changed, added or removed record from an untouched one."""

from __future__ import annotations

import pytest

pytest.importorskip("tau2")

from ttg_envs.envs.tau2 import Tau2Env  # noqa: E402
from ttg_envs.envs.tau2.evaluation import evaluate_episode, same_database, tau2_evaluation  # noqa: E402
from ttg_envs.envs.tau2.policies import GoldPolicy, PerturbedGoldPolicy  # noqa: E402
from ttg_envs.envs.tau2.state import fresh_environment  # noqa: E402


def _tau2_verdict(env):
    messages = [m.model_copy(update={"turn_idx": i}) for i, m in enumerate(env.trajectory)]
    theirs = tau2_evaluation(env.task_object, messages, env.domain)
    ours = evaluate_episode(env.task_object, messages, env.domain)
    return (ours.reward, ours.db_check), (theirs.reward, theirs.db_check)


@pytest.mark.parametrize("domain, tasks", [("retail", (0, 7, 21)), ("airline", (0, 5))])
def test_the_verdict_is_tau2s_on_won_and_lost_episodes(domain, tasks):
    env = Tau2Env(domain, split="train", user="gold")
    outcomes = set()
    for index in tasks:
        for policy in (GoldPolicy(), PerturbedGoldPolicy(eps=0.5, seed=1), PerturbedGoldPolicy(eps=1.0, seed=2)):
            env.reset(seed=0, options={"task_index": index})
            while not env.done:
                env.step(policy(env))
            ours, theirs = _tau2_verdict(env)
            assert ours == theirs, (index, policy)
            assert ours[0] == env.success  # what the env itself scored
            outcomes.add((ours[0], ours[1].db_match if ours[1] else None))
    assert {o[0] for o in outcomes} == {0.0, 1.0}  # won and lost episodes both checked


def test_same_database_compares_the_records_either_side_changed():
    a, b = fresh_environment("retail"), fresh_environment("retail")
    assert same_database(a.tools.db, b.tools.db)
    user_id = next(iter(dict.keys(b.tools.db.users)))
    b.tools.db.users[user_id]  # taken out (copied), unchanged
    assert same_database(a.tools.db, b.tools.db)
    b.tools.db.users[user_id].name.first_name += "x"
    assert not same_database(a.tools.db, b.tools.db)
    assert a.tools.get_db_hash() != b.tools.get_db_hash()  # what tau2 compares agrees
    c = fresh_environment("retail")
    c.tools.db.users.pop(user_id)
    assert not same_database(a.tools.db, c.tools.db)
    assert not same_database(c.tools.db, a.tools.db)
