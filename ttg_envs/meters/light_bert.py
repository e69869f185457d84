"""A BERT encoder and its tokenizer for meter inference on torch and ``tokenizers`` alone.

Importing transformers' model code is slow (it pulls in torch's compiler and distributed
packages) for a backbone that is a few small matrix products, so
:meth:`~ttg_envs.meters.encoder.EncoderMeter.from_pretrained` reads a saved BERT backbone with this
module instead: the same weights (``model.safetensors``, transformers' key names), the same
``tokenizer.json``, the same outputs (``tests/test_ready_meters.py`` checks both against
transformers). Inference only: training builds transformers' own model.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from .._optional import require

__all__ = ["LightTokenizer", "can_load", "load_backbone"]


def can_load(folder: str | Path) -> bool:
    """Whether ``folder`` holds a BERT backbone (absolute positions, exact GELU) this module reads."""
    folder = Path(folder)
    try:
        config = json.loads((folder / "config.json").read_text())
    except (OSError, ValueError):
        return False
    return (
        config.get("model_type") == "bert"
        and config.get("hidden_act", "gelu") == "gelu"
        and config.get("position_embedding_type", "absolute") == "absolute"
        and (folder / "model.safetensors").is_file()
        and (folder / "tokenizer.json").is_file()
    )


def load_backbone(folder: str | Path) -> tuple[Any, LightTokenizer]:
    """``(model, tokenizer)`` of the BERT backbone in ``folder`` (see :func:`can_load`)."""
    folder = Path(folder)
    config = json.loads((folder / "config.json").read_text())
    model = _bert_class()(config)
    state = require("safetensors.torch", "hf").load_file(str(folder / "model.safetensors"))
    # the pooler is not read; older transformers saved the position ids buffer with the weights (MiniLM's package)
    model.load_state_dict({k: v for k, v in state.items() if not k.startswith("pooler.") and k != "embeddings.position_ids"})
    model.eval()
    return model, LightTokenizer(folder / "tokenizer.json")


class _Batch(dict):
    """Tokenizer output: a dict of tensors with ``.to(device)``, as transformers' ``BatchEncoding``."""

    def to(self, device: Any) -> _Batch:
        return _Batch({k: v.to(device) if hasattr(v, "to") else v for k, v in self.items()})


