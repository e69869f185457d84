"""The one-node actor trainer on a tiny Qwen3 model and a toy env (CPU, a few seconds per step)."""

from __future__ import annotations

import json

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from parity import register_parity  # noqa: E402

from ttg_envs import credit
from ttg_envs.meters import ScriptedMeter
from ttg_envs.training.actor.advantages import episode_advantages
from ttg_envs.training.actor.loss import clipped_surrogate
from ttg_envs.training.actor.rollout import Episode
from ttg_envs.training.actor.trainer import Row, TrainConfig, Trainer, latest_checkpoint
from ttg_envs.training.tiny_models import tiny_causal_lm, train_bpe_tokenizer

ENV_ID = "ttg-test/Parity-v0"


register_parity(ENV_ID)


def _meter():
    # Fewer remaining tokens the longer the last answer: Delta varies from step to step.
    def fn(history):
        last = history[-2]["content"] if len(history) > 2 else ""
        return True, max(10, 200 - 10 * len(last) - 20 * len(history))

    return ScriptedMeter(fn)


@pytest.fixture(scope="module")
def tokenizer():
    texts = ["Task 0: say anything. again the quick brown fox jumps over the lazy dog"] * 20
    return train_bpe_tokenizer(texts, vocab_size=300)


def _model(tokenizer):
    return tiny_causal_lm(tokenizer, hidden=32, layers=1, heads=2, seed=0)


def _config(tmp_path, **kw):
    base = {
        "env_id": ENV_ID,
        "steps": 2,
        "tasks_per_step": 2,
        "group_size": 4,
        "max_turns": 3,
        "max_tokens_per_turn": 6,
        "lr": 1e-3,
        "kl_coef": 0.01,
        "entropy_coef": 0.001,
        "mini_batch_rows": 8,
        "micro_batch_rows": 4,
        "save_every": 1,
        "out_dir": str(tmp_path),
        "failure_cost": 500.0,
    }
    return TrainConfig(**{**base, **kw})


def assert_same_update(a_trainer, b_trainer, rows) -> None:
    """One update of ``rows`` by each trainer (same rng) gives the same loss terms and weights."""
    a, b = a_trainer.update(rows, np.random.default_rng(1)), b_trainer.update(rows, np.random.default_rng(1))
    for name in ("loss", "pg_loss", "kl", "entropy", "grad_norm"):
        assert a[name] == pytest.approx(b[name], rel=1e-4, abs=1e-7), name
    # Adam moves a weight by about lr * g / (|g| + eps) whatever the gradient's size, so where g is
    # near eps (1e-8) a summation-order difference of 1% in g moves the weight 1e-6 apart: weights
    # are compared to 1% of one step (a wrong or missing row moves many of them by about lr).
    atol = 1e-2 * a_trainer.config.lr
    for p, q in zip(a_trainer.model.parameters(), b_trainer.model.parameters()):
        assert torch.allclose(p, q, atol=atol)


def test_config_takes_table_4():
    cfg = TrainConfig(env_id="ttg/PaperSearchQA-v0").resolved()
    assert (cfg.tasks_per_step, cfg.group_size, cfg.max_turns, cfg.max_tokens_per_turn) == (512, 5, 6, 1024)
    assert (cfg.kl_coef, cfg.entropy_coef, cfg.failure_cost, cfg.lr) == (0.001, 0.0, 6144, 1e-6)
    cfg = TrainConfig().resolved()
    assert (cfg.tasks_per_step, cfg.group_size, cfg.max_turns, cfg.kl_coef, cfg.entropy_coef) == (16, 8, 50, 0.01, 0.001)
    with pytest.raises(ValueError):
        TrainConfig(estimator="ppo").resolved()


