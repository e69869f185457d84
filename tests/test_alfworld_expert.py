"""The fast ALFWorld expert: goals parsed from the PDDL, the domain expert winning every bundled
validation game from reset and after detours, recovery from out-of-order moves without a search,
and the exact path (``expert_plan``, which ``PlanLength`` and planner-k read) left unchanged."""

from __future__ import annotations

from concurrent.futures import ProcessPoolExecutor

import gymnasium as gym
import numpy as np
import pytest

from ttg_envs.envs.alfworld import ExpertPolicy, NoisyExpertPolicy, load_tasks
from ttg_envs.envs.alfworld.expert import ExpertGoal, parse_goal
from ttg_envs.envs.alfworld.tasks import TASK_TYPES

pytest.importorskip("textworld")


def _follow(env, plan) -> bool:
    """Step ``plan`` on ``env``; True when its last command wins (and no earlier one ends the episode)."""
    terminated = False
    for command in plan:
        assert not terminated
        _, _, terminated, _, info = env.step(f"<action>{command}</action>")
        assert info["action_valid"], command
    return terminated


def _step(env, *commands: str) -> None:
    for command in commands:
        _, _, _, _, info = env.step(f"<action>{command}</action>")
        assert info["action_valid"], command


def _task(split: str, task_id_part: str) -> int:
    return next(i for i, t in enumerate(load_tasks(split)) if task_id_part in t.id)


def test_goals_of_the_six_task_types():
    tasks = load_tasks("valid_seen")
    goals = {ty: parse_goal(next(t for t in tasks if t.type == ty).game()["pddl_problem"]) for ty in TASK_TYPES}
    assert goals["look_at_obj_in_light"].lamp in ("desklamptype", "floorlamptype") and goals["look_at_obj_in_light"].rtype is None
    assert goals["pick_and_place_simple"].modifier is None and goals["pick_and_place_simple"].count == 1
    assert goals["pick_clean_then_place_in_recep"].modifier == "isclean"
    assert goals["pick_heat_then_place_in_recep"].modifier == "ishot"
    assert goals["pick_cool_then_place_in_recep"].modifier == "iscool"
    assert goals["pick_two_obj_and_place"].count == 2 and goals["pick_two_obj_and_place"].modifier is None
    cloth = next(t for t in tasks if t.id.startswith("valid_seen/pick_clean_then_place_in_recep-Cloth-None-CounterTop"))
    assert parse_goal(cloth.game()["pddl_problem"]) == ExpertGoal("clothtype", "countertoptype", "isclean", 1, None)


def _check_domain_expert(split: str, indices: list[int], detours: int) -> list[str]:
    """The domain expert's plan, from the initial state (the stored walkthrough ignored) and from
    ``detours`` states along a random walk, must win when followed (on a branch)."""
    env = gym.make("ttg/ALFWorld-v0", split=split, show_admissible=False, max_steps=1000)
    base = env.unwrapped
    problems = []
    for index in indices:
        env.reset(options={"task_index": index})
        rng = np.random.default_rng(index)
        for k in range(detours + 1):
            plan = base._engine.domain_plan(base._came_through)
            branch = env.unwrapped.branch()
            if not plan or not _follow(branch, plan):
                problems.append(f"{base.tasks[index].id} after {k} random steps: {plan}")
                break
            branch.close()
            for _ in range(int(rng.integers(1, 4))):
                commands = base.admissible_commands
                _, _, terminated, _, _ = env.step(f"<action>{commands[int(rng.integers(len(commands)))]}</action>")
                if terminated:
                    break
            if terminated:
                break
    env.close()
    return problems


@pytest.mark.slow  # ~1 CPU-minute for both splits (two processes each), game loads mostly
@pytest.mark.parametrize("split", ["valid_seen", "valid_unseen"])
def test_the_domain_expert_wins_every_validation_game_from_reset_and_after_detours(split):
    n = len(load_tasks(split))
    halves = [list(range(0, n, 2)), list(range(1, n, 2))]
    with ProcessPoolExecutor(2) as pool:
        problems = [p for part in pool.map(_check_domain_expert, [split, split], halves, [4, 4]) for p in part]
    assert problems == []


def test_the_expert_recovers_from_an_out_of_order_take_without_a_search():
    # Holding the mug two moves away from where it lay: plan repair finds no earlier plan (the
    # exact path would search: test_alfworld_engine), the fast expert puts the mug back where it
    # was taken from and finishes. A millisecond planner limit: any search would show.
    env = gym.make("ttg/ALFWorld-v0", split="valid_seen", planner_timeout=0.001)
    env.reset(options={"task_index": 2})
    assert env.unwrapped.tasks[2].plan == ("go to sidetable 1", "use desklamp 1", "take book 1 from sidetable 1")
    _step(env, "go to sidetable 1", "take mug 1 from sidetable 1", "go to desk 1", "go to bed 1")
    plan = env.unwrapped.policy_plan()
    assert plan == ["go to sidetable 1", "move mug 1 to sidetable 1", "take book 1 from sidetable 1", "use desklamp 1"]
    assert env.unwrapped.planner_timeouts == 0 and env.unwrapped._engine.fast_fallbacks == 0
    assert _follow(env, plan)


