"""Actor warm start: demonstrations from the real ALFWorld engine, SFT, and admissible-only sampling."""

from __future__ import annotations

import contextlib

import gymnasium as gym
import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("alfworld")

import ttg_envs  # noqa: F401
from ttg_envs.agents.window import PAPER_E5
from ttg_envs.envs.alfworld.policies import make_policy
from ttg_envs.training.actor.admissible import AdmissibleGenerator, admissible_from_text
from ttg_envs.training.actor.rollout import run_episodes
from ttg_envs.training.actor.sft import command_only, demonstration_rows, record_demonstrations, sft_train
from ttg_envs.training.tiny_models import tiny_causal_lm, train_bpe_tokenizer

TASK = 0  # a look_at_obj_in_light task with a 4-step plan


@pytest.fixture(scope="module")
def recorded():
    env = gym.make("ttg/ALFWorld-v0", split="train", max_steps=12, action_format="lenient")
    demos, stats = record_demonstrations(env, lambda seed: command_only(make_policy("expert")), [TASK])
    texts = [m["content"] for d in demos for m in d.messages] + [d.action for d in demos]
    return env, demos, stats, train_bpe_tokenizer(texts, vocab_size=600)


def test_expert_demonstrations_are_bare_commands_the_env_accepts(recorded):
    env, demos, stats, _ = recorded
    assert stats.episodes == 1 and stats.successes == 1 and stats.planner_timeouts == 0
    assert len(demos) == stats.steps >= 2 and all(d.success for d in demos)
    for d in demos:
        assert "<" not in d.action  # no ReAct tags
        assert d.action in admissible_from_text(d.messages[-1]["content"])
    # Each demonstration's transcript ends with the observation the action answered.
    assert demos[1].messages[-2] == {"role": "assistant", "content": demos[0].action}


def test_teacher_labels_the_states_a_noisy_policy_reaches():
    """DAgger data: the episode follows the random policy, every label is the expert's answer there."""
    env = gym.make("ttg/ALFWorld-v0", split="train", max_steps=6, action_format="lenient")
    expert = command_only(make_policy("expert"))
    behaviour = lambda seed: command_only(make_policy("noisy_expert", seed=seed, eps=1.0))  # noqa: E731
    demos, stats = record_demonstrations(env, behaviour, [TASK], teacher=expert)
    plain, _ = record_demonstrations(env, behaviour, [TASK])
    assert stats.episodes == 1 and stats.successes == 0 and len(demos) == len(plain) == 6
    # Same states as the untaught recording (the teacher does not act) ...
    assert [d.messages for d in demos] == [d.messages for d in plain]
    # ... but each label is the expert's first planned command from that state, not the random one.
    for demo, random_step in zip(demos, plain):
        env.reset(seed=0, options={"task_index": TASK})
        replay = [m["content"] for m in demo.messages if m["role"] == "assistant"]
        for command in replay:
            env.step(command)
        assert demo.action == expert(env)
    assert [d.action for d in demos] != [d.action for d in plain]


def test_rows_prompt_like_the_trainer_and_end_with_end_of_turn(recorded):
    _, demos, _, tokenizer = recorded
    rows = demonstration_rows(tokenizer, demos, PAPER_E5)
    assert len(rows) == len(demos)
    for (prompt, action), demo in zip(rows, demos):
        assert action[-1] == tokenizer.eos_token_id
        assert tokenizer.decode(action[:-1]) == demo.action
        assert tokenizer.decode(prompt).endswith("<|im_start|>assistant\n")


def test_admissible_generator_samples_only_listed_commands(recorded):
    env, _, _, tokenizer = recorded
    model = tiny_causal_lm(tokenizer, hidden=32, layers=1, heads=1, seed=0)
    torch.manual_seed(0)
    episodes = run_episodes([env], AdmissibleGenerator(model, tokenizer), tokenizer, [(0, TASK, 0)], 24, 1.0, 1.0)
    episode = episodes[0]
    assert episode.num_steps == 12  # an untrained policy does not solve it, but every action is valid
    assert all(info["action_valid"] for info in episode.infos[1:])