def test_delta_ttg_advantages_match_credit_per_trajectory(tmp_path, tokenizer):
    trainer = Trainer(_config(tmp_path), _model(tokenizer), tokenizer, meter=_meter())
    episodes = trainer.rollout(np.random.default_rng(3))
    batched = episode_advantages(episodes, "delta_ttg").double().numpy()  # C = 500 through the env stack
    # The same numbers from the info fields, one trajectory at a time (what a user script does).
    for group in {e.group for e in episodes}:
        members = [i for i, e in enumerate(episodes) if e.group == group]
        adv = credit.group_advantages([episodes[i].reward for i in members], [episodes[i].num_steps for i in members])
        for a, i in zip(adv, members):
            e = episodes[i]
            w = credit.step_weights(
                a,
                e.state_field("ttg_can_complete"),
                [np.nan if v is None else v for v in e.state_field("ttg")],
                e.success,
                [info["assistant_tokens"] for info in e.infos[1:]],
                500.0,
            )
            assert batched[i, : e.num_steps] == pytest.approx(a * w, rel=1e-5, abs=1e-6)
    assert len({e.success for e in episodes}) == 2, "the toy env should give mixed outcomes"


def test_update_moves_policy_along_the_advantage(tmp_path, tokenizer):
    trainer = Trainer(_config(tmp_path, kl_coef=0.0, entropy_coef=0.0), _model(tokenizer), tokenizer, meter=_meter())
    prompt = tokenizer("Task 0: say anything.")["input_ids"]
    rows = [Row(prompt, tokenizer(" fox")["input_ids"], 1.0), Row(prompt, tokenizer(" dog")["input_ids"], -1.0)]
    before = trainer.row_logprobs(rows, trainer.model)
    trainer.update(rows)
    after = trainer.row_logprobs(rows, trainer.model)
    assert sum(after[0]) > sum(before[0]) and sum(after[1]) < sum(before[1])
    # The clipped loss of the updated policy against the rollout policy fell below its start (0).
    adv = torch.tensor([[1.0, 1.0], [-1.0, -1.0]])[:, : len(before[0])]
    loss, _, _ = clipped_surrogate(torch.tensor(after), torch.tensor(before), adv, torch.ones_like(adv))
    assert float(loss) < 0.0


def test_action_logprobs_match_full_logits(tmp_path, tokenizer):
    trainer = Trainer(_config(tmp_path), _model(tokenizer), tokenizer, meter=_meter())
    rows = [Row([5, 6, 7], [8, 9], 1.0), Row([5, 6, 7, 10, 11], [12], -1.0)]
    got = trainer.row_logprobs(rows, trainer.model)
    for row, values in zip(rows, got):
        ids = torch.tensor([row.prompt + row.action])
        with torch.no_grad():
            logp = torch.log_softmax(trainer.model(input_ids=ids).logits[0].float(), -1)
        expected = [logp[len(row.prompt) - 1 + k, tok].item() for k, tok in enumerate(row.action)]
        assert values == pytest.approx(expected, abs=1e-5)


def test_train_writes_metrics_checkpoints_and_resumes_exactly(tmp_path, tokenizer):
    cfg = _config(tmp_path / "a")
    full = Trainer(cfg, _model(tokenizer), tokenizer, meter=_meter())
    history = full.train(progress=False)
    lines = [json.loads(line) for line in (tmp_path / "a" / "metrics.jsonl").read_text().splitlines()]
    assert [m["step"] for m in lines] == [1, 2]
    assert {"reward_mean", "loss", "pg_loss", "kl", "entropy", "clip_frac", "response_tokens"} <= set(lines[0])
    assert latest_checkpoint(tmp_path / "a").name == "checkpoint-2"
    assert history[0]["advantage_abs_mean"] > 0

    resumed = Trainer(_config(tmp_path / "b"), _model(tokenizer), tokenizer, meter=_meter(), ref_model=_model(tokenizer))
    resumed.resume(tmp_path / "a" / "checkpoint-1")
    again = resumed.step()
    for key in ("reward_mean", "response_tokens", "loss", "kl", "advantage_abs_mean"):
        assert again[key] == pytest.approx(history[1][key], rel=1e-5, abs=1e-7), key
    for p, q in zip(full.model.parameters(), resumed.model.parameters()):
        torch.testing.assert_close(p, q)


