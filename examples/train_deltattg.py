"""A minimal DeltaTTG training loop written against the public info fields (paper Algorithm 1).

It shows what ``ttg train`` does in one page: G rollouts per task through gym.make + TokenCounter
+ ProgressMeterWrapper, group advantages, per-step weights from the wrapper's ``ttg_*`` fields,
then a clipped-loss update. Defaults run on a CPU in about a minute with a tiny random Qwen3 and a
rule-based meter; pass ``--model Qwen/Qwen3-4B --meter <your meter>`` for the real thing.

    python examples/train_deltattg.py --steps 2
"""

import argparse

import gymnasium as gym
import numpy as np
import torch

import ttg_envs  # noqa: F401  (registers the ttg/* ids)
from ttg_envs import credit, registry
from ttg_envs.core import Generation
from ttg_envs.meters import load_meter
from ttg_envs.training.actor.advantages import no_signal_warning
from ttg_envs.training.actor.launch import turns_meter
from ttg_envs.training.actor.loss import ActorLossConfig, actor_loss, token_logprobs
from ttg_envs.training.tiny_models import tiny_causal_lm, train_bpe_tokenizer
from ttg_envs.wrappers import ProgressMeterWrapper, TokenCounter

p = argparse.ArgumentParser()
p.add_argument("--env", default="ttg/ALFWorld-v0")
p.add_argument("--split", default="valid_seen")
p.add_argument("--model", default="tiny")
p.add_argument("--meter", default="turns")
p.add_argument("--steps", type=int, default=2)
p.add_argument("--group-size", type=int, default=4)
p.add_argument("--max-turns", type=int, default=3)
p.add_argument("--max-tokens", type=int, default=16)
args = p.parse_args()
torch.manual_seed(0)

if args.model == "tiny":
    probe = gym.make(args.env, split=args.split)
    first_obs, _ = probe.reset(seed=0)
    tokenizer = train_bpe_tokenizer([probe.unwrapped.system_prompt, first_obs], vocab_size=512)
    model = tiny_causal_lm(tokenizer, hidden=64, layers=2)
else:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(args.model)
    model = AutoModelForCausalLM.from_pretrained(args.model)
meter = turns_meter(args.max_tokens, args.max_turns) if args.meter == "turns" else load_meter(args.meter)
failure_cost = registry.failure_cost(args.env)  # C of eq. 7 for the env (table 4)
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)


def prompt_ids(messages):
    text = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    return tokenizer(text, add_special_tokens=False)["input_ids"]


def play(env, task_index, seed):
    """One episode: the per-turn (prompt, action) token ids and the info dicts of every state."""
    _, info = env.reset(seed=seed, options={"task_index": task_index})
    turns, infos, reward = [], [info], 0.0
    while True:
        prompt = prompt_ids(env.unwrapped.messages)
        with torch.no_grad():
            out = model.generate(
                torch.tensor([prompt]), max_new_tokens=args.max_tokens, do_sample=True, pad_token_id=tokenizer.pad_token_id
            )
        action = out[0, len(prompt) :].tolist()
        text = tokenizer.decode(action, skip_special_tokens=True)
        _, r, terminated, truncated, info = env.step(Generation(text, action))
        turns.append((prompt, action))
        infos.append(info)
        reward += r
        if terminated or truncated:
            return turns, infos, reward


for step in range(args.steps):
    env = ProgressMeterWrapper(
        TokenCounter(gym.make(args.env, split=args.split, max_steps=args.max_turns), tokenizer=tokenizer), meter, failure_cost=failure_cost
    )
    episodes = [play(env, task_index=step, seed=g) for g in range(args.group_size)]  # one task, G rollouts

    # Group advantages over step-expanded statistics (appendix D.3), then per-step weights (eqs 7-11)
    # from the meter fields of the states h_0..h_{T-1} and TokenCounter's per-action token counts.
    rewards = [reward for _, _, reward in episodes]
    advantages = credit.group_advantages(rewards, [len(turns) for turns, _, _ in episodes])
    rows = []
    for (turns, infos, _), a in zip(episodes, advantages):
        states = infos[: len(turns)]
        weights = credit.step_weights(
            a,
            can_complete=[i["ttg_can_complete"] for i in states],
            remaining=[np.nan if i["ttg"] is None else i["ttg"] for i in states],
            success=infos[-1]["success"],
            n_tokens=[i["assistant_tokens"] for i in infos[1:]],
            failure_cost=failure_cost,
        )
        rows += [(prompt, action, a * w) for (prompt, action), w in zip(turns, weights)]

    # One clipped-loss update, one row per turn; the batch is on-policy, so pi_old = pi (ratio 1).
    optimizer.zero_grad()
    tokens = sum(len(action) for _, action, _ in rows)
    for prompt, action, adv in rows:
        ids = torch.tensor([prompt + action])
        logits = model(ids).logits[:, len(prompt) - 1 : -1]
        logp = token_logprobs(logits, torch.tensor([action]))
        terms = actor_loss(
            logp, logp.detach(), torch.full_like(logp, adv), torch.ones_like(logp), config=ActorLossConfig(kl_coef=0.0, entropy_coef=0.0)
        )
        (terms.loss * len(action) / tokens).backward()  # token mean over the whole batch
    optimizer.step()
    print(f"step {step + 1}: rewards {rewards}, step advantages {[round(float(r[2]), 3) for r in rows]}")
    if warning := no_signal_warning(rewards, [0] * len(rewards), [r[2] for r in rows]):
        print(f"warning: step {step + 1}: {warning}")
