"""The episode runner: the same results in one process or many, labels kept, one seed rule."""

from __future__ import annotations

import json

from ttg_envs.eval.rollout import rollout_tasks
from ttg_envs.runner import EpisodeResult, EpisodeTask, count_phrases, count_totals, num_tasks, policy_seed, run_tasks
from ttg_envs.wrappers.recorder import read_trajectories

ENV = "ttg/PaperSearchQA-v0"


def test_results_do_not_depend_on_the_number_of_workers(tmp_path):
    tasks = rollout_tasks(ENV, ["test"], ["expert", "noisy_expert:0.5"], limit=4, record_dir=tmp_path / "one")
    one = run_tasks(tasks, workers=1)
    tasks = rollout_tasks(ENV, ["test"], ["expert", "noisy_expert:0.5"], limit=4, record_dir=tmp_path / "two")
    two = run_tasks(tasks, workers=2)
    assert one == two and [r.policy for r in one] == ["expert"] * 4 + ["noisy_expert:0.5"] * 4
    for name in ("trajectories-test-expert.jsonl", "trajectories-test-noisy_expert-0.5.jsonl"):
        a = [json.dumps(t, sort_keys=True) for t in read_trajectories(tmp_path / "one" / name)]
        assert a == [json.dumps(t, sort_keys=True) for t in read_trajectories(tmp_path / "two" / name)] and len(a) == 4


def test_the_seed_rule_and_the_task_count():
    assert policy_seed(2, 7) == 2 * 1_000_003 + 7
    assert num_tasks(ENV, {"split": "test"}) == 600
    task = EpisodeTask(ENV, {"split": "test"}, 3, 1, "noisy_expert:1")
    a, b = run_tasks([task, task])
    assert a == b and a.seed == 1 and a.policy == "noisy_expert:1"


def test_episode_counts_come_from_info_flags_and_reach_reports_where_the_record_lists_them():
    results = [EpisodeResult("expert", "valid_seen", f"t{i}", "x", 0, True, 3, 30, counts={"planner_timeouts": i}) for i in range(3)]
    assert results[2].record() == {
        "policy": "expert",
        "split": "valid_seen",
        "task_id": "t2",
        "task_type": "x",
        "seed": 0,
        "success": True,
        "steps": 3,
        "assistant_tokens": 30,
        "planner_timeouts": 2,
    }
    assert count_totals(results, "ttg/ALFWorld-v0") == {"planner_timeouts": 3}
    assert count_totals(results, "ttg/BFCL-v0") == {} and count_phrases({}) == ""
    assert count_phrases({"planner_timeouts": 3}) == "planner time limit hit 3 times"
