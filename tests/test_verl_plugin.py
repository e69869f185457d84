"""The verl plugin: batch fields -> advantages everywhere; estimators, hook and agent loop where verl is installed.

verl pins transformers < 5.11, so verl is not in the dev environment and its tests skip there;
``.ci/run`` runs them with ``TTG_REQUIRE_VERL=1`` (no skips) in ``.venv-verl``
(``scripts/setup_verl_tests.sh``: verl 0.9.1 beside the dev packages), and they pass in the cluster
environment that ``scripts/setup_cluster.sh`` builds too.
"""

from __future__ import annotations

import asyncio
import json
import os

import gymnasium as gym
import numpy as np
import pytest

torch = pytest.importorskip("torch")

from ttg_envs import credit
from ttg_envs.core import ParsedAction, StepOutcome, TextEnv
from ttg_envs.training.actor.verl_plugin.fields import (
    FIELDS,
    batch_advantages,
    episode_fields,
)

C = 100.0

# Four episodes in two groups. Response layout per row: assistant tokens (step t) and observation
# tokens (-1), then padding. Meter fields are those of the states h_0..h_{T-1}.
EPISODES = [
    {"uid": "a", "reward": 1.0, "success": True, "token_step": [0, 0, -1, -1, 1, 1, 1], "can": [True, True], "rem": [60.0, 20.0]},
    {
        "uid": "a",
        "reward": 0.0,
        "success": False,
        "token_step": [0, -1, 1, 1, -1, 2],
        "can": [True, False, False],
        "rem": [60.0, None, None],
    },
    {"uid": "b", "reward": 1.0, "success": True, "token_step": [0, 0, 0], "can": [True], "rem": [30.0]},
    {"uid": "b", "reward": 0.0, "success": False, "token_step": [0, -1, 1], "can": [False, True], "rem": [None, 40.0]},
]
WIDTH = 8


def _batch():
    n = len(EPISODES)
    mask = torch.zeros(n, WIDTH)
    rewards = torch.zeros(n, WIDTH)
    non_tensor = {k: np.empty(n, dtype=object) for k in (*FIELDS, "uid")}
    for i, e in enumerate(EPISODES):
        steps = max(e["token_step"]) + 1
        mask[i, : len(e["token_step"])] = torch.tensor([s >= 0 for s in e["token_step"]], dtype=torch.float32)
        rewards[i, len(e["token_step"]) - 1] = e["reward"]
        row = {
            "uid": e["uid"],
            "ttg_token_step": e["token_step"],
            "ttg_can_complete": e["can"],
            "ttg_remaining": e["rem"],
            "ttg_valid": [True] * steps,
            "ttg_n_tokens": [e["token_step"].count(t) for t in range(steps)],
            "ttg_state_keys": [f"{e['uid']}{t}" for t in range(steps)],
            "ttg_success": e["success"],
            "ttg_failure_cost": C,
        }
        for k, v in row.items():
            non_tensor[k][i] = v
    return rewards, mask, non_tensor


def _expected_delta_ttg(non_tensor):
    out = torch.zeros(len(EPISODES), WIDTH, dtype=torch.float64)
    for uid in ("a", "b"):
        rows = [i for i, e in enumerate(EPISODES) if e["uid"] == uid]
        steps = [len(non_tensor["ttg_n_tokens"][i]) for i in rows]
        adv = credit.group_advantages([EPISODES[i]["reward"] for i in rows], steps)
        for a, i in zip(adv, rows):
            e = EPISODES[i]
            w = credit.step_weights(
                a, e["can"], [np.nan if r is None else r for r in e["rem"]], e["success"], non_tensor["ttg_n_tokens"][i], C
            )
            for pos, t in enumerate(e["token_step"]):
                if t >= 0:
                    out[i, pos] = a * w[t]
    return out