def test_shared_heads_sample_as_the_full_prefill_does(recorded):
    """Each task's head (system prompt and statement) runs once per rollout batch and its keys and
    values seed every row's cache, and a batch longer than ``prefill_rows`` prefills in buckets:
    the same seeded actions, and log-probs within 1e-5 of the pass
    that prefills every prompt whole (float32 rounding)."""
    _, _, _, tokenizer = recorded
    model = tiny_causal_lm(tokenizer, hidden=32, layers=1, heads=2, seed=0)
    envs = [gym.make("ttg/ALFWorld-v0", split="train", max_steps=5, action_format="lenient") for _ in range(4)]
    specs = [(0, TASK, 0), (0, TASK, 1), (1, 1, 2), (1, 1, 3)]
    shared, whole = AdmissibleGenerator(model, tokenizer), AdmissibleGenerator(model, tokenizer)
    whole.shares_heads = False
    shared.prefill_rows = 3  # the 4 prompts prefill in two length-sorted buckets, joined to decode
    calls = []
    head_kv = shared._head_kv

    def counted(prompts, heads, cache, device):  # the heads a call was given, and how many it found cached
        calls.append((list(heads), len(cache)))
        return head_kv(prompts, heads, cache, device)

    shared._head_kv = counted
    prefilled = []  # rows per prefill call: equal prompts (the first turn's, per task) run once
    prefill = shared._prefill
    shared._prefill = lambda prompts, *a: prefilled.append(len(prompts)) or prefill(prompts, *a)
    runs = []
    for generator in (shared, whole):
        torch.manual_seed(0)
        runs.append(run_episodes(envs, generator, tokenizer, specs, 24, 1.0, 1.0, PAPER_E5))
    # Every turn's prompts carry their head, and only the first turn runs the two tasks' heads.
    assert calls and all(all(h >= 16 for h in heads) for heads, _ in calls)
    assert [n for _, n in calls[1:]] == [2] * (len(calls) - 1)
    assert prefilled[0] == 2 and sum(prefilled) < 4 * len(runs[0][0].actions)
    for a, b in zip(*runs):
        assert a.actions == b.actions and a.prompts == b.prompts
        assert max(abs(x - y) for la, lb in zip(a.logprobs, b.logprobs) for x, y in zip(la, lb)) < 1e-5


def test_sft_on_the_expert_makes_the_greedy_policy_solve_the_task(recorded):
    env, demos, _, tokenizer = recorded
    rows = demonstration_rows(tokenizer, demos, PAPER_E5)
    model = tiny_causal_lm(tokenizer, hidden=64, layers=1, heads=2, seed=0)
    generator = AdmissibleGenerator(model, tokenizer)
    before = run_episodes([env], generator, tokenizer, [(0, TASK, 0)], 24, 0.0, 1.0, PAPER_E5)[0]
    losses = sft_train(model, rows, epochs=40, lr=1e-2, batch_rows=4, pad_id=tokenizer.pad_token_id)
    assert losses[-1] < 0.2 * losses[0]
    after = run_episodes([env], generator, tokenizer, [(0, TASK, 0)], 24, 0.0, 1.0, PAPER_E5)[0]
    assert not before.success and after.success
    assert [tokenizer.decode(a[:-1]) for a in after.actions] == [d.action for d in demos]


def test_admissible_from_text_reads_the_last_list():
    text = "x\n\nAdmissible actions: go to desk 1, look\nlater\n\nAdmissible actions: take pen 1 from desk 1, help"
    assert admissible_from_text(text) == ["take pen 1 from desk 1", "help"]
    assert admissible_from_text("no list") == []
    assert np.array_equal(np.array(admissible_from_text("Admissible actions: a")), np.array(["a"]))


def test_segment_ids_equal_the_tokenizers_ids_of_the_whole_text(recorded):
    from ttg_envs.training.actor.segment_ids import SegmentIds

    _, _, _, tokenizer = recorded
    env = gym.make("ttg/ALFWorld-v0", split="train", max_steps=5, action_format="lenient")
    env.reset(seed=0, options={"task_index": TASK})
    env.step("look")
    text = tokenizer.apply_chat_template(list(env.unwrapped.messages), tokenize=False, add_generation_prompt=True)
    segments = SegmentIds(tokenizer)
    assert segments._split is not None  # the split applies to this tokenizer
    for sample in (text, text + text, "<|im_end|><|im_start|>", "no added token", text[5:-7], ""):
        assert segments(sample) == list(tokenizer(sample, add_special_tokens=False)["input_ids"])
    assert segments(text) == list(tokenizer(text, add_special_tokens=False)["input_ids"])  # remembered pieces


def test_a_prefill_with_the_last_layer_at_the_last_position_keeps_the_cache_and_logits(recorded):
    from ttg_envs.training.actor.last_layer import last_layer_at
    from ttg_envs.training.actor.rollout import additive_mask

    _, _, _, tokenizer = recorded
    model = tiny_causal_lm(tokenizer, hidden=32, layers=2, heads=2, seed=0).eval()
    ids = torch.randint(3, 200, (3, 40))
    attention = torch.ones_like(ids)
    attention[1, :7] = 0  # a left-padded row
    positions = (attention.cumsum(-1) - 1).clamp(min=0)
    outs = []
    for trim in (False, True):
        with torch.inference_mode(), last_layer_at(model) if trim else contextlib.nullcontext(True) as applies:
            assert applies
            outs.append(
                model(input_ids=ids, attention_mask=additive_mask(attention, 40), position_ids=positions, use_cache=True, logits_to_keep=1)
            )
    (full, trimmed) = outs
    assert torch.allclose(full.logits, trimmed.logits, atol=1e-5)
    for a, b in zip(full.past_key_values.layers, trimmed.past_key_values.layers):
        assert torch.allclose(a.keys, b.keys, atol=1e-5) and torch.allclose(a.values, b.values, atol=1e-5)
    assert "forward" not in vars(model.model.layers[-1])  # the layer is itself again
