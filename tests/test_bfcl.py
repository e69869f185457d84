"""ttg/BFCL-v0 on bfcl-eval's data, backends and checkers: the ground truth wins through env.step, a
dropped call loses, malformed text is an observation, branches are independent and equivalent."""

from __future__ import annotations

import sys
import warnings
from collections import Counter

import gymnasium as gym
import pytest
from gymnasium.utils.env_checker import check_env
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

pytest.importorskip("bfcl_eval")

from ttg_envs.envs.bfcl import GROUPS, BFCLEnv, GoldPolicy, load_tasks  # noqa: E402
from ttg_envs.envs.bfcl.policies import END_TURN  # noqa: E402

#: Entries whose possible answer no call can satisfy (bfcl-eval data issues), so the gold replay misses them:
#: a required parameter absent from the possible answer, an extra one, an "any"-typed list compared
#: with typed values, a dict answer that is not a list of options.
UNSATISFIABLE = {
    "simple_java_36",
    "simple_java_64",
    "simple_java_65",
    "live_multiple_507-149-4",
    "live_multiple_862-181-3",
    "live_multiple_964-207-0",
    "live_simple_106-63-0",
    "live_simple_112-68-0",
}


def play(env, policy):
    """Run one episode; the last info."""
    terminated = truncated = False
    while not (terminated or truncated):
        _, _, terminated, truncated, info = env.step(policy(env))
    return info


def sweep(group, policy, **kwargs):
    env = BFCLEnv(group, **kwargs)
    outcome = {}
    for i in range(env.num_tasks):
        env.reset(options={"task_index": i})
        outcome[env.task["id"]] = play(env, policy)["success"]
    return outcome


def test_groups_have_the_data_counts():
    counts = {group: len(load_tasks(group)) for group in GROUPS}
    # Paper appendix A: 1,150 / 1,351 / 800 / 1,122 (bfcl-eval 2026.3.23 ships 884 live_irrelevance, the paper 882).
    assert counts == {"non_live": 1150, "live": 1351, "multi_turn": 800, "hallucination": 1124}
    assert Counter(t.category for t in load_tasks("multi_turn")) == {c: 200 for c in GROUPS["multi_turn"]}


def test_task_order_is_numeric_and_stable():
    ids = [t.id for t in load_tasks("multi_turn_base")]
    assert ids[:3] == ["multi_turn_base_0", "multi_turn_base_1", "multi_turn_base_2"] and ids[10] == "multi_turn_base_10"
    assert [t.id for t in load_tasks(["multi_turn_base", "simple_python"])] == [
        t.id for t in load_tasks(["simple_python", "multi_turn_base"])
    ]


@pytest.mark.slow  # a long integration test (CI runs it; -m 'not slow' leaves it out)
def test_ground_truth_wins_every_multi_turn_entry_and_a_dropped_call_loses():
    gold = sweep("multi_turn", GoldPolicy())
    assert len(gold) == 800 and all(gold.values()), [k for k, v in gold.items() if not v]
    dropped = sweep("multi_turn", GoldPolicy(drop_last=True))
    assert not any(dropped.values()), [k for k, v in dropped.items() if v]


@pytest.mark.parametrize("group", ["non_live", "live", "hallucination"])
def test_ground_truth_wins_single_turn_entries(group):
    gold = sweep(group, GoldPolicy())
    assert {k for k, v in gold.items() if not v} == {k for k in gold if k in UNSATISFIABLE}
    if group != "hallucination":
        dropped = sweep(group, GoldPolicy(drop_last=True))
        assert not any(dropped.values())


#: Java answers that bfcl-eval's prompting decoder cannot read back however they are written: its Java
#: parser drops the body of ``new HashMap<>() {{ put(k, v); }}`` (required keys go missing) and keeps
#: the quotes of ``new String[]{"a", "b"}`` elements. simple_java_64, unsatisfiable as JSON, passes
#: there because its HashMap is read as empty.
PROMPTING_UNREADABLE = {"simple_java_1", "simple_java_67", "simple_java_68", "simple_java_35", "simple_java_85"}


def test_prompting_style_replays_the_ground_truth():
    # bfcl-eval's prompting decoder ([f(a=1)], keyword arguments only) on the same ground truth.
    for group in ("non_live", "live"):
        gold = sweep(group, GoldPolicy(), model_style="prompting")
        expected = {k for k in gold if k in (UNSATISFIABLE - {"simple_java_64"}) | PROMPTING_UNREADABLE}
        assert {k for k, v in gold.items() if not v} == expected
    env = BFCLEnv("multi_turn", model_style="prompting")
    for i in range(0, 800, 25):
        env.reset(options={"task_index": i})
        assert play(env, GoldPolicy())["success"], env.task["id"]
        env.reset(options={"task_index": i})
        assert not play(env, GoldPolicy(drop_last=True))["success"], env.task["id"]


