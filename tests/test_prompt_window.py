"""The actor prompt window: last k turns, a token budget cut from the left, head and current observation kept."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ttg_envs.agents.window import PAPER_E5, PromptWindow, as_window, split_turns


def transcript(turns: int) -> list[dict]:
    msgs = [{"role": "system", "content": "sys"}, {"role": "user", "content": "task"}]
    for t in range(1, turns + 1):
        msgs += [{"role": "assistant", "content": f"a{t}"}, {"role": "user", "content": f"o{t}"}]
    return msgs


def contents(messages) -> list[str]:
    return [m["content"] for m in messages]


def test_last_two_turns_worked_by_hand():
    kept = PromptWindow(turns=2).select(transcript(4))
    assert contents(kept) == ["sys", "task", "a3", "o3", "a4", "o4"]
    assert contents(PromptWindow(turns=0).select(transcript(4))) == ["sys", "task", "o4"]
    assert contents(PromptWindow().select(transcript(2))) == contents(transcript(2))
    assert contents(PromptWindow(turns=2).select(transcript(0))) == ["sys", "task"]


def test_budget_drops_oldest_turns_first():
    count = len  # one "token" per message
    window = PromptWindow(max_prompt_tokens=5)
    assert contents(window.select(transcript(4), count)) == ["sys", "task", "a4", "o4"]
    window = PromptWindow(max_prompt_tokens=6)
    assert contents(window.select(transcript(4), count)) == ["sys", "task", "a3", "o3", "a4", "o4"]
    # Nothing left to drop: head and current observation are sent whole.
    assert contents(PromptWindow(max_prompt_tokens=1).select(transcript(3), count)) == ["sys", "task", "o3"]
    with pytest.raises(ValueError, match="token counter"):
        window.select(transcript(1))


def test_tool_observations_stay_with_their_turn():
    msgs = transcript(1) + [{"role": "assistant", "content": "a2"}, {"role": "tool", "content": "t2"}, {"role": "user", "content": "o2"}]
    head, turns, current = split_turns(msgs)
    assert contents(head) == ["sys", "task"]
    assert [contents(t) for t in turns] == [["a1", "o1"], ["a2"]]
    assert contents(current) == ["t2", "o2"]


def test_named_windows():
    assert as_window("paper") == PAPER_E5 == PromptWindow(2, 2048)
    assert as_window(None).is_full and as_window("full").is_full
    assert as_window(3) == as_window("3") == PromptWindow(turns=3)
    with pytest.raises(ValueError, match="unknown prompt window"):
        as_window("last-two")
    with pytest.raises(ValueError):
        PromptWindow(turns=-1)


@given(turns=st.integers(0, 12), history=st.one_of(st.none(), st.integers(0, 14)), budget=st.one_of(st.none(), st.integers(1, 30)))
def test_window_is_head_plus_a_suffix_of_turns_plus_current(turns, history, budget):
    msgs = transcript(turns)
    kept = PromptWindow(history, budget).select(msgs, len)
    head, all_turns, current = split_turns(msgs)
    assert kept[: len(head)] == head and (not current or kept[-len(current) :] == current)
    middle = kept[len(head) : len(kept) - len(current)]
    flat = [m for t in all_turns for m in t]
    assert middle == flat[len(flat) - len(middle) :]  # a suffix: the newest turns survive
    kept_turns = sum(1 for m in middle if m["role"] == "assistant")
    if history is not None:
        assert kept_turns <= history
    if budget is not None and kept_turns:
        assert len(kept) <= budget  # turns are only kept while the prompt fits


def test_chat_actor_prompts_with_the_window(tiny_env):
    from ttg_envs.agents.base import ChatActor
    from ttg_envs.core import Generation

    class Echo(ChatActor):
        def generate(self, histories, n=1):
            self.seen = [list(h) for h in histories]
            return [[Generation("<action>look</action>")] * n for _ in histories]

    actor = Echo(window=1)
    tiny_env.reset(seed=0)
    for _ in range(3):
        tiny_env.step(actor.sample([tiny_env])[0][0])
    actor.sample([tiny_env])
    roles = [m["role"] for m in actor.seen[0]]
    assert roles == ["system", "user", "assistant", "user"]
    assert actor.seen[0][-1] == tiny_env.unwrapped.messages[-1]
    assert actor.count_prompt_tokens(actor.seen[0]) > 0