def test_batch_advantages_match_credit_per_trajectory():
    rewards, mask, non_tensor = _batch()
    got = batch_advantages("delta_ttg", rewards, mask, non_tensor["uid"], non_tensor)
    torch.testing.assert_close(got.double(), _expected_delta_ttg(non_tensor), rtol=1e-5, atol=1e-6)
    assert (got[mask == 0] == 0).all()
    grpo = batch_advantages("ttg_grpo", rewards, mask, non_tensor["uid"], non_tensor)
    adv_a = credit.group_advantages([1.0, 0.0], [2, 3])
    assert grpo[0, 0].item() == pytest.approx(adv_a[0], rel=1e-5) and grpo[1, 5].item() == pytest.approx(adv_a[1], rel=1e-5)
    for name in ("ttg_gigpo", "ttg_hgpo"):
        assert batch_advantages(name, rewards, mask, non_tensor["uid"], non_tensor).shape == mask.shape
    with pytest.raises(KeyError, match="install_hook"):
        batch_advantages("delta_ttg", rewards, mask, non_tensor["uid"], {"uid": non_tensor["uid"]})


def test_episode_fields_read_the_wrapper_info():
    infos = [
        {"ttg": 50, "ttg_can_complete": True, "ttg_valid": True, "state_key": "s0"},
        {"ttg": None, "ttg_can_complete": False, "ttg_valid": False, "state_key": "s1", "assistant_tokens": 3},
        {"ttg": 0, "ttg_can_complete": True, "ttg_valid": True, "assistant_tokens": 2, "success": True},
    ]
    f = episode_fields(infos, [0, 0, 0, -1, 1, 1], 16384)
    assert f["ttg_can_complete"] == [True, False] and f["ttg_remaining"] == [50.0, None]
    assert f["ttg_valid"] == [True, False] and f["ttg_n_tokens"] == [3, 2] and f["ttg_state_keys"] == ["s0", "s1"]
    assert f["ttg_success"] is True and f["ttg_failure_cost"] == 16384.0 and set(f) == set(FIELDS)


def test_ttg_metrics_of_a_batch():
    from ttg_envs.training.actor.verl_plugin.metrics import ttg_metrics

    rewards, mask, non_tensor = _batch()
    non_tensor["ttg_meter_s"] = np.array([0.5, 1.5, 1.0, 1.0], dtype=object)
    advantages = batch_advantages("delta_ttg", rewards, mask, non_tensor["uid"], non_tensor)
    m = ttg_metrics(non_tensor, advantages, mask)
    assert m["ttg/success_rate"] == 0.5 and m["ttg/turns/mean"] == pytest.approx((2 + 3 + 1 + 2) / 4)
    assert m["ttg/assistant_tokens/mean"] == pytest.approx(sum(sum(n) for n in non_tensor["ttg_n_tokens"]) / 4)
    assert m["ttg/can_complete_rate"] == pytest.approx(5 / 8) and m["ttg/meter_valid_rate"] == 1.0
    assert m["ttg/remaining_h0/mean"] == pytest.approx(50.0)  # 60, 60, 30; the fourth predicts failure
    assert m["ttg/advantage_std"] == pytest.approx(float(advantages[mask.bool()].std(unbiased=False)), rel=1e-5)
    assert m["ttg/meter_s/mean"] == 1.0
    assert ttg_metrics({"uid": non_tensor["uid"]}) == {}  # a batch from another agent loop


# ------------------------------------------------------------------------------- with verl


@pytest.fixture(scope="module")
def verl():
    if os.environ.get("TTG_REQUIRE_VERL"):  # .ci/run's verl environment: a missing verl fails, never skips
        import verl

        return verl
    return pytest.importorskip("verl")


def test_import_verl_registers_estimators_hook_and_loop(verl):
    from verl.experimental.agent_loop.agent_loop import _agent_loop_registry
    from verl.trainer.ppo import core_algos, ray_trainer

    import ttg_envs.training.actor.verl_plugin  # noqa: F401  (what the entry point does)

    for name in ("delta_ttg", "ttg_grpo", "ttg_gigpo", "ttg_hgpo"):
        assert core_algos.get_adv_estimator_fn(name) is not None
    assert getattr(ray_trainer.compute_advantage, "_ttg_hook", False)
    assert getattr(ray_trainer.compute_data_metrics, "_ttg_hook", False)  # ttg/* figures ride on verl's logger
    assert "ttg_agent" in _agent_loop_registry


