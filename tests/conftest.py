"""Shared fixtures: the tiny hand-written ALFWorld game, bundled-split envs, one torch thread."""

from __future__ import annotations

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
