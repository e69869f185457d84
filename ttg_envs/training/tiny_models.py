"""Small models built from a config, with tokenizers trained on the fly: CPU meters and tests.

No download is involved: ``tiny_causal_lm`` is a Qwen3 architecture with a byte-level BPE and a
ChatML template, ``tiny_encoder`` a BERT architecture with a WordPiece vocabulary, both trained
on the texts given.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from .._optional import require

CHATML_TEMPLATE = (
    "{% for message in messages %}<|im_start|>{{ message['role'] }}\n{{ message['content'] }}<|im_end|>\n"
    "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


def train_bpe_tokenizer(texts: Iterable[str], vocab_size: int = 2048) -> Any:
    """A byte-level BPE tokenizer (transformers fast tokenizer) with ChatML special tokens."""
    tokenizers = require("tokenizers", "tokens")
    transformers = require("transformers", "hf")
    tok = tokenizers.Tokenizer(tokenizers.models.BPE())
    tok.pre_tokenizer = tokenizers.pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = tokenizers.decoders.ByteLevel()
    specials = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
    trainer = tokenizers.trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=specials,
        initial_alphabet=tokenizers.pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(texts, trainer)
    fast = transformers.PreTrainedTokenizerFast(
        tokenizer_object=tok,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        bos_token=None,
    )
    fast.chat_template = CHATML_TEMPLATE
    return fast


def tiny_causal_lm(tokenizer: Any, *, hidden: int = 128, layers: int = 4, heads: int = 4, seed: int = 0) -> Any:
    """A randomly initialised Qwen3 causal LM sized for a CPU (hidden 128, 4 layers: about 1M parameters)."""
    torch = require("torch", "hf")
    transformers = require("transformers", "hf")
    torch.manual_seed(seed)
    config = transformers.Qwen3Config(
        vocab_size=len(tokenizer),
        hidden_size=hidden,
        intermediate_size=hidden * 3,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        num_key_value_heads=max(1, heads // 2),
        head_dim=hidden // heads,
        max_position_embeddings=8192,
        tie_word_embeddings=True,
        pad_token_id=tokenizer.pad_token_id,
        eos_token_id=tokenizer.eos_token_id,
        bos_token_id=None,
    )
    model = transformers.Qwen3ForCausalLM(config)
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    return model


def train_wordpiece_tokenizer(texts: Iterable[str], vocab_size: int = 2048) -> Any:
    """A lower-casing WordPiece tokenizer (transformers fast tokenizer) with BERT's special tokens."""
    tokenizers = require("tokenizers", "tokens")
    transformers = require("transformers", "hf")
    specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    tok = tokenizers.Tokenizer(tokenizers.models.WordPiece(unk_token="[UNK]"))
    tok.normalizer = tokenizers.normalizers.BertNormalizer(lowercase=True)
    tok.pre_tokenizer = tokenizers.pre_tokenizers.BertPreTokenizer()
    tok.decoder = tokenizers.decoders.WordPiece()
    trainer = tokenizers.trainers.WordPieceTrainer(vocab_size=vocab_size, special_tokens=specials, show_progress=False)
    tok.train_from_iterator(texts, trainer)
    cls, sep = tok.token_to_id("[CLS]"), tok.token_to_id("[SEP]")
    tok.post_processor = tokenizers.processors.TemplateProcessing(
        single="[CLS] $A [SEP]",
        pair="[CLS] $A [SEP] $B [SEP]",
        special_tokens=[("[CLS]", cls), ("[SEP]", sep)],
    )
    return transformers.PreTrainedTokenizerFast(
        tokenizer_object=tok,
        unk_token="[UNK]",
        pad_token="[PAD]",
        cls_token="[CLS]",
        sep_token="[SEP]",
        mask_token="[MASK]",
    )


def tiny_encoder(tokenizer: Any, *, hidden: int = 128, layers: int = 2, heads: int = 4, max_tokens: int = 512, seed: int = 0) -> Any:
    """A randomly initialised BERT encoder sized for a CPU."""
    torch = require("torch", "hf")
    transformers = require("transformers", "hf")
    torch.manual_seed(seed)
    config = transformers.BertConfig(
        vocab_size=len(tokenizer),
        hidden_size=hidden,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        intermediate_size=hidden * 2,
        max_position_embeddings=max_tokens + 2,
        pad_token_id=tokenizer.pad_token_id,
    )
    return transformers.BertModel(config)