@pytest.mark.parametrize("style", ["json", "python"])
def test_every_call_syntax_replays_the_ground_truth_in_lenient_scoring(style):
    env = BFCLEnv("multi_turn_miss_func", scoring="lenient")
    for i in range(0, 200, 20):
        env.reset(options={"task_index": i})
        assert play(env, GoldPolicy(style=style))["success"]


def test_miss_func_offers_held_out_functions_at_their_turn():
    env = BFCLEnv("multi_turn_miss_func")
    _, info = env.reset(options={"task_id": "multi_turn_miss_func_0"})
    names = {t["function"]["name"] for t in info["tools"]}
    assert "sort" not in names and '"name": "sort"' not in env.unwrapped.messages[0]["content"]
    policy = GoldPolicy()
    while env.unwrapped.turn < 3:
        obs, _, _, _, info = env.step(policy(env))
    assert "I have updated some more functions" in obs and '"name": "sort"' in obs
    assert "sort" in {t["function"]["name"] for t in info["tools"]}
    assert play(env, policy)["success"]


def test_turns_are_observations_and_calls_are_tool_messages():
    env = gym.make("ttg/BFCL-v0", categories="multi_turn_base", scoring="lenient")
    obs, info = env.reset(options={"task_index": 0})
    assert obs == env.unwrapped.task_entry.turns[0][0]["content"] and info["tools"]
    obs, reward, terminated, _, info = env.step(
        '<tool_call>{"name": "ls", "arguments": {}}</tool_call><tool_call>{"name": "rm", "arguments": {"x": 1}}</tool_call>'
    )
    messages = env.unwrapped.messages
    assert [m["role"] for m in messages[-3:]] == ["assistant", "tool", "tool"]
    assert [c["function"]["name"] for c in messages[-3]["tool_calls"]] == ["ls", "rm"]
    assert "Error: Invalid arguments for 'rm'" in messages[-1]["content"] and info["action_valid"] is False
    assert obs.count("<tool_response>") == 2 and not terminated
    obs, *_ = env.step(END_TURN)
    assert env.unwrapped.turn in (0, 1)


@pytest.mark.parametrize(
    ("kwargs", "shown"),
    [({}, "math.factorial"), ({"model_style": "prompting"}, "math.factorial"), ({"scoring": "lenient"}, "math_factorial")],
)
def test_tools_are_shown_under_the_names_they_are_scored_with(kwargs, shown):
    env = BFCLEnv("simple_python", **kwargs)
    _, info = env.reset(options={"task_id": "simple_python_1"})
    assert [t["function"]["name"] for t in info["tools"]] == [shown] and f'"name": "{shown}"' in env.unwrapped.messages[0]["content"]
    other = "math_factorial" if shown == "math.factorial" else "math.factorial"
    right, wrong = (
        f"[{n}(number=5)]"
        if kwargs.get("model_style") == "prompting"
        else f'<tool_call>\n{{"name": "{n}", "arguments": {{"number": 5}}}}\n</tool_call>'
        for n in (shown, other)
    )
    assert env.branch().step(right)[4]["success"]
    assert env.step(wrong)[4]["success"] is (kwargs.get("scoring") == "lenient")  # lenient accepts both spellings


def test_official_prompting_prompt_is_bfcl_evals_own():
    env = BFCLEnv("multi_turn_base", model_style="prompting")
    env.reset(options={"task_index": 0})
    system = env.unwrapped.messages[0]["content"]
    assert system.startswith("You are an expert in composing functions.") and "[func_name1(params_name1=params_value1" in system
    assert "<tool_call>" not in system


@pytest.mark.parametrize("scoring", ["official", "lenient"])
def test_irrelevance_scores_no_call(scoring):
    env = BFCLEnv("irrelevance", scoring=scoring)
    env.reset(options={"task_index": 0})
    tool = env.tools[0].name
    child = env.branch()
    assert child.step(f'<tool_call>\n{{"name": "{tool}", "arguments": {{}}}}\n</tool_call>')[4]["success"] is False
    assert env.step("None of these functions apply.")[4]["success"] is True