def test_hook_hands_ttg_fields_to_the_estimator_on_a_dataproto(verl):
    from verl import DataProto
    from verl.trainer.ppo import core_algos, ray_trainer

    import ttg_envs.training.actor.verl_plugin  # noqa: F401

    rewards, mask, non_tensor = _batch()
    data = DataProto.from_dict(tensors={"token_level_rewards": rewards, "response_mask": mask}, non_tensors=non_tensor)
    out = ray_trainer.compute_advantage(data, adv_estimator="delta_ttg", config=None)
    torch.testing.assert_close(out.batch["advantages"].double(), _expected_delta_ttg(non_tensor), rtol=1e-5, atol=1e-6)
    # Without the hook verl would pass no ttg fields; the estimator says what is missing.
    with pytest.raises(KeyError, match="install_hook"):
        core_algos.get_adv_estimator_fn("delta_ttg")(rewards, mask, index=non_tensor["uid"])
    # verl's own estimators go through unchanged.
    data = DataProto.from_dict(tensors={"token_level_rewards": rewards, "response_mask": mask}, non_tensors=non_tensor)
    grpo = ray_trainer.compute_advantage(data, adv_estimator="grpo", config=None)
    assert grpo.batch["advantages"].shape == mask.shape


class _CountEnv(TextEnv):
    """Succeeds on the second turn."""

    default_max_steps = 4

    @property
    def num_tasks(self):
        return 2

    def _task_info(self, index):
        return {"id": str(index), "type": "count", "split": "train"}

    def _start(self, index):
        return "Count to two.", {}

    def parse_action(self, text):
        return ParsedAction(command=text)

    def _apply(self, command):
        won = self.elapsed_steps == 1
        return StepOutcome(observation="next", reward=float(won), terminated=won, success=won)

    def _state_key(self):
        return str(self.elapsed_steps)


def _count_loop(monkeypatch):
    """A ``ttg_agent`` loop on the Count env whose server always answers "one two", its tokenizer and reply."""
    from omegaconf import OmegaConf
    from verl.experimental.agent_loop.agent_loop import DictConfigWrap
    from verl.workers.rollout.replica import TokenOutput

    from ttg_envs.meters import ScriptedMeter
    from ttg_envs.training.actor.verl_plugin import agent_loop
    from ttg_envs.training.tiny_models import train_bpe_tokenizer

    if "ttg-test/Count-v0" not in gym.registry:
        gym.register("ttg-test/Count-v0", entry_point=_CountEnv)
    tokenizer = train_bpe_tokenizer(["Count to two. next one two"] * 10, vocab_size=300)
    reply = tokenizer("one two")["input_ids"] + [tokenizer.eos_token_id]

    class Server:
        async def generate(self, request_id, prompt_ids, sampling_params, **_):
            assert sampling_params["max_tokens"] == 7
            return TokenOutput(token_ids=reply, log_probs=[-0.5] * len(reply))

    # The loop builds its env stack with make_env, which loads the TTG_METER spec once per process
    # (wrappers.stack.cached_meter): an empty cache and a load_meter that knows the test's spec.
    import ttg_envs.meters
    from ttg_envs.wrappers import stack

    meter = ScriptedMeter(lambda h: (True, 100 - len(h)))
    real_load = ttg_envs.meters.load_meter
    monkeypatch.setenv("TTG_METER", "test-meter")
    monkeypatch.setattr(stack, "_METERS", {})
    monkeypatch.setattr(ttg_envs.meters, "load_meter", lambda spec, **kw: meter if spec == "test-meter" else real_load(spec, **kw))
    config = OmegaConf.create({"actor_rollout_ref": {"rollout": {"prompt_length": 512, "response_length": 256}}, "data": {}})
    loop = agent_loop.TTGAgentLoop(DictConfigWrap(config), Server(), tokenizer, None, None, DictConfigWrap(config.data))
    return loop, tokenizer, reply


def _count_task(**kw):
    return {"env_id": "ttg-test/Count-v0", "task_index": 1, "seed": 0, "max_tokens_per_turn": 7, "failure_cost": C, **kw}