def test_seeded_runs_are_reproducible_and_baselines_run(tmp_path, tokenizer):
    runs = []
    for name in ("x", "y"):
        trainer = Trainer(_config(tmp_path / name, estimator="gigpo", steps=1, kl_coef=0.0), _model(tokenizer), tokenizer)
        runs.append(trainer.train(progress=False)[0])
    for key in ("reward_mean", "loss", "response_tokens"):
        assert runs[0][key] == runs[1][key]
    with pytest.raises(ValueError, match="meter"):
        Trainer(_config(tmp_path), _model(tokenizer), tokenizer)


def test_dapo_step_trains_and_resumes_exactly(tmp_path, tokenizer):
    cfg = _config(tmp_path / "a", estimator="dapo", group_size=2)
    full = Trainer(cfg, _model(tokenizer), tokenizer)
    history = full.train(progress=False)
    for m in history:
        assert 1 <= m["dapo_batches"] <= 10 and 0 <= m["dapo_kept_groups"] <= 2
    # Pairs of rollouts in the toy env often both succeed, so some step needs extra batches.
    assert max(m["dapo_batches"] for m in history) > 1
    lines = [json.loads(line) for line in (tmp_path / "a" / "metrics.jsonl").read_text().splitlines()]
    assert [m["dapo_batches"] for m in lines] == [m["dapo_batches"] for m in history]

    # The extra batches draw from the step's own rng: a resumed run repeats step 2 exactly.
    resumed = Trainer(_config(tmp_path / "b", estimator="dapo", group_size=2), _model(tokenizer), tokenizer, ref_model=_model(tokenizer))
    resumed.resume(tmp_path / "a" / "checkpoint-1")
    again = resumed.step()
    for key in ("dapo_batches", "dapo_kept_groups", "reward_mean", "response_tokens", "loss", "advantage_abs_mean"):
        assert again[key] == pytest.approx(history[1][key], rel=1e-5, abs=1e-7), key
    for p, q in zip(full.model.parameters(), resumed.model.parameters()):
        torch.testing.assert_close(p, q)


def _fake_rollouts(monkeypatch, tokenizer, batches):
    """Make ``Trainer.rollout`` return one batch of one-turn episodes per call, rewards from ``batches``."""
    prompt = tokenizer("Task 0: say anything.")["input_ids"]
    calls = []

    def rollout(self, rng):
        rewards = batches[len(calls)]
        calls.append(int(rng.integers(2**31)))
        size = self.config.group_size
        return [
            Episode(
                group=i // size,
                task_index=i // size,
                prompts=[prompt],
                actions=[tokenizer(" fox" * (1 + len(calls)))["input_ids"]],
                infos=[{}, {}],
                reward=r,
            )
            for i, r in enumerate(rewards)
        ]

    monkeypatch.setattr(Trainer, "rollout", rollout)
    return calls


def test_dapo_draws_batches_until_groups_vary(tmp_path, tokenizer, monkeypatch):
    calls = _fake_rollouts(monkeypatch, tokenizer, [[1, 1, 0, 0], [1, 0, 0, 1], [0, 1, 1, 1]])
    trainer = Trainer(_config(tmp_path, estimator="dapo", group_size=2, kl_coef=0.0), _model(tokenizer), tokenizer)
    metrics = trainer.step()
    # Batch 1's groups agree (std 0) and are dropped; batch 2 gives the two groups; no batch 3.
    assert len(calls) == 2 and (metrics["dapo_batches"], metrics["dapo_kept_groups"]) == (2, 2)
    assert metrics["response_tokens"] == 4 * len(tokenizer(" fox fox fox")["input_ids"])  # batch 2's actions
    assert metrics["reward_mean"] == 0.5 and metrics["advantage_abs_mean"] > 0  # over all 8 episodes

    # Batches keep running short: groups of different batches stay apart, the step trains on them.
    calls = _fake_rollouts(monkeypatch, tokenizer, [[1, 0, 1, 1], [0, 0, 0, 1], [1, 1, 0, 0]])
    trainer = Trainer(
        _config(tmp_path / "short", estimator="dapo", group_size=2, kl_coef=0.0, dapo_max_batches=3), _model(tokenizer), tokenizer
    )
    kept = trainer.dapo_rollout(np.random.default_rng(0))[1]
    assert [e.group for e in kept] == [0, 0, 3, 3]
    calls.clear()
    metrics = trainer.step()
    assert (metrics["dapo_batches"], metrics["dapo_kept_groups"]) == (2, 2) and metrics["grad_norm"] > 0


