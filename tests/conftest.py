"""Shared fixtures: the tiny hand-written ALFWorld game and bundled-split envs."""

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
