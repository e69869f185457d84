"""Warm-start an actor by SFT on a scripted policy's trajectories, so RL starts from some competence.

The paper starts RL from a model that already solves some tasks. A model built from a config has
none, so :func:`record_demonstrations` plays a scripted policy (e.g. ALFWorld's noisy expert)
through the real env and keeps, for every step, the transcript before the action and the action
text; :func:`demonstration_rows` turns them into training rows with the same prompt the trainer's
rollouts use (chat template over the :class:`~ttg_envs.agents.window.PromptWindow` of the
transcript), and :func:`sft_train` fits the policy to the action tokens (cross-entropy on the
action and its end-of-turn token only).

``command_only`` makes a ReAct policy answer with the bare command: with
``action_format="lenient"`` the env accepts it, and a tiny policy then generates a handful of
tokens per turn instead of a reasoning block it cannot use.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..._optional import require
from ...agents.window import PromptWindow
from ...core import parse_react
from .rollout import chat_prompt_ids

__all__ = ["Demonstration", "DemoStats", "command_only", "demonstration_rows", "record_demonstrations", "sft_train"]


@dataclass
class Demonstration:
    """One recorded step: the transcript before the action, the action text, and the episode's outcome."""

    messages: list[dict[str, Any]]
    action: str
    task_index: int
    success: bool = False


@dataclass
class DemoStats:
    """What the recording saw: episodes, successes, steps and ALFWorld planner timeouts."""

    episodes: int = 0
    successes: int = 0
    steps: int = 0
    planner_timeouts: int = 0
    seconds: float = 0.0
    per_task: dict[int, list[bool]] = field(default_factory=dict)

    @property
    def success_rate(self) -> float:
        """Fraction of recorded episodes that succeeded."""
        return self.successes / max(self.episodes, 1)


def command_only(policy: Callable[[Any], str]) -> Callable[[Any], str]:
    """Wrap a ReAct policy so that it answers with the command inside its ``<action>`` tags only."""

    def act(env: Any) -> str:
        text = policy(env)
        parsed = parse_react(text)
        return parsed.command if parsed.error is None else text

    return act


def record_demonstrations(
    env: Any,
    make_policy: Callable[[int], Callable[[Any], str]],
    task_indices: Sequence[int],
    *,
    episodes_per_task: int = 1,
    seed: int = 0,
    successful_only: bool = False,
    teacher: Callable[[Any], str] | None = None,
) -> tuple[list[Demonstration], DemoStats]:
    """Play ``make_policy(episode_seed)`` on each task ``episodes_per_task`` times; every step is kept.

    ``env`` is any wrapper stack over a ``TextEnv`` (its ``max_steps`` bounds the episode). With
    ``successful_only`` the steps of failed episodes are dropped. ALFWorld's
    ``info["planner_timeout"]`` steps are counted in the stats.

    With a ``teacher``, each step is labelled with ``teacher(env)`` (asked before the behaviour
    policy acts) while the episode follows the behaviour policy: DAgger-style data, the states a
    noisy policy reaches with the teacher's answer in each, so a clone learns to recover from its
    own detours without learning the detours. The stats are the behaviour policy's.
    """
    from ...runner import run_episode

    demos: list[Demonstration] = []
    stats = DemoStats()
    start = time.perf_counter()
    for k in range(episodes_per_task):
        for j, task in enumerate(task_indices):
            # Episode k of task j: this seed rule (not the runner's policy_seed) is the one the
            # committed train_compare runs were recorded with.
            episode_seed = seed + k * len(task_indices) + j
            policy = make_policy(episode_seed)
            steps: list[Demonstration] = []

            def act(env: Any, policy=policy, steps=steps, task=int(task)) -> str:
                messages = copy.deepcopy(env.unwrapped.messages)
                label = teacher(env) if teacher is not None else None
                action = policy(env)
                steps.append(Demonstration(messages, action if label is None else label, task))
                return action

            result = run_episode(env, act, task_index=int(task), seed=episode_seed, policy_name="demonstration")
            stats.planner_timeouts += result.counts.get("planner_timeouts", 0)
            success = result.success
            for step in steps:
                step.success = success
            stats.episodes += 1
            stats.successes += success
            stats.steps += len(steps)
            stats.per_task.setdefault(int(task), []).append(success)
            if success or not successful_only:
                demos.extend(steps)
    stats.seconds = time.perf_counter() - start
    return demos, stats


def demonstration_rows(
    tokenizer: Any, demos: Sequence[Demonstration], window: PromptWindow | None = None
) -> list[tuple[list[int], list[int]]]:
    """``(prompt ids, action ids)`` per demonstration, prompted as the trainer's rollouts are.

    The prompt is the chat template over ``window.select`` of the transcript with the assistant
    generation prompt; the action ids end with the tokenizer's end-of-turn token (``eos``).
    """
    window = window or PromptWindow()
    eos = tokenizer.eos_token_id

    def count(messages: Sequence[dict[str, Any]]) -> int:
        return len(chat_prompt_ids(tokenizer, messages))

    rows = []
    for demo in demos:
        kept = window.select(demo.messages, None if window.max_prompt_tokens is None else count)
        prompt = chat_prompt_ids(tokenizer, kept)
        action = list(tokenizer(demo.action, add_special_tokens=False)["input_ids"]) + [eos]
        rows.append((prompt, action))
    return rows


def sft_train(
    model: Any,
    rows: Sequence[tuple[Sequence[int], Sequence[int]]],
    *,
    epochs: int = 1,
    lr: float = 1e-3,
    batch_rows: int = 16,
    seed: int = 0,
    pad_id: int = 0,
    max_grad_norm: float = 1.0,
) -> list[float]:
    """Fit ``model`` to the action tokens of ``rows`` (token-mean cross-entropy); returns each epoch's mean loss.

    Prompt tokens are context only. Rows are shuffled with ``seed`` every epoch; AdamW with a
    constant learning rate and gradient clipping.
    """
    torch = require("torch", "hf")
    rng = np.random.default_rng(seed)
    torch.manual_seed(seed)
    device = next(model.parameters()).device
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.0)
    model.train()
    losses = []
    for _ in range(epochs):
        order = rng.permutation(len(rows))
        total, tokens = 0.0, 0
        for lo in range(0, len(rows), batch_rows):
            batch = [rows[i] for i in order[lo : lo + batch_rows]]
            width = max(len(p) + len(a) for p, a in batch)
            ids = torch.full((len(batch), width), pad_id, dtype=torch.long)
            labels = torch.full((len(batch), width), -100, dtype=torch.long)
            attention = torch.zeros_like(ids)
            for i, (prompt, action) in enumerate(batch):
                seq = list(prompt) + list(action)
                ids[i, : len(seq)] = torch.tensor(seq)
                attention[i, : len(seq)] = 1
                labels[i, len(prompt) : len(seq)] = torch.tensor(list(action))
            # Only the positions that predict action tokens go through the LM head.
            hidden = model.base_model(input_ids=ids.to(device), attention_mask=attention.to(device)).last_hidden_state
            target = labels[:, 1:].to(device)
            keep = target != -100
            logits = model.get_output_embeddings()(hidden[:, :-1][keep])
            loss = torch.nn.functional.cross_entropy(logits, target[keep], reduction="sum")
            n = int(keep.sum())
            optimizer.zero_grad(set_to_none=True)
            (loss / max(n, 1)).backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), max_grad_norm)
            optimizer.step()
            total += float(loss.detach())
            tokens += n
        losses.append(total / max(tokens, 1))
    model.eval()
    return losses
