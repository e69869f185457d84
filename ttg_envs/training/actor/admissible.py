"""A rollout generator that samples only admissible commands: a structured action interface for tiny policies.

:class:`AdmissibleGenerator` is a :class:`~ttg_envs.training.actor.rollout.TokenGenerator` over a
transformers causal LM whose sampling is masked, token by token, to the tokenizations of the
commands the prompt's current observation lists (ALFWorld's ``Admissible actions: a, b, c`` line),
each followed by the end-of-turn token. A policy that has never seen the env then acts like a
(model-weighted) random admissible policy instead of writing text the env rejects, which lets a
small model built from a config learn from RL on a CPU.

Only sampling changes: the trainer still scores and trains the generated ids with the model's
unmasked log-probabilities (its loss, credit and rollout code are untouched), so the masked-out
mass just never gets sampled; the PPO ratio starts at 1 as with any generator.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any

from .last_layer import last_layer_at
from .rollout import HFGenerator

__all__ = ["AdmissibleGenerator", "admissible_from_text"]

_ADMISSIBLE = re.compile(r"Admissible actions: ([^\n]*)")


def admissible_from_text(text: str) -> list[str]:
    """The commands of the last ``Admissible actions: a, b, c`` line of ``text`` (empty when none)."""
    lines = _ADMISSIBLE.findall(text)
    return [c.strip() for c in lines[-1].split(",") if c.strip()] if lines else []


class AdmissibleGenerator(HFGenerator):
    """Samples one admissible command per prompt (token ids in, generated ids incl. end-of-turn out).

    Args:
        model, tokenizer: the policy (a transformers causal LM) and its tokenizer.
        commands: reads the admissible commands from a prompt's decoded text (default
            :func:`admissible_from_text`); a prompt with none is sampled unmasked.

    Sampling draws from torch's global RNG (the trainer seeds it per step); ``temperature`` 0 is
    greedy. ``top_p`` is applied by transformers after the mask.
    """

    def __init__(self, model: Any, tokenizer: Any, commands: Callable[[str], list[str]] = admissible_from_text):
        self.model = model
        self.tokenizer = tokenizer
        self.commands = commands
        self.eos = tokenizer.eos_token_id
        self.stop_ids = {self.eos}
        self.pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else self.eos
        self._ids: dict[str, tuple[int, ...]] = {}

    def _command_ids(self, command: str) -> tuple[int, ...]:
        ids = self._ids.get(command)
        if ids is None:
            ids = self._ids[command] = tuple(self.tokenizer(command, add_special_tokens=False)["input_ids"]) + (self.eos,)
        return ids

    def _trie(self, prompt: Sequence[int], head: int = 0) -> dict | None:
        commands = []
        if head and self.commands is admissible_from_text:
            # The last list is in the current observation, after the head: decoding the rest finds it.
            commands = admissible_from_text(self.tokenizer.decode(list(prompt[head:]), skip_special_tokens=False))
        if not commands:
            commands = self.commands(self.tokenizer.decode(list(prompt), skip_special_tokens=False))
        if not commands:
            return None
        root: dict = {}
        for command in commands:
            node = root
            for token in self._command_ids(command):
                node = node.setdefault(token, {})
        return root

    #: :func:`~ttg_envs.training.actor.rollout.run_episodes` passes each prompt's head length.
    shares_heads = True
    #: Rows per prefill bucket (a longer batch is prefilled in length-sorted buckets).
    prefill_rows = 32

    def generate_with_logprobs(
        self,
        prompts: Sequence[Sequence[int]],
        max_new_tokens: int,
        temperature: float,
        top_p: float,
        heads: Sequence[int] | None = None,
        head_cache: dict | None = None,
    ) -> tuple[list[list[int]], list[list[float]]]:
        """Sample one admissible command per prompt; also log pi(token | prefix) of each token under
        the model's raw logits (before the mask, temperature and top-p: what the trainer scores).

        One decoding loop over the batch with a KV cache: the prompts run once (left-padded), then
        one token per live row per step, each row's allowed tokens read from its command trie.

        ``heads[i]``: the length of a prefix of ``prompts[i]`` that other prompts share (a task's
        system prompt and statement; 0: none). Each distinct head runs once and its keys and values
        are kept in ``head_cache`` (a dict the caller owns; it must not outlive the weights), so
        the batch's prefill covers only the rest of each prompt. The rows' log-probs equal the
        unshared pass's to float rounding. Equal prompts (rollouts of a task that have acted alike
        so far) are prefilled once and decode as separate rows from copies of that cache.
        """
        import torch

        from .rollout import cache_kwarg

        model, batch = self.model, len(prompts)
        device = next(model.parameters()).device
        heads = [h if _MIN_HEAD <= h < len(p) else 0 for h, p in zip(heads or [0] * batch, prompts, strict=True)]
        tries: dict[tuple[int, ...], dict | None] = {}
        nodes = [tries[k] if (k := tuple(p)) in tries else tries.setdefault(k, self._trie(p, h)) for p, h in zip(prompts, heads)]
        tokens: list[list[int]] = [[] for _ in range(batch)]
        logps: list[list[float]] = [[] for _ in range(batch)]
        done = [False] * batch
        was_training = model.training
        model.eval()
        with torch.inference_mode():
            head_cache = {} if head_cache is None else head_cache
            first: dict[tuple[tuple[int, ...], int], int] = {}
            distinct: list[int] = []  # the first row of each distinct prompt
            inverse = []
            for i, (p, h) in enumerate(zip(prompts, heads)):
                key = (tuple(p), h)
                if key not in first:
                    first[key] = len(distinct)
                    distinct.append(i)
                inverse.append(first[key])
            # Long batches prefill in buckets of similar length (sorted), so a short prompt is not
            # padded to the longest one of the batch; the buckets' caches then join for decoding.
            n = len(distinct)
            if n <= self.prefill_rows:
                buckets = [list(range(n))]
            else:
                order = sorted(range(n), key=lambda j: len(prompts[distinct[j]]) - heads[distinct[j]])
                buckets = [order[lo : lo + self.prefill_rows] for lo in range(0, n, self.prefill_rows)]
            parts = [self._prefill([prompts[distinct[j]] for j in b], [heads[distinct[j]] for j in b], head_cache, device) for b in buckets]
            cache, attention, logits = parts[0] if len(parts) == 1 else _join_prefills(parts, buckets, n, model.config)
            if n < batch:
                cache, attention, logits = _repeat_rows(cache, attention, logits, inverse, model.config)
            last = torch.tensor([len(p) - 1 for p in prompts], device=device).view(batch, 1)
            for _ in range(max_new_tokens):
                raw = torch.log_softmax(logits, dim=-1)
                allowed = torch.zeros_like(logits, dtype=torch.bool)
                pairs_rows: list[int] = []
                pairs_cols: list[int] = []
                for row, node in enumerate(nodes):
                    if done[row]:
                        options = [self.pad_id]
                    elif node is None:  # no admissible list in the prompt: sample unmasked
                        allowed[row] = True
                        continue
                    else:
                        options = list(node) or [self.pad_id]
                    pairs_rows += [row] * len(options)
                    pairs_cols += options
                allowed[pairs_rows, pairs_cols] = True
                chosen = _sample(logits.masked_fill(~allowed, float("-inf")), temperature, top_p).tolist()
                for row, token in enumerate(chosen):
                    if done[row]:
                        continue
                    tokens[row].append(token)
                    logps[row].append(float(raw[row, token]))
                    if nodes[row] is not None:
                        nodes[row] = nodes[row].get(token, {})
                    done[row] = token in self.stop_ids
                if all(done):
                    break
                step = torch.tensor(chosen, device=device).view(batch, 1)
                attention = torch.cat([attention, attention.new_ones(batch, 1)], dim=1)
                last = last + 1
                out = model(input_ids=step, attention_mask=attention, position_ids=last, use_cache=True, **{cache_kwarg(model): cache})
                logits = out.logits[:, -1].float()
        model.train(was_training)
        return tokens, logps

    def _prefill(self, prompts, heads: list[int], head_cache: dict, device):
        """Run ``prompts`` (their heads from ``head_cache``, the rest left-padded): the KV cache,
        its attention mask and each row's last logits."""
        import torch

        from .rollout import additive_mask, cache_kwarg

        model = self.model
        past, head_mask = self._head_kv(prompts, heads, head_cache, device)
        rests = [p[h:] for p, h in zip(prompts, heads)]
        width = max(len(r) for r in rests)
        ids = torch.full((len(prompts), width), self.pad_id, dtype=torch.long)
        attention = torch.zeros_like(ids)
        for row, rest in enumerate(rests):
            ids[row, width - len(rest) :] = torch.tensor(list(rest))
            attention[row, width - len(rest) :] = 1
        ids, attention = ids.to(device), attention.to(device)
        positions = (attention.cumsum(-1) - 1).clamp(min=0) + torch.tensor(heads, device=device)[:, None]
        kwargs = {}
        if past is not None:
            attention = torch.cat([head_mask, attention], dim=1)
            kwargs = {cache_kwarg(model): past}
        mask = additive_mask(attention, width, next(model.parameters()).dtype)
        with last_layer_at(model):
            out = model(input_ids=ids, attention_mask=mask, position_ids=positions, use_cache=True, logits_to_keep=1, **kwargs)
        cache = out.cache if getattr(out, "cache", None) is not None else out.past_key_values
        return cache, attention, out.logits[:, -1].float()

    def _head_kv(self, prompts, heads: list[int], head_cache: dict, device):
        """A KV cache holding each row's head (right-aligned, zero-padded to the longest) and its
        attention mask, or ``(None, None)`` when no row has one."""
        import torch
        from transformers import DynamicCache

        longest = max(heads)
        if not longest:
            return None, None
        rows = []
        for prompt, h in zip(prompts, heads):
            if not h:
                rows.append(None)
                continue
            key = tuple(prompt[:h])
            if key not in head_cache:
                out = self.model(input_ids=torch.tensor([key], device=device), use_cache=True, logits_to_keep=1)
                cache = out.cache if getattr(out, "cache", None) is not None else out.past_key_values
                head_cache[key] = [(layer.keys, layer.values) for layer in cache.layers]
            rows.append(head_cache[key])
        template = next(r for r in rows if r is not None)
        mask = torch.zeros((len(prompts), longest), dtype=torch.long, device=device)
        for row, h in enumerate(heads):
            mask[row, longest - h :] = 1
        seeded = DynamicCache(config=self.model.config)
        for layer, (k0, v0) in enumerate(template):
            keys = k0.new_zeros((len(prompts), k0.shape[1], longest, k0.shape[3]))
            values = v0.new_zeros((len(prompts), v0.shape[1], longest, v0.shape[3]))
            for row, kv in enumerate(rows):
                if kv is not None:
                    h = kv[layer][0].shape[2]
                    keys[row, :, longest - h :] = kv[layer][0][0]
                    values[row, :, longest - h :] = kv[layer][1][0]
            seeded.update(keys, values, layer)
        return seeded, mask


