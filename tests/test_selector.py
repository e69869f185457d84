"""Natural, random-of-k and guided-of-k selection on the tiny ALFWorld game with a scripted meter."""

from __future__ import annotations

import pytest

from ttg_envs.agents import GuidedSelector, NaturalSelector, RandomSelector, load_actor
from ttg_envs.core import Generation
from ttg_envs.meters import ScriptedMeter
from ttg_envs.wrappers import ProgressMeterWrapper, TokenCounter


class FixedActor:
    """Returns the given texts as the candidates of every env, and records how it was called."""

    def __init__(self, texts):
        self.texts = list(texts)
        self.calls = []

    def sample(self, envs, n=1):
        self.calls.append((len(envs), n))
        return [[Generation(t, [0] * (i + 1)) for i, t in enumerate(self.texts[:n])] for _ in envs]


def act(command: str) -> str:
    return f"<action>{command}</action>"


def by_last_action(remaining: dict):
    """A meter whose remaining-token estimate depends on the last assistant command only."""

    def fn(history):
        last = next((m["content"] for m in reversed(history) if m["role"] == "assistant"), "")
        return True, remaining.get(last, 100)

    return ScriptedMeter(fn)


def meter_env(tiny_env, meter):
    env = ProgressMeterWrapper(TokenCounter(tiny_env), meter)
    env.reset(seed=0)
    return env


def test_guided_picks_largest_predicted_decrease_and_only_main_env_advances(tiny_env):
    env = meter_env(tiny_env, by_last_action({}))
    commands = env.unwrapped.admissible_commands[:3]
    texts = [act(c) for c in commands]
    meter = by_last_action({texts[0]: 50, texts[1]: 10, texts[2]: 30})
    env.meter = meter
    before = ([dict(m) for m in env.unwrapped.messages], env.unwrapped.elapsed_steps, env.unwrapped._state_key())
    selector = GuidedSelector(FixedActor(texts), k=3)
    choice = selector(env)
    assert choice.text == texts[1]
    assert selector.last.chosen == 1 and selector.last.deltas[1] == max(selector.last.deltas)
    assert env.unwrapped.messages == before[0] and env.unwrapped.elapsed_steps == before[1]
    assert env.unwrapped._state_key() == before[2]
    _, _, _, _, info = env.step(choice)
    assert info["ttg"] == 10 and env.unwrapped.elapsed_steps == 1


def test_guided_ties_go_to_the_first_and_identical_texts_are_scored_once(tiny_env):
    env = meter_env(tiny_env, by_last_action({}))
    a, b, c = (act(x) for x in env.unwrapped.admissible_commands[:3])
    meter = by_last_action({a: 40, b: 20, c: 20})
    env.meter = meter
    selector = GuidedSelector(FixedActor([a, b, a, c]), k=4)
    assert selector(env).text == b
    assert selector.last.distinct == [0, 1, 3] and selector.last.chosen == 1
    assert meter.calls == [3]  # one meter call, each distinct text once


def test_guided_with_one_distinct_candidate_needs_no_meter_call(tiny_env):
    meter = by_last_action({})
    env = meter_env(tiny_env, meter)
    calls = list(meter.calls)
    selector = GuidedSelector(FixedActor([act("look")] * 4), k=4)
    assert selector(env).text == act("look")
    assert meter.calls == calls


def test_guided_needs_a_meter_wrapper(tiny_env):
    env = TokenCounter(tiny_env)
    env.reset(seed=0)
    with pytest.raises(ValueError, match="ProgressMeterWrapper"):
        GuidedSelector(FixedActor([act("look"), act("inventory")]), k=2)(env)


def test_natural_asks_for_one_sample_and_random_uses_the_budget(tiny_env):
    env = meter_env(tiny_env, by_last_action({}))
    actor = FixedActor([act("look"), act("inventory")])
    NaturalSelector(actor)(env)
    RandomSelector(actor, k=2, seed=0)(env)
    assert actor.calls == [(1, 1), (1, 2)]


def test_random_selector_is_seeded_and_differs_from_guided(tiny_env):
    env = meter_env(tiny_env, by_last_action({}))
    texts = [act(c) for c in env.unwrapped.admissible_commands[:4]]
    env.meter = by_last_action({t: 100 - i for i, t in enumerate(texts)})  # guided always picks the last
    picks = lambda sel: [texts.index(sel(env).text) for _ in range(20)]  # noqa: E731
    random_picks = picks(RandomSelector(FixedActor(texts), k=4, seed=3))
    assert random_picks == picks(RandomSelector(FixedActor(texts), k=4, seed=3))
    assert random_picks != picks(RandomSelector(FixedActor(texts), k=4, seed=4))
    assert set(random_picks) == {0, 1, 2, 3}
    assert picks(GuidedSelector(FixedActor(texts), k=4)) == [3] * 20


def test_guided_rollouts_with_a_scripted_actor_reproduce_by_seed(tiny_env):
    def actions(seed):
        env = meter_env(tiny_env, ScriptedMeter(lambda h: (True, 3 * len(h))))
        selector = GuidedSelector(load_actor("scripted:noisy_expert:0.5", seed=seed), k=4)
        done = False
        while not done:
            _, _, term, trunc, _ = env.step(selector(env))
            done = term or trunc
        return list(env.unwrapped.actions)

    assert actions(0) == actions(0)
    assert any(actions(0) != actions(s) for s in (1, 2, 3))


def test_guided_takes_plain_string_candidates_like_the_other_selectors(tiny_env):
    env = meter_env(tiny_env, by_last_action({}))
    texts = [act(c) for c in env.unwrapped.admissible_commands[:2]]
    env.meter = by_last_action({texts[0]: 40, texts[1]: 20})
    choice = GuidedSelector(FixedActor(texts), k=2).choose(env, texts)  # str, not Generation
    assert isinstance(choice, Generation) and choice.text == texts[1]
