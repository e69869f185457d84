"""Forward passes that run the last decoder layer only at the positions whose output is read.

A pass's cache needs every position's keys and values in every layer, but only some positions'
output of the last layer: a prefill reads the last one (its logits sample the next token), a
training pass the ones that predict the action's tokens. The last layer's keys and values come
from its input, so :func:`last_layer_at` computes them for every position and runs the rest of
the layer (queries, attention, MLP) at those positions alone: the same cache and logits, to float
rounding, for about half a two-layer model's arithmetic (gradients flow as in the full pass).
It applies to the decoder layers it knows (Qwen3's); any other model runs as it is.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Iterator
from typing import Any

__all__ = ["last_layer_at"]


@contextlib.contextmanager
def last_layer_at(model: Any, positions: Any = None) -> Iterator[bool]:
    """Within the block, ``model``'s forward passes (each given a 4D attention mask) run its last
    decoder layer at ``positions`` only (``[B, A]`` indices into each row's input; None: the last
    position), so the output holds those positions in that order; yields whether it applies to ``model``."""
    layers = getattr(getattr(model, "model", None), "layers", None)
    last = layers[-1] if layers is not None and len(layers) else None
    if last is None or type(getattr(last, "self_attn", None)).__name__ != "Qwen3Attention" or not hasattr(last, "input_layernorm"):
        yield False
        return
    last.forward = functools.partial(_at_positions, last, last.forward, positions)  # the instance's, over the class's
    try:
        yield True
    finally:
        del last.forward


def _at_positions(
    layer: Any,
    forward: Any,
    positions: Any,
    hidden_states: Any,
    attention_mask: Any = None,
    position_embeddings: Any = None,
    cache: Any = None,
    **kwargs: Any,
):
    """A Qwen3 decoder layer's forward with its output at ``positions`` only (see :func:`last_layer_at`)."""
    import torch
    from transformers.models.qwen3.modeling_qwen3 import apply_rotary_pos_emb, repeat_kv

    if cache is None:  # transformers 5.19 (the vllm extra's) passes the cache as past_key_values
        cache = kwargs.get("past_key_values", kwargs.get("past_key_value"))
    batch, width = hidden_states.shape[:2]
    if attention_mask is None or attention_mask.dim() != 4:
        raise ValueError("last_layer_at needs a 4D attention mask (rollout.additive_mask)")
    if positions is None:
        positions = torch.full((batch, 1), width - 1, dtype=torch.long, device=hidden_states.device)
    attn = layer.self_attn
    cos, sin = position_embeddings
    normed = layer.input_layernorm(hidden_states)
    shape = (batch, width, -1, attn.head_dim)
    keys = attn.k_norm(attn.k_proj(normed).view(shape)).transpose(1, 2)
    values = attn.v_proj(normed).view(shape).transpose(1, 2)
    _, keys = apply_rotary_pos_emb(keys, keys, cos, sin)
    if cache is not None:
        keys, values = cache.update(keys, values, attn.layer_idx)

    def at(x):  # x[b, positions[b]] for [B, W, ...] (cos and sin may have one row for all)
        index = positions.view(batch, -1, *([1] * (x.dim() - 2))).expand(batch, -1, *x.shape[2:])
        return x.expand(batch, *x.shape[1:]).gather(1, index)

    picked = at(normed)
    queries = attn.q_norm(attn.q_proj(picked).view(batch, picked.shape[1], -1, attn.head_dim)).transpose(1, 2)
    queries, _ = apply_rotary_pos_emb(queries, queries, at(cos), at(sin))
    full = attention_mask.expand(batch, *attention_mask.shape[1:])
    mask = full.gather(2, positions[:, None, :, None].expand(batch, full.shape[1], -1, full.shape[3]))
    groups = attn.num_key_value_groups
    out = torch.nn.functional.scaled_dot_product_attention(
        queries, repeat_kv(keys, groups), repeat_kv(values, groups), attn_mask=mask, scale=attn.scaling
    )
    out = attn.o_proj(out.transpose(1, 2).reshape(batch, picked.shape[1], -1))
    hidden = at(hidden_states) + out
    return hidden + layer.mlp(layer.post_attention_layernorm(hidden))
