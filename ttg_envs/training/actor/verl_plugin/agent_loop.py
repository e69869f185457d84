"""``ttg_agent``: a verl multi-turn agent loop that plays one ``ttg/*`` episode per batch row.

Each dataset row names its task in ``extra_info["ttg"]`` (see :mod:`.dataset`). The loop builds
the env stack with :func:`ttg_envs.wrappers.make_env` (``ProgressMeterWrapper`` included when
``TTG_METER`` holds a ``load_meter`` spec, e.g. an OpenAI-compatible meter server shared by the
cluster), then per turn:
the rollout server samples the action from the running token sequence, the env steps it as a
``Generation``, and verl's Continuous Token builder appends the new observation messages. The row's
response holds every turn; ``response_mask`` marks assistant tokens and ``ttg_token_step`` the
action each belongs to. The ``ttg_*`` fields of :func:`.fields.episode_fields` go to
``extra_fields``, which verl copies into ``non_tensor_batch``, with ``ttg_meter_s`` (the seconds the
episode spent in the meter, logged as ``ttg/meter_s/mean``); the reward is the episode's return.
"""

from __future__ import annotations

import json
import os
from typing import Any
from uuid import uuid4

from verl.experimental.agent_loop.agent_loop import (
    AgentLoopBase,
    AgentLoopOutput,
    register,
)

from ....core import Generation
from ....meters.timed import TimedMeter
from ....wrappers import make_env
from ....wrappers.stack import cached_meter
from .fields import episode_fields, task_limits
from .metrics import METER_SECONDS

__all__ = ["TTGAgentLoop"]


def _kwargs(value: str | dict[str, Any] | None) -> dict[str, Any]:
    """Env kwargs from a dataset row: a JSON string (parquet rows) or a dict."""
    return json.loads(value) if isinstance(value, str) else dict(value or {})


@register("ttg_agent")
class TTGAgentLoop(AgentLoopBase):
    """Plays ``extra_info["ttg"]``'s task; max turns and tokens per turn default to paper table 4."""

    async def run(self, sampling_params: dict[str, Any], **kwargs: Any) -> AgentLoopOutput:
        """One episode as one row (see the module docstring)."""
        task = dict(kwargs["extra_info"]["ttg"])
        limits = task_limits(task)
        response_length = self.rollout_config.response_length
        spec = os.environ.get("TTG_METER") or None
        meter = TimedMeter(cached_meter(spec)) if spec else None
        env = await self.loop.run_in_executor(
            None,
            lambda: make_env(
                task["env_id"],
                tokenizer=self.tokenizer,
                meter=meter,
                failure_cost=limits.failure_cost,
                max_steps=limits.max_turns,
                **_kwargs(task.get("env_kwargs")),
            ),
        )
        _, info = await self.loop.run_in_executor(
            None, lambda: env.reset(seed=int(task.get("seed", 0)), options={"task_index": int(task["task_index"])})
        )
        infos = [info]
        messages = [dict(m) for m in env.unwrapped.messages]
        prompt_ids = await self.ct_build_initial_tokens(messages)
        runtime, mask, logprobs, token_step = list(prompt_ids), [], [], []
        reward, params = 0.0, {**sampling_params, "max_tokens": limits.max_tokens_per_turn}
        # The env's own limit ends the episode (BFCL's official scoring may raise it above max_turns).
        for turn in range(getattr(env.unwrapped, "max_steps", None) or limits.max_turns):
            out = await self.server_manager.generate(request_id=uuid4().hex, prompt_ids=runtime, sampling_params=params)
            merged, mask, logprobs = await self.ct_merge_assistant_token(
                runtime,
                out.token_ids,
                mask,
                logprobs if out.log_probs else None,
                assistant_logprobs=out.log_probs or None,
            )
            logprobs = logprobs or []
            runtime = merged.token_ids
            token_step += [turn if m else -1 for m in mask[len(token_step) :]]
            text = self.tokenizer.decode(out.token_ids, skip_special_tokens=True)
            _, r, terminated, truncated, info = await self.loop.run_in_executor(None, env.step, Generation(text, list(out.token_ids)))
            infos.append(info)
            reward += float(r)
            if terminated or truncated or len(mask) >= response_length:
                break
            previous, messages = messages, [dict(m) for m in env.unwrapped.messages]
            merged, mask, logprobs = await self.ct_merge_context_msg(previous, messages, runtime, mask, logprobs or None)
            runtime = merged.token_ids
            token_step += [-1] * (len(mask) - len(token_step))
        env.close()
        prompt = runtime[: len(runtime) - len(mask)]
        fields = episode_fields(infos, token_step[:response_length], limits.failure_cost)
        fields[METER_SECONDS] = meter.seconds if meter is not None else 0.0
        return AgentLoopOutput(
            prompt_ids=prompt,
            response_ids=runtime[len(prompt) :][:response_length],
            response_mask=mask[:response_length],
            response_logprobs=logprobs[:response_length] if logprobs else None,
            reward_score=reward,
            num_turns=2 * len(infos) - 1,
            metrics={},
            extra_fields=fields,
        )
