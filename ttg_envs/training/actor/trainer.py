"""The DeltaTTG actor trainer on one node (paper Algorithm 1): rollouts, credit, clipped update.

Each step draws ``tasks_per_step`` tasks, plays G rollouts of each through ``gym.make`` +
``TokenCounter`` + ``ProgressMeterWrapper``, turns the episodes' info fields into step-level
advantages (:mod:`.advantages`, which calls :mod:`.credit`), and updates the policy with
the token-mean clipped loss of :mod:`.actor_loss`. The ``dapo`` estimator adds DAPO's dynamic
sampling (appendix B): more rollout batches until enough groups with varied rewards are found.
One training row is one turn: the prompt h_t and the action's tokens, which all carry that step's
advantage A_i w_{i,t}.

Every random draw of step k derives from ``(seed, k)``, so a run resumed from the checkpoint of
step k repeats exactly the steps an uninterrupted run would take (same device and kernels).
"""

from __future__ import annotations

import copy
import json
import logging
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from ... import credit
from ..._optional import require
from ...agents.window import PromptWindow
from ...meters.timed import TimedMeter
from ...registry import env_settings, turn_limit
from ..lora import AdapterOff, is_lora, load_adapter_weights
from .advantages import ESTIMATORS, episode_advantages, no_signal_warning, varied_groups
from .last_layer import last_layer_at
from .loss import ActorLossConfig, actor_loss, token_entropy, token_logprobs
from .rollout import Episode, HFGenerator, TokenGenerator, additive_mask, cache_kwarg, run_episodes

__all__ = ["Row", "TrainConfig", "Trainer", "latest_checkpoint"]

_CHECKPOINT_PREFIX = "checkpoint-"
_log = logging.getLogger(__name__)


@dataclass(frozen=True)
class TrainConfig:
    """Settings of one actor-training run; ``None`` fields take paper table 4's value for the env.

    Attributes:
        env_id, env_kwargs: the env (``gym.make(env_id, max_steps=max_turns, **env_kwargs)``).
        estimator: ``delta_ttg`` (needs a meter), ``grpo``, ``dapo``, ``gigpo`` or ``hgpo``.
        steps: optimizer iterations of the run.
        tasks_per_step: tasks per iteration (table 4's training batch size).
        group_size: rollouts per task, G.
        task_indices: the task pool (default: every task of the env).
        mini_batch_rows: turns per optimizer step; a step's rows are split into mini-batches.
        micro_batch_rows: distinct turns per forward pass (gradient accumulation inside a
            mini-batch); rows with the same prompt and action run once.
        save_every: checkpoint every this many steps (and at the end); 0 saves only at the end.
        dapo_max_batches, dapo_min_std: DAPO's dynamic sampling (table 4): at most this many
            rollout batches per step; groups with reward std below ``dapo_min_std`` are dropped.
        window_turns, max_prompt_tokens: the policy's prompt window (:class:`~ttg_envs.agents.window.PromptWindow`):
            the last ``window_turns`` turns within ``max_prompt_tokens`` (None: the whole transcript;
            verl-agent and the paper's E.5 protocol use 2 and 2048).
    """

    env_id: str = "ttg/ALFWorld-v0"
    env_kwargs: dict[str, Any] = field(default_factory=dict)
    estimator: str = "delta_ttg"
    steps: int = 150
    tasks_per_step: int | None = None
    group_size: int | None = None
    max_turns: int | None = None
    max_tokens_per_turn: int | None = None
    lr: float | None = None
    kl_coef: float | None = None
    entropy_coef: float | None = None
    temperature: float | None = None
    top_p: float | None = None
    ppo_epochs: int | None = None
    failure_cost: float | None = None
    rho: float | None = None
    cap: float | None = None
    clip_low: float = 0.2
    clip_high: float = 0.28
    dual_clip: float = 3.0
    dapo_max_batches: int = 10
    dapo_min_std: float = 1e-4
    max_grad_norm: float = 1.0
    mini_batch_rows: int = 256
    micro_batch_rows: int = 8
    task_indices: tuple[int, ...] | None = None
    window_turns: int | None = None
    max_prompt_tokens: int | None = None
    seed: int = 0
    save_every: int = 10
    out_dir: str = "runs/train"

    def resolved(self) -> TrainConfig:
        """A copy with every ``None`` hyperparameter filled from table 4 for ``env_id`` (the turn limit
        from its registry record, the one ``ttg eval`` plays)."""
        table = env_settings(self.env_id)
        names = {
            "tasks_per_step": "batch_size",
            "group_size": "group_size",
            "max_tokens_per_turn": "max_tokens_per_turn",
            "lr": "lr",
            "kl_coef": "kl_coef",
            "entropy_coef": "entropy_coef",
            "temperature": "temperature",
            "top_p": "top_p",
            "ppo_epochs": "ppo_epochs",
            "failure_cost": "failure_cost",
        }
        filled = {ours: getattr(table, theirs) for ours, theirs in names.items() if getattr(self, ours) is None}
        if self.max_turns is None:
            filled["max_turns"] = turn_limit(self.env_id)
        if self.rho is None:
            filled["rho"] = credit.RHO
        if self.cap is None:
            filled["cap"] = credit.CAP
        if self.estimator not in ESTIMATORS:
            raise ValueError(f"unknown estimator {self.estimator!r}; expected one of {ESTIMATORS}")
        return replace(self, **filled)

    @property
    def loss_config(self) -> ActorLossConfig:
        """The actor-loss coefficients of this (resolved) config."""
        return ActorLossConfig(self.clip_low, self.clip_high, self.dual_clip, self.kl_coef, self.entropy_coef)