def test_agent_loop_plays_an_episode_into_one_row(verl, monkeypatch):
    loop, _, reply = _count_loop(monkeypatch)
    out = loop.loop.run_until_complete(loop.run({"temperature": 1.0}, extra_info={"ttg": _count_task()}))
    f = out.extra_fields
    assert out.reward_score == 1.0 and f["ttg_success"] is True
    assert f["ttg_n_tokens"] == [len(reply), len(reply)]
    steps = f["ttg_token_step"]
    assert len(steps) == len(out.response_ids) == len(out.response_mask)
    assert [s >= 0 for s in steps] == [bool(m) for m in out.response_mask]
    assert steps.count(0) == steps.count(1) == len(reply)
    assert f["ttg_remaining"] == [98.0, 96.0] and f["ttg_failure_cost"] == C
    assert f["ttg_meter_s"] >= 0.0  # the loop times its meter (verl logs the mean as ttg/meter_s/mean)
    asyncio.set_event_loop(None)


def test_reward_score_is_the_token_level_reward(verl, monkeypatch):
    """verl's own code turns the loop's reward_score into rm_scores, token_level_scores and advantages."""
    from types import SimpleNamespace

    from verl.experimental.agent_loop.agent_loop import AgentLoopWorker
    from verl.trainer.ppo import ray_trainer
    from verl.trainer.ppo.reward import extract_reward

    loop, tokenizer, _ = _count_loop(monkeypatch)
    # Two rollouts of one task: two turns win (R = 1), one turn is cut off (R = 0).
    outputs = [loop.loop.run_until_complete(loop.run({"temperature": 1.0}, extra_info={"ttg": _count_task(max_turns=t)})) for t in (2, 1)]
    assert [o.reward_score for o in outputs] == [1.0, 0.0]
    # The V1 trainer's TransferQueue path stores as_dict(): the score on the last response token.
    row = outputs[0].as_dict()
    assert row["rm_scores"].sum().item() == 1.0 and row["rm_scores"][-1].item() == 1.0

    class RewardWorker:  # with reward_model.enable false verl hands the loop its reward workers
        class compute_score:
            @staticmethod
            def remote(data):
                raise AssertionError("a reward function ran although the loop set reward_score")

    # An AgentLoopWorker without Ray or a rollout server: the attributes its post-processing reads.
    worker = object.__new__(AgentLoopWorker)
    worker.__dict__.update(
        tokenizer=tokenizer,
        processor=None,
        mm_processor_kwargs={},
        distillation_enabled=False,
        reward_loop_worker_handles=[RewardWorker()],
        rollout_config=SimpleNamespace(prompt_length=512, response_length=256),
    )
    padded = [loop.loop.run_until_complete(worker._agent_loop_postprocess(o, False, raw_prompt=[])) for o in outputs]
    batch = worker._postprocess(padded)
    asyncio.set_event_loop(None)
    scores = batch.batch["rm_scores"]
    last = batch.batch["attention_mask"][:, 512:].sum(dim=1) - 1
    assert scores.sum(-1).tolist() == [1.0, 0.0] and scores[0, last[0]].item() == 1.0

    # RayPPOTrainer.fit: extract_reward -> token_level_scores -> token_level_rewards (no KL in reward).
    reward_tensor, _ = extract_reward(batch)
    batch.batch["token_level_scores"] = reward_tensor
    batch.batch["token_level_rewards"] = batch.batch["token_level_scores"]
    batch.non_tensor_batch["uid"] = np.array(["task", "task"], dtype=object)
    out = ray_trainer.compute_advantage(batch, adv_estimator="ttg_grpo", config=None)
    mask = batch.batch["response_mask"].bool()
    expected = credit.group_advantages([1.0, 0.0], [2, 1])
    for i in range(2):
        assert out.batch["advantages"][i][mask[i]].tolist() == pytest.approx([expected[i]] * int(mask[i].sum()), rel=1e-5)
        assert (out.batch["advantages"][i][~mask[i]] == 0).all()
    # Every ttg estimator through verl's compute_advantage equals the plugin's own batch function on the
    # loop's rows (delta_ttg reads the meter fields the loop's TTG_METER wrote).
    from ttg_envs.training.actor.verl_plugin import ESTIMATOR_NAMES

    for name in ESTIMATOR_NAMES:
        got = ray_trainer.compute_advantage(batch, adv_estimator=name, config=None).batch["advantages"]
        direct = batch_advantages(
            name, batch.batch["token_level_rewards"], batch.batch["response_mask"], batch.non_tensor_batch["uid"], batch.non_tensor_batch
        )
        torch.testing.assert_close(got, direct, msg=name)
        assert (got[~mask] == 0).all() and got[mask].abs().sum() > 0, name


