"""Recording for meters: several episodes per task of the policies that draw, each seed as a run of its own would record it."""

from __future__ import annotations

import json

import pytest

from ttg_envs.registry import policy_draws
from ttg_envs.training.meter.record import collect_trajectories

TAU2 = "ttg/Tau2-v0"
TAU2_KWARGS = {"user": "gold"}


def _episodes(path):
    return [json.loads(line)["messages"] for line in path.read_text().splitlines()]


def test_a_policy_draws_where_it_is_noisy_or_perturbed_with_an_eps_above_zero():
    pytest.importorskip("tau2")
    # A spec without an eps takes its factory's default (0.3), so bare noisy and perturbed policies draw.
    assert all(policy_draws(TAU2, spec) for spec in ("perturbed", "perturbed:0.5"))
    assert all(policy_draws("ttg/ALFWorld-v0", spec) for spec in ("noisy_expert", "noisy_expert:1", "idle_expert"))
    assert not any(policy_draws(TAU2, spec) for spec in ("gold", "gold_drop_last", "perturbed:0"))
    assert not any(policy_draws("ttg/ALFWorld-v0", spec) for spec in ("expert", "expert:0.5", "noisy_expert:0"))


def test_episodes_per_task_adds_each_drawing_policys_seeds_as_separate_runs_record_them(tmp_path):
    pytest.importorskip("tau2")
    tasks = [0, 1, 2]
    paths = collect_trajectories(
        TAU2, TAU2_KWARGS, "train", ["gold", "perturbed:0.5"], tmp_path / "three", tasks=tasks, workers=1, episodes_per_task=3
    )
    assert [p.name for p in paths] == [
        "train-gold.jsonl",
        "train-perturbed-0.5.jsonl",
        "train-perturbed-0.5-seed1.jsonl",
        "train-perturbed-0.5-seed2.jsonl",
    ]
    assert all(len(_episodes(p)) == len(tasks) for p in paths)
    # Seed 0's files are what one episode per task records; seed k's what a run with seed k records.
    one = collect_trajectories(TAU2, TAU2_KWARGS, "train", ["gold", "perturbed:0.5"], tmp_path / "one", tasks=tasks, workers=1)
    assert [_episodes(p) for p in one] == [_episodes(p) for p in paths[:2]]
    for k in (1, 2):
        (alone,) = collect_trajectories(
            TAU2, TAU2_KWARGS, "train", ["perturbed:0.5"], tmp_path / f"seed{k}", tasks=tasks, seed=k, workers=1
        )
        assert _episodes(alone) == _episodes(paths[1 + k])
    # The seeds draw different departures (eps 0.5 over three tasks' calls).
    assert len({json.dumps(_episodes(p)) for p in paths[1:]}) == 3


def test_episodes_per_task_must_be_positive(tmp_path):
    with pytest.raises(ValueError, match="episodes_per_task"):
        collect_trajectories(TAU2, TAU2_KWARGS, "train", ["gold"], tmp_path, tasks=[0], episodes_per_task=0)
