"""The task note and the requests-ahead reading of encoder meters (``EncoderConfig.requests_ahead``):
the counts by hand, the note kept out of the segments and out of the env's transcript, the head's
input, training, saving, and the wrapper and evaluation handing the note to the meter."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from ttg_envs.meters import EncoderMeter, ScriptedMeter, load_meter
from ttg_envs.meters.base import TASK_NOTE_ROLE, meter_history, split_task_note, with_task_note
from ttg_envs.meters.encoder import EncoderConfig, build_model, history_segments, requests_delivered
from ttg_envs.training.meter.datasets import Trajectory
from ttg_envs.training.meter.regression import RegressionConfig, train_encoder_meter
from ttg_envs.training.tiny_models import tiny_encoder, train_wordpiece_tokenizer

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def call(name: str) -> dict:
    return {
        "role": "assistant",
        "content": "",
        "tool_calls": [{"id": "c", "type": "function", "function": {"name": name, "arguments": "{}"}}],
    }


#: Three requests, as BFCL's multi-turn entries deliver them: a call, a closing message, the next request.
THREE_TURNS = [
    {"role": "system", "content": "rules"},
    {"role": "user", "content": "List the files."},
    call("ls"),
    {"role": "tool", "content": "a.txt b.txt"},
    {"role": "assistant", "content": "I have completed the request."},
    {"role": "user", "content": "Move a.txt into docs."},
    call("mv"),
    {"role": "tool", "content": "ok"},
    {"role": "assistant", "content": "I have completed the request."},
    {"role": "user", "content": "Count the lines of b.txt."},
    call("wc"),
    {"role": "tool", "content": "3"},
    {"role": "assistant", "content": "I have completed the request."},
    {"role": "user", "content": "All turns passed BFCL's check; the episode is over."},
]
TASK = {"id": "multi_turn_base_0", "type": "multi_turn_base", "split": "multi_turn", "turns": 3}


@pytest.fixture(scope="module")
def tokenizer():
    return train_wordpiece_tokenizer(history_segments(THREE_TURNS), vocab_size=120)


def make_meter(tokenizer, requests_ahead: bool = True, seed: int = 0, **config) -> EncoderMeter:
    config = EncoderConfig(max_segment_tokens=24, max_task_tokens=8, hidden=16, requests_ahead=requests_ahead, **config)
    torch.manual_seed(seed)
    backbone = tiny_encoder(tokenizer, hidden=16, layers=1, heads=2, max_tokens=config.pair_tokens)
    return EncoderMeter(build_model(backbone, 16, requests_aware=requests_ahead), tokenizer, config)


@pytest.fixture(scope="module")
def note_meter(tokenizer):
    return make_meter(tokenizer)


def test_requests_ahead_counted_by_hand(tokenizer):
    meter = make_meter(tokenizer)
    noted = with_task_note(THREE_TURNS, TASK)
    # segments: the task, ls, closing 1 (+ request 2), mv, closing 2 (+ request 3), wc, closing 3 (+ the end)
    assert requests_delivered(THREE_TURNS) == [1, 1, 2, 2, 3, 3, 4]
    assert meter.requests_ahead(noted) == [2, 2, 1, 1, 0, 0, 0]  # the closing message counts, never below 0
    assert meter.requests_ahead(THREE_TURNS) == [0] * 7  # no note: none ahead
    assert meter.requests_ahead(with_task_note(THREE_TURNS, {**TASK, "turns": 5})) == [4, 4, 3, 3, 2, 2, 1]
    # the note is not a segment, and the segments are those of the bare transcript
    assert meter.segments(noted) == meter.segments(THREE_TURNS)
    assert history_segments(noted) == history_segments(THREE_TURNS)


def test_the_note_only_where_a_task_names_its_requests():
    assert with_task_note(THREE_TURNS, TASK)[0] == {"role": TASK_NOTE_ROLE, "requests": 3}
    assert with_task_note(THREE_TURNS, {"id": "simple_python_0"}) == THREE_TURNS
    assert with_task_note(THREE_TURNS, None) == THREE_TURNS
    note, rest = split_task_note(with_task_note(THREE_TURNS, TASK))
    assert note == {"role": TASK_NOTE_ROLE, "requests": 3} and list(rest) == THREE_TURNS
    assert split_task_note(THREE_TURNS) == (None, THREE_TURNS)
    assert meter_history(ScriptedMeter(lambda h: (True, 1)), THREE_TURNS, TASK) is THREE_TURNS  # a meter that reads no note


@settings(max_examples=40, deadline=None)
@given(st.lists(st.sampled_from(["call", "close"]), min_size=1, max_size=12), st.integers(1, 6))
def test_requests_ahead_never_rises_and_prefixes_agree(note_meter, moves, turns):
    meter = note_meter
    history = [{"role": "user", "content": "List the files."}]
    ends = []
    for move in moves:
        ends.append(len(history))
        if move == "call":
            history += [call("ls"), {"role": "tool", "content": "ok"}]
        else:
            history += [{"role": "assistant", "content": "I have completed the request."}, {"role": "user", "content": "Next."}]
    ends.append(len(history))
    task = {"turns": turns}
    whole = meter.requests_ahead(with_task_note(history, task))
    assert whole[0] == turns - 1 and all(a >= b >= 0 for a, b in zip(whole, whole[1:]))
    for end in ends:  # each h_t reads the first counts of the whole episode's, as the meter is trained
        prefix = meter.requests_ahead(with_task_note(history[:end], task))
        assert prefix == whole[: len(prefix)]


def test_the_head_reads_the_count(tokenizer, tmp_path):
    meter = make_meter(tokenizer)
    assert meter.reads_task_note and not make_meter(tokenizer, requests_ahead=False).reads_task_note
    # an untrained head: the same transcript with more requests ahead gives another estimate
    outputs = [meter.last_outputs([with_task_note(THREE_TURNS[:4], {"turns": n})])[0].tolist() for n in (1, 3, 9)]
    assert outputs[0] != outputs[1] != outputs[2]
    # the head's input is the GRU state, the segment and the two count features
    assert meter.model.head[0].in_features == 2 * 16 + 2
    meter.save_pretrained(tmp_path / "m")
    loaded = load_meter(str(tmp_path / "m"))
    assert loaded.config.requests_ahead and loaded.reads_task_note
    noted = [with_task_note(THREE_TURNS[:end], TASK) for end in (2, 5, 9)]
    assert [e.raw for e in loaded.estimate(noted)] == [e.raw for e in meter.estimate(noted)]
    with pytest.raises(ValueError, match="requests ahead"):
        meter.predict([meter.segments(THREE_TURNS)])


def _trajectory(turns: int, messages: list, ttg: list[int]) -> Trajectory:
    actions = [i for i, m in enumerate(messages) if m["role"] == "assistant"]
    return Trajectory(
        id=f"t{turns}", messages=messages, actions=actions, success=True, ttg=ttg, policy="gold", task={**TASK, "turns": turns}
    )


@pytest.mark.parametrize("window", [None, 2])
def test_a_requests_aware_meter_learns_from_the_count(tokenizer, window):
    # Two tasks whose transcripts read the same until their first turn ends, one with 3 requests
    # and one with 1: only the count tells their remaining work apart before the next request arrives.
    long = _trajectory(3, THREE_TURNS, [600, 400, 390, 200, 190, 10, 0])
    short = _trajectory(1, [*THREE_TURNS[:5], THREE_TURNS[-1]], [10, 5, 0])
    trajectories = [long, short] * 4
    meters = {}
    for aware in (True, False):
        meter = make_meter(tokenizer, requests_ahead=aware, window=window)
        train_encoder_meter(meter, trajectories, RegressionConfig(epochs=200, lr=1e-2, batch_size=8, seed=0), progress=False)
        meters[aware] = meter
    h = THREE_TURNS[:4]  # after the first call: 390 tokens left in the long task, 5 in the short one
    aware, blind = meters[True], meters[False]
    a = [aware.estimate([meter_history(aware, h, t.task)])[0].remaining_tokens for t in (long, short)]
    b = [blind.estimate([meter_history(blind, h, t.task)])[0].remaining_tokens for t in (long, short)]
    assert a[0] > 10 * a[1]  # told apart by the count alone
    assert b[0] == b[1]  # the blind meter reads one transcript: one estimate


def test_the_wrapper_and_evaluation_hand_the_meter_the_note():
    import gymnasium as gym

    import ttg_envs  # noqa: F401  (registers the envs)
    from ttg_envs.training.meter.evaluation import evaluate_meter
    from ttg_envs.wrappers import ProgressMeterWrapper

    pytest.importorskip("bfcl_eval")
    seen: list = []

    def spy(history):
        seen.append(history)
        return True, 10

    meter = ScriptedMeter(spy)
    meter.reads_task_note = True
    env = ProgressMeterWrapper(gym.make("ttg/BFCL-v0", split="multi_turn"), meter)
    _, info = env.reset(seed=0)
    turns = info["task"]["turns"]
    assert turns > 1
    assert seen[-1][0] == {"role": TASK_NOTE_ROLE, "requests": turns}
    assert all(m["role"] != TASK_NOTE_ROLE for m in env.unwrapped.messages)  # the agent's transcript holds no note
    seen.clear()
    env.try_actions(["I have completed the request.", "Nothing to do."])  # candidates scored in branches
    assert len(seen) == 2 and all(h[0] == {"role": TASK_NOTE_ROLE, "requests": turns} for h in seen)
    env.step("I have completed the request.")
    assert seen[-1][0]["requests"] == turns and seen[-1][1:] == env.unwrapped.messages
    seen.clear()
    evaluate_meter(meter, [_trajectory(3, THREE_TURNS, [600, 400, 390, 200, 190, 10, 0])], failure_cost=100.0, progress=False)
    assert seen and all(h[0] == {"role": TASK_NOTE_ROLE, "requests": 3} for h in seen)