@dataclass
class Row:
    """One training row: a turn's prompt ids, its action ids and the action's advantage.

    ``old_logprobs``: the sampler's log pi(token | prefix) of each action token when it kept them
    (used as pi_old when the sampler is the trained model itself), else None.
    """

    prompt: list[int]
    action: list[int]
    advantage: float
    old_logprobs: list[float] | None = None


class Trainer:
    """Runs :class:`TrainConfig` on a transformers causal LM.

    Args:
        config: the run's settings (resolved against table 4 here).
        model: the policy (a transformers causal LM), trained in place.
        tokenizer: its tokenizer, with a chat template.
        meter: a progress meter (``load_meter``); required by ``delta_ttg``.
        ref_model: the frozen reference policy for the KL term (default: a copy of ``model`` taken
            now; pass the base model when resuming so that the KL stays anchored to it). For a LoRA
            policy (:func:`~ttg_envs.training.lora.add_lora`) the default is the same model with its
            adapter off: the base, with no second copy in memory.
        generator: how rollouts sample (default :class:`HFGenerator` on ``model``). A generator
            with ``load_weights(model)``, such as :class:`VLLMGenerator`, gets the policy's
            weights (a LoRA policy's adapter) now, after every update and on resume.
        reporter: the per-step hook (:class:`~ttg_envs.training.tracking.RunReporter`: step line,
            trackers, episode tables); default: the step line alone when :meth:`train` shows progress.

    Attributes:
        keep_sampler_logprobs: use the sampler's kept log-probs as pi_old when they are the
            trained model's (True); False recomputes them.
        share_prefix: run the prompt prefix a micro-batch shares once (True; equal results to
            float rounding).
        reuse_reference: take the reference's log-probs from the kept sampler log-probs while the
            reference holds exactly the policy's weights (the first step from the start), instead of
            a reference pass (True; the same log-probs to float rounding).
    """

    def __init__(
        self,
        config: TrainConfig,
        model: Any,
        tokenizer: Any,
        *,
        meter: Any = None,
        ref_model: Any = None,
        generator: TokenGenerator | None = None,
        reporter: Any = None,
    ):
        torch = require("torch", "hf")
        self.config = config.resolved()
        if self.config.estimator == "delta_ttg" and meter is None:
            raise ValueError("the delta_ttg estimator needs a progress meter")
        self.model = model
        self.tokenizer = tokenizer
        self.meter = meter
        self._timed_meter = TimedMeter(meter) if meter is not None else None
        self.reporter = reporter
        self.last_episodes: list[Episode] = []
        self.ref_model = None
        if self.config.kl_coef > 0:
            self.ref_model = ref_model if ref_model is not None else (AdapterOff(model) if is_lora(model) else copy.deepcopy(model))
            self.ref_model.eval().requires_grad_(False)
        self.generator = generator or HFGenerator(model, tokenizer)
        follows = getattr(self.generator, "follows", None)
        if hasattr(self.generator, "load_weights") and not (follows and follows(model)):
            self._sync_generator()  # the engine samples from exactly these weights (a LoRA policy: this adapter)
        self.optimizer = torch.optim.AdamW(model.parameters(), lr=self.config.lr, weight_decay=0.0)
        self.step_index = 0
        self.out_dir = Path(self.config.out_dir)
        self._envs: list[Any] = []
        self._pool: np.ndarray | None = None
        # Prefix sharing halves the training passes' CPU time on one torch thread (a micro-batch's
        # rows are one task's: its ~230-token head runs once). On two threads of a loaded 2-core
        # machine it measured slower, the thread contention then dominating every small op
        # (bench_trainer.py).
        self.keep_sampler_logprobs = True
        self.share_prefix = True
        self.reuse_reference = True
        self._said_recompute = False

    # ------------------------------------------------------------------ the loop
    def train(self, steps: int | None = None, progress: bool = True) -> list[dict[str, Any]]:
        """Run until ``steps`` (default ``config.steps``) iterations are done; returns their metrics."""
        total = self.config.steps if steps is None else steps
        history = []
        reporter = self.reporter
        if reporter is None and progress:
            from ..tracking import RunReporter

            reporter = RunReporter()
        if reporter is not None:
            reporter.start(total, self.step_index)
        while self.step_index < total:
            metrics = self.step()
            history.append(metrics)
            if reporter is not None:
                reporter.step(metrics, self.last_episodes)
            every = self.config.save_every
            if self.step_index == total or (every and self.step_index % every == 0):
                self.save()
        return history

    def step(self) -> dict[str, Any]:
        """One iteration: rollouts, advantages, update; appends its metrics to ``metrics.jsonl``.

        With ``dapo`` the rollouts come from :meth:`dapo_rollout`; reward, success and turn means
        are then over every generated episode, the other metrics over the kept ones, and
        ``dapo_batches`` / ``dapo_kept_groups`` are logged too. A step that kept no group makes no
        update (its loss terms are logged as 0) but still counts as a step.
        """
        torch = require("torch", "hf")
        cfg = self.config
        start = time.perf_counter()
        rng = np.random.default_rng([cfg.seed, self.step_index])
        torch.manual_seed(int(rng.integers(2**62)))
        extra: dict[str, int] = {}
        if cfg.estimator == "dapo":
            generated, episodes = self.dapo_rollout(rng)
            extra = {"dapo_batches": len(generated), "dapo_kept_groups": len({e.group for e in episodes})}
            generated = [e for batch in generated for e in batch]
        else:
            generated = episodes = self.rollout(rng)
        rollout_s = time.perf_counter() - start
        meter_s = self._timed_meter.take() if self._timed_meter is not None else 0.0
        self.last_episodes = generated
        rows: list[Row] = []
        if episodes:
            advantages = episode_advantages(episodes, cfg.estimator, rho=cfg.rho, cap=cfg.cap).double().numpy()
            rows = [
                Row(prompt, action, float(advantages[b, t]), episode.logprobs[t] if episode.logprobs else None)
                for b, episode in enumerate(episodes)
                for t, (prompt, action) in enumerate(zip(episode.prompts, episode.actions))
            ]
        if episodes:
            warning = no_signal_warning([e.reward for e in episodes], [e.group for e in episodes], [r.advantage for r in rows])
            if warning:
                _log.warning("step %d: %s", self.step_index + 1, warning)
        update_start = time.perf_counter()
        lr = float(self.optimizer.param_groups[0]["lr"])
        if rows:
            terms = self.update(rows, rng)
            self._sync_generator()
        else:
            terms = dict.fromkeys(("pg_loss", "kl", "entropy", "clip_frac", "dual_clip_frac", "loss", "grad_norm"), 0.0)
        self.step_index += 1
        rewards = np.array([e.reward for e in generated])
        metrics = {
            "step": self.step_index,
            "reward_mean": float(rewards.mean()),
            "success_rate": float(np.mean([e.success for e in generated])),
            "turns_mean": float(np.mean([e.num_steps for e in generated])),
            "response_tokens": int(sum(len(r.action) for r in rows)),
            "advantage_abs_mean": float(np.mean([abs(r.advantage) for r in rows])) if rows else 0.0,
            "advantage_std": float(np.std([r.advantage for r in rows])) if rows else 0.0,
            "episode_tokens_mean": float(np.mean([sum(len(a) for a in e.actions) for e in generated])),
            "lr": lr,
            "varied_groups": varied_groups([e.reward for e in episodes], [e.group for e in episodes]),
            **extra,
            **terms,
            "rollout_s": rollout_s,
            "meter_s": meter_s,
            "update_s": time.perf_counter() - update_start,
            "step_s": time.perf_counter() - start,
        }
        self.out_dir.mkdir(parents=True, exist_ok=True)
        with open(self.out_dir / "metrics.jsonl", "a") as f:
            f.write(json.dumps(metrics) + "\n")
        return metrics

    def rollout(self, rng: np.random.Generator) -> list[Episode]:
        """G episodes of each of ``tasks_per_step`` tasks drawn from the pool with ``rng``."""
        cfg = self.config
        pool = self._task_pool()
        tasks = rng.choice(pool, size=cfg.tasks_per_step, replace=len(pool) < cfg.tasks_per_step)
        specs = [(group, int(task), int(rng.integers(2**31))) for group, task in enumerate(tasks) for _ in range(cfg.group_size)]
        return run_episodes(
            self._env_pool(len(specs)),
            self.generator,
            self.tokenizer,
            specs,
            cfg.max_tokens_per_turn,
            cfg.temperature,
            cfg.top_p,
            PromptWindow(cfg.window_turns, cfg.max_prompt_tokens),
        )

    def dapo_rollout(self, rng: np.random.Generator) -> tuple[list[list[Episode]], list[Episode]]:
        """DAPO's dynamic sampling (appendix B): rollout batches until enough groups vary.

        Draws :meth:`rollout` batches with ``rng`` (so a resumed run draws the same ones) until
        ``tasks_per_step`` groups with reward std >= ``dapo_min_std`` are gathered or
        ``dapo_max_batches`` batches were generated (:func:`credit.dapo_accumulate`). Group ids
        are offset per batch, so two batches' groups of one task stay apart. Returns every
        generated batch and the kept episodes. Unlike verl's DAPO trainer, which raises when the
        batches run out, a short step trains on the groups it found (a warning is logged; none
        found means no update), so a hard task pool slows a run down rather than stopping it.
        """
        cfg = self.config
        generated: list[list[Episode]] = []

        def batches():
            while True:
                episodes = self.rollout(rng)
                for episode in episodes:
                    episode.group += len(generated) * cfg.tasks_per_step
                generated.append(episodes)
                yield [e.reward for e in episodes], [e.group for e in episodes]

        masks = credit.dapo_accumulate(batches(), cfg.tasks_per_step, cfg.dapo_max_batches, cfg.dapo_min_std)
        kept = [e for batch, mask in zip(generated, masks) for e, keep in zip(batch, mask) if keep]
        groups = len({e.group for e in kept})
        if groups < cfg.tasks_per_step:
            _log.warning(
                "DAPO step %d: %d of %d groups with varied rewards after %d batches%s",
                self.step_index + 1,
                groups,
                cfg.tasks_per_step,
                len(generated),
                "" if groups else "; no update",
            )
        return generated, kept

    def update(self, rows: Sequence[Row], rng: np.random.Generator | None = None) -> dict[str, float]:
        """``ppo_epochs`` passes of clipped-loss updates over ``rows``; mean loss terms over mini-batches.

        The rollout policy's log-probabilities (pi_old) are the sampler's own when every row kept
        them and the sampler is the trained model (:meth:`kept_logprobs_usable`); otherwise they
        are recomputed, as the reference's are, without gradients (``old_logprobs_recomputed`` 1
        in the result). Each mini-batch's loss is the token mean over all its tokens; its
        micro-batches hold rows in prompt order (:meth:`_micro_batches`), which changes the sum of
        their gradients only by float rounding.
        """
        torch = require("torch", "hf")
        cfg = self.config
        rng = rng or np.random.default_rng([cfg.seed, self.step_index, 1])
        kept = self.kept_logprobs_usable(rows)
        if not kept and not self._said_recompute:
            self._said_recompute = True
            _log.info("recomputing the rollout policy's log-probs (the sampler kept none, or it is not the trained model)")
        old = [list(r.old_logprobs) for r in rows] if kept else self.row_logprobs(rows, self.model)
        ref = None
        if self.ref_model is not None:
            # While the reference still is the policy, pi_ref = pi_old (both the sampled weights').
            same = kept and self.reuse_reference and _same_weights(self.model, self.ref_model)
            ref = old if same else self.row_logprobs(rows, self.ref_model)
        self.model.train()
        logged: dict[str, list[float]] = {}
        for _ in range(cfg.ppo_epochs):
            order = rng.permutation(len(rows))
            for lo in range(0, len(rows), cfg.mini_batch_rows):
                mini = _by_prompt(rows, order[lo : lo + cfg.mini_batch_rows])
                tokens = sum(len(rows[i].action) for i in mini)
                self.optimizer.zero_grad(set_to_none=True)
                for micro in self._micro_batches(rows, mini):
                    batch = [rows[i] for i in micro]
                    logp, entropy, mask = self._forward(self.model, batch, with_entropy=cfg.entropy_coef > 0)
                    terms = actor_loss(
                        logp,
                        _pad([old[i] for i in micro], mask),
                        _pad([[rows[i].advantage] * len(rows[i].action) for i in micro], mask),
                        mask,
                        ref_logprobs=_pad([ref[i] for i in micro], mask) if ref is not None else None,
                        entropy=entropy,
                        config=cfg.loss_config,
                    )
                    # Each micro-batch's token mean, weighted by its share of the mini-batch's tokens.
                    share = float(mask.sum()) / max(tokens, 1)
                    (terms.loss * share).backward()
                    for name in ("pg_loss", "kl", "entropy", "clip_frac", "dual_clip_frac"):
                        logged.setdefault(name, []).append(getattr(terms, name) * share)
                    logged.setdefault("loss", []).append(float(terms.loss.detach()) * share)
                grad_norm = torch.nn.utils.clip_grad_norm_(self.model.parameters(), cfg.max_grad_norm)
                logged.setdefault("grad_norm", []).append(float(grad_norm))
                self.optimizer.step()
        batches = cfg.ppo_epochs * -(-len(rows) // cfg.mini_batch_rows)
        out = {k: sum(v) / batches for k, v in logged.items() if k != "grad_norm"}
        out["grad_norm"] = float(np.mean(logged.get("grad_norm", [0.0])))
        out["old_logprobs_recomputed"] = float(not kept)
        return out

    def kept_logprobs_usable(self, rows: Sequence[Row]) -> bool:
        """True when every row kept its sampler log-probs and the sampler samples from ``self.model``'s
        weights (its ``follows(model)``: :class:`HFGenerator` on the model itself, or a float32
        :class:`VLLMGenerator` synced to it). A lower-precision vLLM copy's log-probs are not the
        trained model's, and a generator without ``follows`` may hold any weights: those are recomputed.
        """
        follows = getattr(self.generator, "follows", None)
        return (
            self.keep_sampler_logprobs
            and follows is not None
            and bool(follows(self.model))
            and all(r.old_logprobs is not None and len(r.old_logprobs) == len(r.action) for r in rows)
        )

    def row_logprobs(self, rows: Sequence[Row], model: Any) -> list[list[float]]:
        """log pi(action token | prefix) of every row's action tokens under ``model``, no gradients."""
        torch = require("torch", "hf")
        out: list[list[float] | None] = [None] * len(rows)
        was_training = model.training
        model.eval()
        with torch.inference_mode():
            for chunk in self._micro_batches(rows, range(len(rows))):
                logp, _, mask = self._forward(model, [rows[i] for i in chunk], with_entropy=False)
                for j, i in enumerate(chunk):
                    out[i] = logp[j, : int(mask[j].sum())].tolist()
        model.train(was_training)
        return out  # type: ignore[return-value]

    # ------------------------------------------------------------------ checkpoints
    def save(self, path: str | Path | None = None) -> Path:
        """Write the policy (HF format; a LoRA policy's adapter only), optimizer state and step count; returns the folder."""
        torch = require("torch", "hf")
        folder = Path(path) if path is not None else self.out_dir / f"{_CHECKPOINT_PREFIX}{self.step_index}"
        folder.mkdir(parents=True, exist_ok=True)
        self.model.save_pretrained(folder / "model")
        self.tokenizer.save_pretrained(folder / "model")
        torch.save(self.optimizer.state_dict(), folder / "optimizer.pt")
        config = {**asdict(self.config), "task_indices": self.config.task_indices}
        (folder / "trainer_state.json").write_text(json.dumps({"step": self.step_index, "config": config}, indent=1))
        return folder

    def resume(self, path: str | Path) -> None:
        """Load the policy weights, optimizer state and step count of a :meth:`save` folder.

        Lines of ``metrics.jsonl`` for later steps (a run stopped between checkpoints) are dropped.
        """
        torch = require("torch", "hf")
        folder = Path(path)
        if is_lora(self.model):  # the checkpoint holds the adapter only
            load_adapter_weights(self.model, folder / "model")
        else:
            saved = type(self.model).from_pretrained(folder / "model", dtype=next(self.model.parameters()).dtype)
            self.model.load_state_dict(saved.state_dict())
        self.optimizer.load_state_dict(torch.load(folder / "optimizer.pt", weights_only=True))
        self.step_index = json.loads((folder / "trainer_state.json").read_text())["step"]
        self._sync_generator()
        metrics = self.out_dir / "metrics.jsonl"
        if metrics.exists():  # steps logged after this checkpoint will be run again
            kept = [line for line in metrics.read_text().splitlines() if json.loads(line)["step"] <= self.step_index]
            metrics.write_text("".join(line + "\n" for line in kept))

    # ------------------------------------------------------------------ internals
    def _micro_batches(self, rows: Sequence[Row], indices: Sequence[int]) -> list[list[int]]:
        """``indices`` in micro-batches of at most ``micro_batch_rows`` distinct rows with long shared prompt prefixes.

        Rows are ordered by prompt and action ids, so equal rows are neighbours and count once
        (:meth:`_forward` runs each once). With ``share_prefix`` a run longer than a micro-batch is
        cut where neighbouring prompts share the fewest tokens (between two tasks rather than inside
        one), so each micro-batch's shared prefix (:meth:`_forward`) is as long as the batch
        allows; without it the ordered rows are cut every ``micro_batch_rows`` distinct ones.
        """
        order = _by_prompt(rows, indices)
        groups: list[list[int]] = []  # runs of equal rows
        for i in order:
            if groups and rows[groups[-1][0]].prompt == rows[i].prompt and rows[groups[-1][0]].action == rows[i].action:
                groups[-1].append(i)
            else:
                groups.append([i])
        size = self.config.micro_batch_rows
        if not self.share_prefix:
            return [[i for g in groups[lo : lo + size] for i in g] for lo in range(0, len(groups), size)]
        heads = [rows[g[0]].prompt for g in groups]
        common = [_shared_prefix([a, b]) for a, b in zip(heads, heads[1:])]
        out: list[list[int]] = []

        def cut(lo: int, hi: int) -> None:  # groups[lo:hi]; common[k] joins groups[k] and groups[k + 1]
            if hi - lo <= size:
                out.append([i for g in groups[lo:hi] for i in g])
                return
            # The weakest join, nearest the middle on ties.
            joins = range(lo, hi - 1)
            k = min(joins, key=lambda j: (common[j], abs(2 * j + 2 - lo - hi)))
            cut(lo, k + 1)
            cut(k + 1, hi)

        cut(0, len(groups))
        return out

    def _sync_generator(self) -> None:
        if hasattr(self.generator, "load_weights"):
            self.generator.load_weights(self.model)

    def _task_pool(self) -> np.ndarray:
        if self._pool is None:
            if self.config.task_indices is not None:
                self._pool = np.asarray(self.config.task_indices)
            else:
                self._pool = np.arange(self._env_pool(1)[0].unwrapped.num_tasks)
        return self._pool

    def _env_pool(self, n: int) -> list[Any]:
        from ...wrappers import make_env

        cfg = self.config
        while len(self._envs) < n:
            self._envs.append(
                make_env(
                    cfg.env_id,
                    tokenizer=self.tokenizer,
                    meter=self._timed_meter,
                    failure_cost=cfg.failure_cost,
                    max_steps=cfg.max_turns,
                    **cfg.env_kwargs,
                )
            )
        return self._envs[:n]

    def _forward(self, model: Any, rows: Sequence[Row], with_entropy: bool):
        """Action-token log-probs ``[R, A]``, entropies (or None) and mask of rows, right-padded.

        Rows with the same prompt and action run once; their results are repeated (gradients of
        the copies add up in the one computation).
        """
        torch = require("torch", "hf")
        first: dict[tuple[tuple[int, ...], tuple[int, ...]], int] = {}
        distinct: list[Row] = []
        inverse = []
        for r in rows:
            key = (tuple(r.prompt), tuple(r.action))
            if key not in first:
                first[key] = len(distinct)
                distinct.append(r)
            inverse.append(first[key])
        if len(distinct) == len(rows):
            return self._forward_distinct(model, rows, with_entropy)
        logp, entropy, mask = self._forward_distinct(model, distinct, with_entropy)
        index = torch.tensor(inverse, device=mask.device)
        return logp[index], entropy[index] if entropy is not None else None, mask[index]

    def _forward_distinct(self, model: Any, rows: Sequence[Row], with_entropy: bool):
        """:meth:`_forward` of rows that are all different.

        With ``share_prefix`` (on by default, see ``__init__``), the prompt prefix all rows share
        (a task's system prompt and statement) runs once and its keys and values are repeated for
        every row (gradients flow back through the repeat), unless the model checkpoints
        activations (no cache then).
        Every row is right-padded, so the one causal mask (:func:`additive_mask`, given as 4D
        floats for the faster kernel) keeps a row's padding out of its real positions.
        """
        torch = require("torch", "hf")
        device = next(model.parameters()).device
        shared = _shared_prefix([r.prompt for r in rows]) if self.share_prefix and len(rows) > 1 else 0
        if shared < _MIN_SHARED_PREFIX or (model.training and _checkpoints(model)):
            shared = 0
        past: dict[str, Any] = {}
        dtype = next(model.parameters()).dtype
        if shared:
            prefix = torch.tensor([rows[0].prompt[:shared]], device=device)
            with last_layer_at(model):  # only the cache is read
                out = model(
                    input_ids=prefix, attention_mask=additive_mask(torch.ones_like(prefix), shared, dtype), use_cache=True, logits_to_keep=1
                )
            cache = out.cache if getattr(out, "cache", None) is not None else out.past_key_values
            cache.batch_repeat_interleave(len(rows))
            past = {cache_kwarg(model): cache, "use_cache": True}
        seqs = [(r.prompt + r.action)[shared:] for r in rows]
        width = max(len(s) for s in seqs)
        pad = self.tokenizer.pad_token_id or 0
        ids = torch.full((len(rows), width), pad, dtype=torch.long)
        for i, s in enumerate(seqs):
            ids[i, : len(s)] = torch.tensor(s)
        a_width = max(len(r.action) for r in rows)
        # Logits at position p predict token p + 1: the action's tokens sit at len(prompt)...
        index = torch.zeros(len(rows), a_width, dtype=torch.long)
        mask = torch.zeros(len(rows), a_width)
        targets = torch.full((len(rows), a_width), pad, dtype=torch.long)
        for i, r in enumerate(rows):
            n = len(r.action)
            start = len(r.prompt) - 1 - shared
            index[i, :n] = torch.arange(start, start + n)
            mask[i, :n] = 1
            targets[i, :n] = torch.tensor(r.action)
        # Only the positions that predict action tokens go through the LM head: with long
        # multi-turn prompts and a 151k vocabulary, full-sequence logits would not fit.
        keep = torch.unique(index[mask.bool()])
        causal = additive_mask(torch.ones((1, shared + width), device=device), width, dtype)
        # The last layer runs at the action-predicting positions alone where it can (last_layer_at).
        with last_layer_at(model, index.to(device)) as picked_only:
            if picked_only:
                picked = model(input_ids=ids.to(device), attention_mask=causal, logits_to_keep=0, **past).logits
        if not picked_only:
            logits = model(input_ids=ids.to(device), attention_mask=causal, logits_to_keep=keep.to(device), **past).logits
            slot = torch.searchsorted(keep, index).clamp(max=len(keep) - 1)
            picked = logits.gather(1, slot.to(device)[..., None].expand(-1, -1, logits.shape[-1]))
        logp = token_logprobs(picked, targets.to(device))
        entropy = token_entropy(picked) if with_entropy else None
        return logp, entropy, mask.to(device)


def _same_weights(model: Any, other: Any) -> bool:
    """Whether ``other`` holds exactly ``model``'s parameters and buffers (a LoRA reference never does:
    it is the same model with its adapter off)."""
    torch = require("torch", "hf")
    if is_lora(model) or not hasattr(other, "state_dict"):
        return False
    mine, theirs = model.state_dict(), other.state_dict()
    return mine.keys() == theirs.keys() and all(
        a.shape == b.shape and a.dtype == b.dtype and torch.equal(a, b) for a, b in zip(mine.values(), (theirs[k] for k in mine))
    )


def _checkpoints(model: Any) -> bool:
    """Whether ``model`` checkpoints activations (it then runs without a KV cache)."""
    flag = getattr(type(model), "is_activation_checkpointing", None)
    return bool(model.is_activation_checkpointing if flag is not None else getattr(model, "is_gradient_checkpointing", False))


#: Shorter shared prompt prefixes are not worth a separate forward pass.
_MIN_SHARED_PREFIX = 16


def _shared_prefix(prompts: Sequence[Sequence[int]]) -> int:
    """Length of the longest common prefix of ``prompts``, leaving at least one token of each.

    The last prompt token must stay out: its logits predict the action's first token.
    """
    first = np.asarray(prompts[0])
    limit = min(len(p) for p in prompts) - 1
    same = np.ones(max(limit, 0), dtype=bool)
    for p in prompts[1:]:
        same &= np.asarray(p[:limit]) == first[:limit]
    return int(np.argmin(same)) if not same.all() else int(limit if limit > 0 else 0)


def _by_prompt(rows: Sequence[Row], indices: Sequence[int]) -> list[int]:
    """``indices`` ordered by their rows' prompt (then action) ids, so rows sharing a prefix are neighbours."""
    return sorted((int(i) for i in indices), key=lambda i: (rows[i].prompt, rows[i].action))


def _pad(values: Sequence[Sequence[float]], like: Any) -> Any:
    """Right-pad per-row lists to the shape of ``like`` (zeros beyond each row)."""
    torch = require("torch", "hf")
    out = torch.zeros(like.shape, dtype=torch.float32)
    for i, v in enumerate(values):
        out[i, : len(v)] = torch.tensor(v, dtype=torch.float32)
    return out.to(like.device)


def latest_checkpoint(out_dir: str | Path) -> Path | None:
    """The ``checkpoint-<step>`` folder with the highest step in ``out_dir``, or None."""
    folders = [p for p in Path(out_dir).glob(f"{_CHECKPOINT_PREFIX}*") if p.name[len(_CHECKPOINT_PREFIX) :].isdigit()]
    return max(folders, key=lambda p: int(p.name[len(_CHECKPOINT_PREFIX) :]), default=None)