def test_backends_are_per_episode_and_the_harness_cache_is_untouched():
    utils = sys.modules.get("bfcl_eval.eval_checker.multi_turn_eval.multi_turn_utils")
    before = set(vars(utils)) if utils else set()
    a, b = BFCLEnv("multi_turn_base", scoring="lenient"), BFCLEnv("multi_turn_base", scoring="lenient")
    a.reset(options={"task_index": 0}), b.reset(options={"task_index": 0})
    key_b = b._state_key()
    a.step('[mkdir(dir_name="only_in_a")]')
    assert b._state_key() == key_b
    a.reset(options={"task_index": 0})
    assert a._state_key() == key_b
    utils = sys.modules.get("bfcl_eval.eval_checker.multi_turn_eval.multi_turn_utils")
    assert not ({k for k in vars(utils) if k.endswith("_instance")} - before) if utils else True


def test_private_backend_methods_are_not_callable():
    env = BFCLEnv("multi_turn_base", scoring="lenient")
    env.reset(options={"task_index": 0})
    backends = env._episode.model.state_digest()
    obs, *_, info = env.step("[_load_scenario(scenario={})]")
    assert "Unknown tool '_load_scenario'" in obs and info["action_valid"] is False
    assert env._episode.model.state_digest() == backends
    assert "_load_scenario" not in env._episode.model.owner
    # Official scoring executes what bfcl-eval's decoder reads, through the same public-method table.
    env = BFCLEnv("multi_turn_base", model_style="prompting")
    for text in [
        "[_load_scenario(scenario=1)]",
        '[ls(a=__import__("os").getcwd())]',
        '[ls(a=1+__import__("os").getpid())]',
        "[print(x=1)]",
        "[ls(a=9**9**9)]",
    ]:
        env.reset(options={"task_index": 0})
        obs, *_ = env.step(text)
        assert env._episode.model.state_digest() == backends, (text, obs)


def test_branch_equals_the_original_under_the_same_actions():
    env = BFCLEnv("multi_turn_base")
    env.reset(options={"task_index": 3})
    policy = GoldPolicy()
    for _ in range(3):
        env.step(policy(env))
    child = env.branch()
    assert child._state_key() == env._state_key() and child.messages == env.messages
    child.step('[mkdir(dir_name="branch_only")]')
    assert child._state_key() != env._state_key()
    twin = env.branch()
    for _ in range(4):
        action = policy(env)
        a, b = env.step(action), twin.step(action)
        assert a[0] == b[0] and a[4]["state_key"] == b[4]["state_key"]
        if a[2]:
            break


def test_check_env_passes_without_warnings():
    env = BFCLEnv("multi_turn_base")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        check_env(env, skip_render_check=True)
    assert [str(w.message) for w in caught] == []


@pytest.fixture(scope="module")
def mt_env():
    return BFCLEnv("multi_turn_long_context")


@settings(max_examples=1000, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    st.one_of(
        st.text(max_size=200),
        st.sampled_from(["<tool_call>", "[", "[ls(", "{", '{"name": 1}', "[cd(folder=None)]", "[echo(content='x'*9)]"]),
        st.builds(lambda s: f"<tool_call>{s}</tool_call>", st.text(max_size=80)),
        st.builds(
            lambda n, a: f'<tool_call>{{"name": "{n}", "arguments": {a}}}</tool_call>',
            st.sampled_from(["cd", "ls", "mv", "post_tweet", "cat", "tail", "exit", "_load_scenario"]),
            st.sampled_from(["{}", '{"folder": 1}', '{"a": true}', '{"source": null, "destination": []}', '"{"']),
        ),
        st.builds(lambda s: f"[cd({s})]", st.text(max_size=40)),
    )
)
def test_arbitrary_strings_raise_nothing(mt_env, text):
    env = mt_env
    if env.task is None or env.done:
        env.reset(options={"task_index": 7})
    obs, reward, terminated, truncated, info = env.step(text)
    assert isinstance(obs, str) and obs
    if not info["action_valid"]:
        assert info["error"]


def test_the_two_scorings_are_strategies_chosen_once_and_the_opening_is_a_hook():
    import inspect

    from ttg_envs.envs.bfcl import env as env_module
    from ttg_envs.envs.bfcl import policies
    from ttg_envs.envs.bfcl.scoring import LenientScoring, OfficialScoring

    source = inspect.getsource(env_module) + inspect.getsource(policies)
    assert ".official" not in source.replace("def official", "") and 'scoring == "official"' not in source
    assert "reset" not in vars(BFCLEnv)  # the first-turn conversation comes through TextEnv._opening_messages
    lenient, official = BFCLEnv("simple_python", scoring="lenient"), BFCLEnv("simple_python", model_style="prompting")
    assert isinstance(lenient.scoring_rule, LenientScoring) and not lenient.official
    assert isinstance(official.scoring_rule, OfficialScoring) and official.official and official.scoring_rule.prompting
    with pytest.raises(ValueError, match="scoring must be one of"):
        BFCLEnv("simple_python", scoring="strict")