def test_the_expert_fetches_a_goal_object_a_detour_moved_and_keeps_its_cleaning():
    # The cloth cleaned, then carried to the wrong receptacle and left there: the expert takes
    # it from where it is now and does not clean it again.
    env = gym.make("ttg/ALFWorld-v0", split="valid_seen", planner_timeout=0.001)
    index = _task("valid_seen", "pick_clean_then_place_in_recep-Cloth-None-CounterTop-FloorPlan403-0007")
    env.reset(options={"task_index": index})
    assert env.unwrapped.tasks[index].plan[:3] == ("go to sinkbasin 2", "take cloth 2 from sinkbasin 2", "clean cloth 2 with sinkbasin 2")
    _step(
        env,
        "go to sinkbasin 2",
        "take cloth 2 from sinkbasin 2",
        "clean cloth 2 with sinkbasin 2",
        "go to toilet 1",
        "move cloth 2 to toilet 1",
        "go to shelf 1",
    )
    plan = env.unwrapped.policy_plan()
    assert plan == ["go to toilet 1", "take cloth 2 from toilet 1", "go to countertop 1", "move cloth 2 to countertop 1"]
    assert env.unwrapped.planner_timeouts == 0 and _follow(env, plan)


def test_the_expert_puts_back_a_second_object_taken_out_of_order():
    # pick_two: one object placed, then taken out again and carried off: the expert brings it back.
    env = gym.make("ttg/ALFWorld-v0", split="valid_unseen", planner_timeout=0.001, max_steps=100)
    index = next(i for i, t in enumerate(load_tasks("valid_unseen")) if t.type == "pick_two_obj_and_place")
    env.reset(options={"task_index": index})
    walkthrough = env.unwrapped.tasks[index].plan
    first_put = next(i for i, c in enumerate(walkthrough) if c.startswith("move "))
    _step(env, *walkthrough[: first_put + 1])
    obj, target = walkthrough[first_put][len("move ") :].split(" to ")
    _step(env, f"take {obj} from {target}")
    elsewhere = next(c for c in env.unwrapped.admissible_commands if c.startswith("go to ") and c != f"go to {target}")
    _step(env, elsewhere)
    plan = env.unwrapped.policy_plan()
    assert plan[:2] == [f"go to {target}", f"move {obj} to {target}"]
    assert env.unwrapped.planner_timeouts == 0 and env.unwrapped._engine.fast_fallbacks == 0
    assert _follow(env, plan)


@pytest.mark.parametrize("split", ["valid_seen", "valid_unseen"])
def test_noisy_experts_never_search(split):
    # A millisecond planner limit: a search would time out and be counted. Every 9th task, the
    # three noisy experts the project uses.
    env = gym.make("ttg/ALFWorld-v0", split=split, planner_timeout=0.001)
    base = env.unwrapped
    episodes = wins = 0
    for index in range(0, len(base.tasks), 9):
        for eps in (0.25, 0.5, 0.75):
            policy = NoisyExpertPolicy(eps=eps, seed=index)
            _, info = env.reset(options={"task_index": index})
            done = False
            while not done:
                _, _, terminated, truncated, info = env.step(policy(env))
                done = terminated or truncated
                assert "planner_timeout" not in info
            episodes += 1
            wins += info["success"]
    assert base.planner_timeouts == 0 and base._engine.fast_fallbacks == 0
    assert wins >= 0.7 * episodes, (wins, episodes)


def test_the_exact_plan_is_the_planners_whatever_the_expert_did():
    # expert_plan (PlanLength, planner-k) never reads the fast expert's plans: from a state where
    # the fast expert answered first, it is the plan a fresh engine's planner gives.
    detour = ("go to sidetable 1", "take mug 1 from sidetable 1", "go to desk 1", "go to bed 1")
    fast = gym.make("ttg/ALFWorld-v0", split="valid_seen")
    fast.reset(options={"task_index": 2})
    _step(fast, *detour)
    assert ExpertPolicy()(fast) == "<think>Next I will go to sidetable 1.</think><action>go to sidetable 1</action>"
    exact = fast.unwrapped.expert_plan()
    fresh = gym.make("ttg/ALFWorld-v0", split="valid_seen")
    fresh.reset(options={"task_index": 2})
    _step(fresh, *detour)
    assert fresh.unwrapped._engine._core is not fast.unwrapped._engine._core
    assert exact == fresh.unwrapped.expert_plan() and not fast.unwrapped.last_plan_timed_out
    # Once the exact plan is known, the expert follows it (so expert_ttg counts its roll-out).
    assert fast.unwrapped.policy_plan() == exact
    fresh.close()
    fast.close()