#: Shorter heads are not worth a separate pass.
_MIN_HEAD = 16


def _join_prefills(parts, buckets: list[list[int]], batch: int, config):
    """One KV cache, attention mask and logits for the whole batch from its buckets' prefills
    (each row's keys and values right-aligned, zero-padded and masked out on the left)."""
    import torch
    from transformers import DynamicCache

    width = max(mask.shape[1] for _, mask, _ in parts)
    first_mask, first_logits = parts[0][1], parts[0][2]
    attention = first_mask.new_zeros((batch, width))
    logits = first_logits.new_empty((batch, first_logits.shape[-1]))
    joined = DynamicCache(config=config)
    for layer in range(len(parts[0][0].layers)):
        k0 = parts[0][0].layers[layer].keys
        keys = k0.new_zeros((batch, k0.shape[1], width, k0.shape[3]))
        values = keys.clone()
        for (cache, mask, _), rows in zip(parts, buckets):
            index = torch.tensor(rows, device=keys.device)
            keys[index, :, width - mask.shape[1] :] = cache.layers[layer].keys
            values[index, :, width - mask.shape[1] :] = cache.layers[layer].values
        joined.update(keys, values, layer)
    for (_, mask, part_logits), rows in zip(parts, buckets):
        index = torch.tensor(rows, device=attention.device)
        attention[index, width - mask.shape[1] :] = mask
        logits[index] = part_logits
    return joined, attention, logits


def _repeat_rows(cache, attention, logits, index: list[int], config):
    """The prefill of rows ``index`` (rows of a distinct prompts' prefill, repeated where prompts are equal)."""
    import torch
    from transformers import DynamicCache

    rows = torch.tensor(index, device=attention.device)
    repeated = DynamicCache(config=config)
    for layer, kv in enumerate(cache.layers):
        repeated.update(kv.keys[rows], kv.values[rows], layer)
    return repeated, attention[rows], logits[rows]


def _sample(scores, temperature: float, top_p: float):
    """One token per row from masked logits: greedy at temperature 0, else softmax(scores / T) within top-p."""
    import torch

    if temperature <= 0:
        return scores.argmax(-1)
    scores = scores / temperature
    if top_p < 1.0:
        ordered, order = scores.sort(dim=-1, descending=True)
        cumulative = torch.softmax(ordered, dim=-1).cumsum(-1)
        drop = cumulative - torch.softmax(ordered, dim=-1) >= top_p  # keep the smallest set reaching top_p
        scores = scores.scatter(-1, order, ordered.masked_fill(drop, float("-inf")))
    return torch.multinomial(torch.softmax(scores, dim=-1), 1).squeeze(-1)
