"""A prefill that runs the last decoder layer for the last position only.

A prefill's cache needs every position's keys and values in every layer, but only the last
position's output of the last layer (it alone reaches the logits that sample the next token). The
last layer's keys and values come from its input, so :func:`last_position_only` computes them for
the other positions directly and runs the layer itself, attention and MLP, on the last position:
the same cache and last logits, to float rounding, for about half a two-layer model's prefill.
It applies to the decoder layers it knows (Qwen3's); any other model runs as it is.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Iterator
from typing import Any

__all__ = ["last_position_only"]


@contextlib.contextmanager
def last_position_only(model: Any) -> Iterator[bool]:
    """Within the block, ``model``'s forward passes with a cache run its last decoder layer on the
    last position only (the output is then one position long); yields whether it applies to ``model``."""
    layers = getattr(getattr(model, "model", None), "layers", None)
    last = layers[-1] if layers is not None and len(layers) else None
    if last is None or type(getattr(last, "self_attn", None)).__name__ != "Qwen3Attention" or not hasattr(last, "input_layernorm"):
        yield False
        return
    last.forward = functools.partial(_last_position, last, last.forward)  # the instance's, over the class's
    try:
        yield True
    finally:
        del last.forward


def _last_position(
    layer: Any,
    forward: Any,
    hidden_states: Any,
    attention_mask: Any = None,
    position_embeddings: Any = None,
    cache: Any = None,
    **kwargs: Any,
):
    """A Qwen3 decoder layer's forward: the other positions' keys and values into the cache, then
    the layer on the last position."""
    from transformers.models.qwen3.modeling_qwen3 import apply_rotary_pos_emb

    if cache is None or hidden_states.shape[1] < 2:
        return forward(hidden_states, attention_mask=attention_mask, position_embeddings=position_embeddings, cache=cache, **kwargs)
    attn = layer.self_attn
    cos, sin = position_embeddings
    rest = layer.input_layernorm(hidden_states[:, :-1])
    shape = (*rest.shape[:-1], -1, attn.head_dim)
    keys = attn.k_norm(attn.k_proj(rest).view(shape)).transpose(1, 2)
    values = attn.v_proj(rest).view(shape).transpose(1, 2)
    _, keys = apply_rotary_pos_emb(keys, keys, cos[:, :-1], sin[:, :-1])
    cache.update(keys, values, attn.layer_idx)
    mask = attention_mask[..., -1:, :] if attention_mask is not None and attention_mask.dim() == 4 else attention_mask
    position_ids = kwargs.pop("position_ids", None)
    return forward(
        hidden_states[:, -1:],
        attention_mask=mask,
        position_embeddings=(cos[:, -1:], sin[:, -1:]),
        position_ids=position_ids[:, -1:] if position_ids is not None else None,
        cache=cache,
        **kwargs,
    )