def test_launch_config_composes_for_the_classic_trainer(verl):
    """configs/verl: no reward function or model (the loop's reward_score is the reward), the classic trainer."""
    from pathlib import Path

    from hydra import compose, initialize_config_dir
    from verl.trainer.ppo.utils import (
        need_critic,
        need_reference_policy,
        need_reward_model,
    )
    from verl.utils.config import validate_config

    folder = Path(__file__).parent.parent / "configs" / "verl"
    with initialize_config_dir(config_dir=str(folder.resolve()), version_base=None):
        cfg = compose("qwen3_4b_alfworld")
    assert not need_reward_model(cfg) and cfg.reward.custom_reward_function.path is None
    assert cfg.algorithm.use_kl_in_reward is False and cfg.algorithm.adv_estimator == "delta_ttg"
    assert cfg.trainer.use_v1 is False  # V1 would not fetch the ttg_* fields for the estimator
    assert cfg.actor_rollout_ref.rollout.agent.default_agent_loop == "ttg_agent"
    # Dynamic batching needs room for the longest row in one micro-batch.
    longest = cfg.data.max_prompt_length + cfg.data.max_response_length
    assert cfg.actor_rollout_ref.actor.ppo_max_token_len_per_gpu >= longest
    validate_config(cfg, use_reference_policy=need_reference_policy(cfg), use_critic=need_critic(cfg))


def test_task_parquet_rows(tmp_path):
    pandas = pytest.importorskip("pandas")
    from ttg_envs.training.actor.verl_plugin.dataset import main

    if "ttg-test/Count-v0" not in gym.registry:
        gym.register("ttg-test/Count-v0", entry_point=_CountEnv)
    assert main(["--env", "ttg-test/Count-v0", "--out", str(tmp_path / "t.parquet")]) == 0
    frame = pandas.read_parquet(tmp_path / "t.parquet")
    assert list(frame["agent_name"]) == ["ttg_agent"] * 2
    assert [row["ttg"]["task_index"] for row in frame["extra_info"]] == [0, 1]
    assert [row["ttg"]["task_id"] for row in frame["extra_info"]] == ["0", "1"]
    assert frame["prompt"][0][0]["role"] == "user"


def test_alfworld_task_rows_are_references_that_load_no_game(monkeypatch):
    """All 600 train tasks without starting an engine; a row's index resets the env to the task it names."""
    pytest.importorskip("alfworld")
    from ttg_envs.envs.alfworld.tasks import AlfredTask
    from ttg_envs.training.actor.verl_plugin.dataset import task_rows

    with monkeypatch.context() as m:
        m.setattr(AlfredTask, "game", lambda self: pytest.fail("the dataset writer loaded a game"))
        rows = task_rows("ttg/ALFWorld-v0", {"split": "train"}, seed=7)
    assert len(rows) == 600
    refs = [row["extra_info"]["ttg"] for row in rows]
    assert [r["task_index"] for r in refs] == list(range(600)) and refs[3]["seed"] == 10
    assert len({r["task_id"] for r in refs}) == 600
    env = gym.make(refs[3]["env_id"], **json.loads(refs[3]["env_kwargs"]))
    _, info = env.reset(seed=refs[3]["seed"], options={"task_index": refs[3]["task_index"]})
    env.close()
    assert info["task"]["id"] == refs[3]["task_id"] and info["task"]["type"] == refs[3]["task_type"]
    assert rows[3]["prompt"] == [{"role": "user", "content": info["task"]["goal"]}]