class LightTokenizer:
    """The two calls :class:`~ttg_envs.meters.encoder.EncoderMeter` makes of a transformers tokenizer,
    on a ``tokenizers.Tokenizer`` read from ``tokenizer.json``."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        # The files as read now: a meter is loaded through a descriptor that is closed afterwards
        # (``_io.load_folder``), so a later save cannot copy them from ``path``.
        self._files = {"tokenizer.json": self.path.read_bytes()}
        beside = self.path.parent / "tokenizer_config.json"
        if beside.is_file():
            self._files[beside.name] = beside.read_bytes()
        self._tok = require("tokenizers", "hf").Tokenizer.from_str(self._files["tokenizer.json"].decode())
        self._tok.no_truncation()
        self._tok.no_padding()
        self.pad_token_id = int(self._tok.token_to_id("[PAD]") or 0)

    def __call__(
        self,
        text: Any,
        text_pair: Any = None,
        *,
        add_special_tokens: bool = True,
        truncation: bool | str = False,
        max_length: int | None = None,
        padding: bool = False,
        return_offsets_mapping: bool = False,
        return_tensors: str | None = None,
    ) -> Any:
        tok = self._tok
        if truncation and max_length is not None:
            strategy = "only_second" if truncation == "only_second" else "longest_first"
            tok.enable_truncation(max_length, strategy=strategy)
        else:
            tok.no_truncation()
        if padding:
            tok.enable_padding(pad_id=self.pad_token_id, pad_token="[PAD]")
        else:
            tok.no_padding()
        if isinstance(text, str):
            enc = tok.encode(text, text_pair, add_special_tokens=add_special_tokens)
            out = {"input_ids": enc.ids, "attention_mask": enc.attention_mask}
            if return_offsets_mapping:
                out["offset_mapping"] = [tuple(o) for o in enc.offsets]
            return out
        inputs = list(zip(text, text_pair)) if text_pair is not None else list(text)
        encs = tok.encode_batch(inputs, add_special_tokens=add_special_tokens)
        torch = require("torch", "hf")
        return _Batch(
            input_ids=torch.tensor([e.ids for e in encs], dtype=torch.long),
            attention_mask=torch.tensor([e.attention_mask for e in encs], dtype=torch.long),
        )

    def save_pretrained(self, path: str | Path) -> None:
        """Write ``tokenizer.json`` (and the ``tokenizer_config.json`` that was beside it) to ``path``."""
        Path(path).mkdir(parents=True, exist_ok=True)
        for name, data in self._files.items():
            (Path(path) / name).write_bytes(data)


_CLASS: Any = None


def _bert_class() -> Any:
    """The module class (built once, when torch is first needed)."""
    global _CLASS
    if _CLASS is not None:
        return _CLASS
    torch = require("torch", "hf")
    nn, F = torch.nn, torch.nn.functional

    class Layer(nn.Module):
        def __init__(self, width: int, inner: int, heads: int, eps: float):
            super().__init__()
            self.heads = heads
            self.attention = nn.Module()
            self.attention.self = nn.Module()
            self.attention.self.query = nn.Linear(width, width)
            self.attention.self.key = nn.Linear(width, width)
            self.attention.self.value = nn.Linear(width, width)
            self.attention.output = nn.Module()
            self.attention.output.dense = nn.Linear(width, width)
            self.attention.output.LayerNorm = nn.LayerNorm(width, eps=eps)
            self.intermediate = nn.Module()
            self.intermediate.dense = nn.Linear(width, inner)
            self.output = nn.Module()
            self.output.dense = nn.Linear(inner, width)
            self.output.LayerNorm = nn.LayerNorm(width, eps=eps)

        def forward(self, x, mask):
            b, s, w = x.shape
            a = self.attention.self

            def split(t):
                return t.view(b, s, self.heads, w // self.heads).transpose(1, 2)

            q, k, v = split(a.query(x)), split(a.key(x)), split(a.value(x))
            scores = q @ k.transpose(-1, -2) / math.sqrt(w // self.heads) + mask
            context = (scores.softmax(-1) @ v).transpose(1, 2).reshape(b, s, w)
            x = self.attention.output.LayerNorm(self.attention.output.dense(context) + x)
            inner = F.gelu(self.intermediate.dense(x))
            return self.output.LayerNorm(self.output.dense(inner) + x)

    class LightBert(nn.Module):
        """BERT's encoder stack (no pooler) with transformers' parameter names; ``last_hidden_state`` out."""

        def __init__(self, config: dict[str, Any]):
            super().__init__()
            width, eps = config["hidden_size"], config.get("layer_norm_eps", 1e-12)
            self.config = SimpleNamespace(**config)
            self.embeddings = nn.Module()
            self.embeddings.word_embeddings = nn.Embedding(config["vocab_size"], width)
            self.embeddings.position_embeddings = nn.Embedding(config["max_position_embeddings"], width)
            self.embeddings.token_type_embeddings = nn.Embedding(config.get("type_vocab_size", 2), width)
            self.embeddings.LayerNorm = nn.LayerNorm(width, eps=eps)
            self.encoder = nn.Module()
            self.encoder.layer = nn.ModuleList(
                Layer(width, config["intermediate_size"], config["num_attention_heads"], eps) for _ in range(config["num_hidden_layers"])
            )

        def forward(self, input_ids, attention_mask=None):
            e = self.embeddings
            positions = torch.arange(input_ids.shape[1], device=input_ids.device)
            x = e.word_embeddings(input_ids) + e.position_embeddings(positions)[None] + e.token_type_embeddings.weight[0]
            x = e.LayerNorm(x)
            if attention_mask is None:
                attention_mask = torch.ones_like(input_ids)
            mask = (1.0 - attention_mask[:, None, None, :].to(x.dtype)) * torch.finfo(x.dtype).min
            for layer in self.encoder.layer:
                x = layer(x, mask)
            return SimpleNamespace(last_hidden_state=x)

        def save_pretrained(self, path: str | Path) -> None:
            """Write ``config.json`` and ``model.safetensors`` as transformers would (no pooler)."""
            Path(path).mkdir(parents=True, exist_ok=True)
            (Path(path) / "config.json").write_text(json.dumps(vars(self.config), indent=2))
            state = {k: v.detach().cpu().contiguous() for k, v in self.state_dict().items()}
            require("safetensors.torch", "hf").save_file(state, str(Path(path) / "model.safetensors"), metadata={"format": "pt"})

    _CLASS = LightBert
    return _CLASS
