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
    """A lower-casing WordPiece tokenizer (transformers fast tokenizer) with BERT's special tokens.

    The vocabulary is built deterministically: BERT's special tokens, every character seen (as a
    word start and as a ``##`` continuation), then whole words by falling frequency (ties in
    alphabetical order) up to ``vocab_size``; rarer words are spelled in characters. (The
    ``tokenizers`` WordPiece trainer breaks ties between equally frequent merges differently from
    run to run, so two trainings of one meter on the same data used to differ.)
    """
    from collections import Counter

    tokenizers = require("tokenizers", "tokens")
    transformers = require("transformers", "hf")
    specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    normalizer = tokenizers.normalizers.BertNormalizer(lowercase=True)
    pre_tokenizer = tokenizers.pre_tokenizers.BertPreTokenizer()
    words: Counter = Counter()
    for text in texts:
        words.update(w for w, _ in pre_tokenizer.pre_tokenize_str(normalizer.normalize_str(text)))
    alphabet = sorted({c for w in words for c in w})
    vocab = specials + alphabet + [f"##{c}" for c in alphabet]
    known = set(vocab)
    for word, _ in sorted(words.items(), key=lambda kv: (-kv[1], kv[0])):
        if len(vocab) >= vocab_size:
            break
        if word not in known:
            vocab.append(word)
            known.add(word)
    tok = tokenizers.Tokenizer(
        tokenizers.models.WordPiece({t: i for i, t in enumerate(vocab)}, unk_token="[UNK]", max_input_chars_per_word=100)
    )
    tok.normalizer = normalizer
    tok.pre_tokenizer = pre_tokenizer
    tok.decoder = tokenizers.decoders.WordPiece()
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