def test_dapo_without_varied_groups_skips_the_update(tmp_path, tokenizer, monkeypatch, caplog):
    _fake_rollouts(monkeypatch, tokenizer, [[1, 1, 0, 0]] * 3)
    trainer = Trainer(_config(tmp_path, estimator="dapo", group_size=2, dapo_max_batches=3), _model(tokenizer), tokenizer)
    before = [p.detach().clone() for p in trainer.model.parameters()]
    metrics = trainer.step()
    assert (metrics["dapo_batches"], metrics["dapo_kept_groups"], metrics["loss"]) == (3, 0, 0.0)
    assert metrics["step"] == 1 and "no update" in caplog.text
    for p, q in zip(before, trainer.model.parameters()):
        torch.testing.assert_close(p, q)


def test_ttg_train_command_runs_and_resumes(tmp_path, capsys):
    from ttg_envs.cli import main

    args = [
        "train",
        "--env",
        ENV_ID,
        "--model",
        "tiny",
        "--meter",
        "turns",
        "--tasks-per-step",
        "1",
        "--group-size",
        "2",
        "--max-turns",
        "2",
        "--max-tokens-per-turn",
        "4",
        "--out",
        str(tmp_path),
    ]
    before = torch.get_num_threads()
    try:
        # A tiny CPU policy trains on 1 torch thread by default; --torch-threads 0 leaves torch's count.
        torch.set_num_threads(2)
        assert main([*args, "--steps", "1"]) == 0
        assert torch.get_num_threads() == 1
        torch.set_num_threads(2)
        assert main([*args, "--steps", "2", "--torch-threads", "0"]) == 0
        assert torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(before)
    assert "resumed from" in capsys.readouterr().out
    steps = [json.loads(line)["step"] for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert steps == [1, 2]


def test_tiny_policy_has_a_head_dim_vllm_cpu_attention_supports():
    from ttg_envs.training.actor.launch import _tiny_policy

    model, _ = _tiny_policy(ENV_ID, {})
    assert model.config.head_dim in (32, 64)  # vLLM's CPU attention rejects 16


def test_prompt_window_keeps_rollout_prompts_to_the_last_turn(tmp_path, tokenizer):
    trainer = Trainer(_config(tmp_path, estimator="grpo", window_turns=0, kl_coef=0.0), _model(tokenizer), tokenizer)
    episodes = trainer.rollout(np.random.default_rng(0))
    full = Trainer(_config(tmp_path / "f", estimator="grpo", kl_coef=0.0), _model(tokenizer), tokenizer)
    full_episodes = full.rollout(np.random.default_rng(0))
    late = [len(p) for e in episodes for p in e.prompts[1:]]
    late_full = [len(p) for e in full_episodes for p in e.prompts[1:]]
    assert late and max(late) < max(late_full)
    # window_turns=0: every later prompt is the head plus the current observation, so all have one length per task
    # (the tiny env's observation is always "again").
    for e in episodes:
        assert len({len(p) for p in e.prompts[1:]}) <= 1


def test_a_step_with_no_reward_variance_warns_that_nothing_can_be_learned(tmp_path, tokenizer, monkeypatch, caplog):
    from ttg_envs.training.actor.advantages import no_signal_warning

    _fake_rollouts(monkeypatch, tokenizer, [[0, 0, 0, 0]])
    metrics = Trainer(_config(tmp_path, estimator="grpo", group_size=2), _model(tokenizer), tokenizer).step()
    assert metrics["varied_groups"] == 0 and "nothing to learn from" in caplog.text
    assert no_signal_warning([1, 0, 0, 0], [0, 0, 1, 1]) is None  # one group varies: silent
    assert "all 0" in no_signal_warning([1, 1], [0, 0], [0.3, 0.1]) and "nothing" not in no_signal_warning([1, 1], [0, 0], [0.3])


def _shared_prefix_rows(tokenizer, n=12):
    """Rows of two 'tasks' whose prompts share a long head, with varied tails and actions."""
    rng = np.random.default_rng(0)
    heads = [list(rng.integers(3, 250, 40)), list(rng.integers(3, 250, 30))]
    rows = []
    for i in range(n):
        tail = list(rng.integers(3, 250, int(rng.integers(1, 12))))
        action = list(rng.integers(3, 250, int(rng.integers(1, 5))))
        rows.append(Row(heads[i % 2] + tail, action, float(rng.normal())))
    return rows


def test_shared_prefix_passes_equal_one_forward_per_row(tmp_path, tokenizer):
    # Same loss, gradients and log-probs with the prompt heads run once per micro-batch as with
    # one full forward pass per row (the plain computation), to float rounding.
    rows = _shared_prefix_rows(tokenizer)
    fast = Trainer(_config(tmp_path / "a", micro_batch_rows=6, mini_batch_rows=12), _model(tokenizer), tokenizer, meter=_meter())
    plain = Trainer(_config(tmp_path / "b", micro_batch_rows=6, mini_batch_rows=12), _model(tokenizer), tokenizer, meter=_meter())
    fast.share_prefix, plain.share_prefix = True, False
    assert all(len(m) <= 6 for m in fast._micro_batches(rows, range(len(rows))))
    # Micro-batches hold one task's rows: the cut falls between the two heads.
    assert all(len({tuple(rows[i].prompt[:30]) for i in m}) == 1 for m in fast._micro_batches(rows, range(len(rows))))
    got, expected = fast.row_logprobs(rows, fast.model), plain.row_logprobs(rows, plain.model)
    for a, b in zip(got, expected):
        assert a == pytest.approx(b, abs=1e-5)
    assert_same_update(fast, plain, rows)


def test_kept_sampler_logprobs_equal_recomputed_and_give_the_same_update(tmp_path, tokenizer):
    """Tolerance: 1e-5 absolute per token (float32; the kept ones come from the sampler's KV-cached,
    left-padded decoding, the recomputed ones from one right-padded pass)."""
    trainer = Trainer(_config(tmp_path / "a"), _model(tokenizer), tokenizer, meter=_meter())
    episodes = trainer.rollout(np.random.default_rng(3))
    assert all(e.logprobs is not None and [len(x) for x in e.logprobs] == [len(a) for a in e.actions] for e in episodes)
    adv = episode_advantages(episodes, "delta_ttg").double().numpy()
    rows = [
        Row(p, a, float(adv[b, t]), e.logprobs[t]) for b, e in enumerate(episodes) for t, (p, a) in enumerate(zip(e.prompts, e.actions))
    ]
    recomputed = trainer.row_logprobs(rows, trainer.model)
    assert max(abs(x - y) for r, q in zip(rows, recomputed) for x, y in zip(r.old_logprobs, q)) < 1e-5
    # The update with the kept log-probs as pi_old equals the one that recomputes them.
    plain = Trainer(_config(tmp_path / "b"), _model(tokenizer), tokenizer, meter=_meter())
    plain.keep_sampler_logprobs = plain.share_prefix = False
    a, b = trainer.update(rows, np.random.default_rng(2)), plain.update(rows, np.random.default_rng(2))
    assert (a["old_logprobs_recomputed"], b["old_logprobs_recomputed"]) == (0.0, 1.0)
    for name in ("loss", "pg_loss", "kl", "entropy", "clip_frac", "grad_norm"):
        assert a[name] == pytest.approx(b[name], rel=1e-4, abs=1e-7), name


def test_a_sampler_that_is_not_the_trained_model_gets_its_logprobs_recomputed(tmp_path, tokenizer):
    trainer = Trainer(_config(tmp_path), _model(tokenizer), tokenizer, meter=_meter())
    rows = [Row([5, 6, 7], [8, 9], 1.0, [-1.0, -2.0])]
    assert trainer.kept_logprobs_usable(rows)
    trainer.generator = type("Other", (), {"model": _model(tokenizer)})()  # e.g. a vLLM engine's copy
    assert not trainer.kept_logprobs_usable(rows)
    assert trainer.update(rows)["old_logprobs_recomputed"] == 1.0


def test_batched_meter_scoring_gives_the_stepwise_advantages(tmp_path, tokenizer, monkeypatch):
    from ttg_envs.training.actor import rollout

    def rollout_with(step_all):
        monkeypatch.setattr(rollout, "step_all", step_all)
        trainer = Trainer(_config(tmp_path), _model(tokenizer), tokenizer, meter=_meter())
        torch.manual_seed(0)
        episodes = trainer.rollout(np.random.default_rng(4))
        return episodes, episode_advantages(episodes, "delta_ttg").double().numpy()

    batched, adv = rollout_with(rollout.step_all)
    stepwise, expected = rollout_with(lambda envs, actions: [env.step(a) for env, a in zip(envs, actions)])
    assert [e.actions for e in batched] == [e.actions for e in stepwise]
    assert [[i.get("ttg_cost") for i in e.infos] for e in batched] == [[i.get("ttg_cost") for i in e.infos] for e in stepwise]
    np.testing.assert_allclose(np.nan_to_num(adv), np.nan_to_num(expected), rtol=1e-12, atol=1e-12)


def test_equal_rows_run_once_and_give_the_per_row_update(tmp_path, tokenizer):
    rows = _shared_prefix_rows(tokenizer)
    rows = rows + [Row(r.prompt, r.action, -r.advantage) for r in rows[:5]]  # equal prompt and action, other advantages
    once = Trainer(_config(tmp_path / "a", micro_batch_rows=6, mini_batch_rows=17), _model(tokenizer), tokenizer, meter=_meter())
    each = Trainer(_config(tmp_path / "b", micro_batch_rows=6, mini_batch_rows=17), _model(tokenizer), tokenizer, meter=_meter())
    each._forward = each._forward_distinct  # one computation per row, equal ones too
    # micro_batch_rows counts distinct rows: an equal pair rides in one micro-batch.
    micro = once._micro_batches(rows, range(len(rows)))
    assert all(len({(tuple(rows[i].prompt), tuple(rows[i].action)) for i in m}) <= 6 for m in micro)
    assert sorted(i for m in micro for i in m) == list(range(len(rows))) and max(len(m) for m in micro) > 6
    for m in micro:
        a, b = once._forward(once.model, [rows[i] for i in m], True), each._forward(each.model, [rows[i] for i in m], True)
        for x, y in zip(a, b):
            assert torch.allclose(x, y, atol=1e-6)
    assert_same_update(once, each, rows)


def test_the_reference_pass_is_skipped_only_while_the_reference_is_the_policy(tmp_path, tokenizer):
    """While the reference holds the policy's weights (the first step from the start) its log-probs
    are the kept sampler's, which equal a reference pass's within 1e-5 per token: the same update."""
    trainer = Trainer(_config(tmp_path / "a"), _model(tokenizer), tokenizer, meter=_meter())
    episodes = trainer.rollout(np.random.default_rng(3))
    adv = episode_advantages(episodes, "delta_ttg").double().numpy()
    rows = [
        Row(p, a, float(adv[b, t]), e.logprobs[t]) for b, e in enumerate(episodes) for t, (p, a) in enumerate(zip(e.prompts, e.actions))
    ]
    plain = Trainer(_config(tmp_path / "b"), _model(tokenizer), tokenizer, meter=_meter())
    plain.reuse_reference = False
    passes = {id(trainer): 0, id(plain): 0}
    for t in (trainer, plain):
        t.row_logprobs = lambda rows, model, t=t, own=t.row_logprobs: passes.__setitem__(id(t), passes[id(t)] + 1) or own(rows, model)
    a, b = trainer.update(rows, np.random.default_rng(2)), plain.update(rows, np.random.default_rng(2))
    assert (passes[id(trainer)], passes[id(plain)]) == (0, 1)
    for name in ("loss", "pg_loss", "kl", "entropy", "clip_frac", "grad_norm"):
        assert a[name] == pytest.approx(b[name], rel=1e-4, abs=1e-7), name
    # The update moved the policy away from its reference: the next update runs the reference pass.
    trainer.update(rows, np.random.default_rng(2))
    assert passes[id(trainer)] == 1


def test_the_last_layer_at_the_action_positions_gives_the_full_pass_and_gradients(tmp_path, tokenizer, monkeypatch):
    import contextlib

    from ttg_envs.training.actor import trainer as trainer_module

    rows = _shared_prefix_rows(tokenizer)
    model = tiny_causal_lm(tokenizer, hidden=32, layers=2, heads=2, seed=0)
    trainer = Trainer(_config(tmp_path, micro_batch_rows=6), model, tokenizer, meter=_meter())
    results = []
    for trim in (True, False):
        if not trim:  # the full pass: every position through every layer
            monkeypatch.setattr(trainer_module, "last_layer_at", lambda model, positions=None: contextlib.nullcontext(False))
        trainer.model.zero_grad()
        logp, entropy, mask = trainer._forward(trainer.model, rows, with_entropy=True)
        ((logp * mask).sum() + (entropy * mask).sum()).backward()
        results.append(
            ((logp * mask).detach(), (entropy * mask).detach(), [p.grad.clone() for p in trainer.model.parameters()])
        )  # padding apart
    (a, b) = results
    assert torch.allclose(a[0], b[0], atol=1e-5) and torch.allclose(a[1], b[1], atol=1e-5)
    for x, y in zip(a[2], b[2]):
        assert torch.allclose(x, y, atol=1e-5, rtol=1e-4)


def test_the_last_layer_reads_a_cache_passed_by_either_name(tokenizer):
    # transformers 5.19 (the vLLM extra's) hands a decoder layer its cache as ``past_key_values``,
    # 5.24 as ``cache``: read by the older name only, the layer attended to the new positions alone.
    import copy

    from ttg_envs.training.actor.last_layer import _at_positions
    from ttg_envs.training.actor.rollout import additive_mask

    model = tiny_causal_lm(tokenizer, hidden=32, layers=2, heads=2, seed=0)
    prefix, width = 7, 5
    with torch.no_grad():
        out = model(input_ids=torch.arange(3, 3 + prefix)[None], use_cache=True)
        cache = getattr(out, "cache", None) or out.past_key_values
        assert cache.get_seq_length() == prefix
        hidden = torch.randn(1, width, 32, generator=torch.Generator().manual_seed(0))
        position_ids = torch.arange(prefix, prefix + width)[None]
        embeddings = model.model.rotary_emb(hidden, position_ids)
        mask = additive_mask(torch.ones(1, prefix + width, dtype=torch.long), width, torch.float32)
        positions = torch.tensor([[1, 4]])
        layer = model.model.layers[-1]
        outs = [
            _at_positions(layer, None, positions, hidden, mask, embeddings, **{name: copy.deepcopy(cache)})
            for name in ("cache", "past_key_values")
        ]
    assert outs[0].shape == (1, 2, 32) and torch.equal(outs[0], outs[1])
