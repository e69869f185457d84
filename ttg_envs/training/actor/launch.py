"""``ttg train`` as a library function: DeltaTTG (or a baseline) actor training on one node.

:func:`train` runs a :class:`~.trainer.TrainConfig` (the hyperparameters; unset ones take paper table
4's values for the env) with a :class:`LaunchConfig` (what to load: the policy, the meter, the device
and rollout engine). ``model="tiny"`` builds a small random Qwen3 with a tokenizer trained on the env's
prompts, and ``meter="turns"`` a rule-based meter (remaining tokens shrink with the turn count):
together they run end to end on a CPU. A run resumes from the newest checkpoint in its ``out_dir``
unless ``resume=False``.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..._optional import require

if TYPE_CHECKING:
    from .trainer import TrainConfig

__all__ = ["ONE_THREAD_PARAMS", "LaunchConfig", "torch_threads_for", "train", "turns_meter"]


@dataclass(frozen=True, kw_only=True)
class LaunchConfig:
    """What ``ttg train`` loads around a :class:`~.trainer.TrainConfig`.

    Attributes:
        model: the policy: a HF name or folder, or ``tiny``.
        meter: a ``load_meter`` spec, ``turns`` (rule-based, smoke runs) or None (baselines).
        device: the torch device (None: cuda when available).
        dtype: the policy's dtype on a GPU (a CPU uses float32).
        rollout: ``auto`` (vLLM when installed and on a GPU), ``hf`` or ``vllm``.
        vllm_memory: vLLM's ``gpu_memory_utilization``.
        resume: continue from the newest checkpoint in the run's ``out_dir``.
        report_to: experiment trackers (:func:`~ttg_envs.training.tracking.parse_report_to`'s text:
            ``none``, ``all`` or a comma list of ``tensorboard``, ``wandb``).
        log_episodes_every: send the trackers a table of sampled episodes every N steps (0: never).
        lora_r: train a LoRA adapter of this rank instead of every weight (0: full fine-tuning).
        lora_alpha: the LoRA scale numerator (None: 2 x rank).
        lora_targets: module names to adapt, a comma list or a sequence (None: every linear layer but the head).
        lora_merge: also write ``out_dir/merged``, the policy with its adapter merged in.
        torch_threads: torch CPU threads (None: 1 for a CPU policy under :data:`ONE_THREAD_PARAMS`
            parameters, else torch's default; 0: torch's default; see :func:`torch_threads_for`).

    >>> LaunchConfig(model="tiny", meter="turns").rollout
    'auto'
    """

    model: str = "Qwen/Qwen3-4B"
    meter: str | None = None
    device: str | None = None
    dtype: str = "bfloat16"
    rollout: str = "auto"
    vllm_memory: float = 0.35
    resume: bool = True
    report_to: str = "none"
    log_episodes_every: int = 10
    lora_r: int = 0
    lora_alpha: float | None = None
    lora_targets: str | Sequence[str] | None = None
    lora_merge: bool = False
    torch_threads: int | None = None


#: A CPU policy with fewer parameters than this trains on one torch thread unless told otherwise.
#: Ops this small split across threads spend more time syncing than computing: a forward + backward
#: pass on 2 threads cost 28x, 16x, 7.7x and 4.3x the CPU time of 1 thread at 0.16M, 3.4M, 19M and 57M
#: parameters on the shared 2-core machine (benchmarks/bench_threads.py, load 10-13). Larger models,
#: never measured here, keep torch's default.
ONE_THREAD_PARAMS = 60_000_000


def torch_threads_for(requested: int | None, device: str, params: int) -> int | None:
    """The torch thread count ``ttg train`` sets for a policy of ``params`` parameters on ``device``
    (None: leave torch's default).

    ``requested`` is ``--torch-threads``: a count, 0 for torch's default, or None for the rule
    above (1 on a CPU under :data:`ONE_THREAD_PARAMS` parameters).

    >>> torch_threads_for(None, "cpu", 157_632), torch_threads_for(None, "cpu", 4 * 10**9)
    (1, None)
    >>> torch_threads_for(None, "cuda", 157_632), torch_threads_for(0, "cpu", 157_632), torch_threads_for(2, "cpu", 157_632)
    (None, None, 2)
    """
    if requested is not None:
        if requested < 0:
            raise ValueError(f"torch_threads must be >= 0, not {requested}")
        return requested or None
    return 1 if str(device).split(":")[0] == "cpu" and params < ONE_THREAD_PARAMS else None


def turns_meter(tokens_per_turn: int, max_turns: int) -> Any:
    """A rule-based meter for smoke runs: ``(max_turns - turns so far) * tokens_per_turn / 2`` tokens left."""
    from ...meters import ScriptedMeter

    def estimate(history):
        turns = sum(1 for m in history if m.get("role") == "assistant")
        return True, max(1, (max_turns - turns) * tokens_per_turn // 2)

    return ScriptedMeter(estimate)


def _tiny_policy(env_id: str, env_kwargs: dict[str, Any]) -> tuple[Any, Any]:
    import gymnasium as gym

    from ..tiny_models import tiny_causal_lm, train_bpe_tokenizer

    env = gym.make(env_id, **env_kwargs)
    texts = []
    for index in range(min(env.unwrapped.num_tasks, 3)):
        obs, _ = env.reset(seed=0, options={"task_index": index})
        texts += [env.unwrapped.system_prompt, obs]
    env.close()
    tokenizer = train_bpe_tokenizer(texts, vocab_size=1024)
    # 2 heads of 32: vLLM's CPU attention rejects head_dim 16 (32 and 64 work).
    return tiny_causal_lm(tokenizer, hidden=64, layers=2, heads=2, seed=0), tokenizer


def _load_policy(launch: LaunchConfig, env_id: str, env_kwargs: dict[str, Any], out_dir: str, device: str) -> tuple[Any, Any, Any]:
    """Policy, tokenizer and the frozen reference (the same base weights; None for a LoRA policy,
    whose reference is its base with the adapter off)."""
    torch = require("torch", "hf")
    from ..lora import LoraSettings, add_lora

    lora = LoraSettings.from_flags(launch.lora_r, launch.lora_alpha, launch.lora_targets)
    if launch.model == "tiny":
        model, tokenizer = _tiny_policy(env_id, env_kwargs)
        reference = None if lora else copy.deepcopy(model)  # the same seeded initial weights on every (re)start
        base = launch.model
        if lora:  # a random model has no spec to reload an adapter on: keep it beside the run
            base = str((Path(out_dir) / "base-policy").resolve())
            model.save_pretrained(base)
            tokenizer.save_pretrained(base)
    else:
        from ...model_spec import load_causal_lm, resolve_model

        dtype = getattr(torch, launch.dtype) if device.startswith("cuda") else torch.float32
        source = resolve_model(launch.model, dtype=dtype)
        model, tokenizer = load_causal_lm(source)
        reference = None if lora else load_causal_lm(source)[0]
        model.gradient_checkpointing_enable()
        base = launch.model
    if lora:
        model = add_lora(model, lora, base=base)
    return model.to(device), tokenizer, reference.to(device) if reference is not None else None


def _generator(launch: LaunchConfig, out_dir: str, model: Any, tokenizer: Any, device: str) -> Any:
    """A vLLM engine on the policy's starting weights when asked (or ``auto`` on a GPU with vLLM), else None."""
    import importlib.util

    use_vllm = launch.rollout == "vllm" or (
        launch.rollout == "auto" and device.startswith("cuda") and importlib.util.find_spec("vllm") is not None
    )
    if not use_vllm:
        return None
    from .rollout import VLLMGenerator

    path = launch.model
    if launch.lora_r:  # the engine holds the base; the trainer hands it the adapter (VLLMGenerator.load_weights)
        path = model.peft_config["default"].base_model_name_or_path
    elif launch.model == "tiny":
        path = str(Path(out_dir) / "initial-policy")
        model.save_pretrained(path)
        tokenizer.save_pretrained(path)
    kwargs = {"gpu_memory_utilization": launch.vllm_memory} if device.startswith("cuda") else {"enforce_eager": True}
    dtype = "bfloat16" if device.startswith("cuda") else "float32"
    return VLLMGenerator(path, lora_rank=launch.lora_r or None, dtype=dtype, **kwargs)


def train(config: TrainConfig, launch: LaunchConfig | None = None) -> list[dict[str, Any]]:
    """Train an actor as ``config`` says, loading what ``launch`` names; returns each step's metrics."""
    torch = require("torch", "hf")
    from .trainer import Trainer, latest_checkpoint

    launch = launch or LaunchConfig()
    config = config.resolved()
    meter = None
    if launch.meter == "turns":
        meter = turns_meter(config.max_tokens_per_turn, config.max_turns)
    elif launch.meter is not None:
        from ...meters import load_meter

        meter = load_meter(launch.meter)
    device = launch.device or ("cuda" if torch.cuda.is_available() else "cpu")
    model, tokenizer, reference = _load_policy(launch, config.env_id, config.env_kwargs, config.out_dir, device)
    threads = torch_threads_for(launch.torch_threads, device, sum(p.numel() for p in model.parameters()))
    if threads is not None:
        torch.set_num_threads(threads)
    generator = _generator(launch, config.out_dir, model, tokenizer, device)
    trainer = Trainer(config, model, tokenizer, meter=meter, ref_model=reference if config.kl_coef > 0 else None, generator=generator)
    checkpoint = latest_checkpoint(config.out_dir) if launch.resume else None
    if checkpoint is not None:
        trainer.resume(checkpoint)
        print(f"resumed from {checkpoint} (step {trainer.step_index})")
    trainer.reporter = _reporter(launch, config, tokenizer, trainer.step_index)
    try:
        metrics = trainer.train()
    finally:
        trainer.reporter.close()
    if launch.lora_merge:
        from ..lora import export_merged

        print(f"merged policy (adapter folded into the base) in {export_merged(model, tokenizer, Path(config.out_dir) / 'merged')}")
    if metrics:
        last = metrics[-1]
        print(
            f"step {last['step']}: reward {last['reward_mean']:.3f}, success {last['success_rate']:.3f}, "
            f"loss {last['loss']:.4f}; metrics in {Path(config.out_dir) / 'metrics.jsonl'}"
        )
    return metrics


def _reporter(launch: LaunchConfig, config: TrainConfig, tokenizer: Any, start_step: int) -> Any:
    """The step line plus the ``report_to`` trackers, which get the resolved config."""
    from dataclasses import asdict

    from ..tracking import RunReporter, open_trackers, parse_report_to

    names = parse_report_to(launch.report_to)
    trackers = open_trackers(names, config.out_dir, {**asdict(config), "model": launch.model, "meter": launch.meter}, start_step)
    return RunReporter(trackers, tokenizer=tokenizer, table_every=launch.log_episodes_every)
