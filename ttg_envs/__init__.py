"""ttg-envs: gymnasium text environments for LLM agents with Token-to-Go progress signals.

``import ttg_envs`` registers the ``ttg/*`` ids with gymnasium; engines load on ``gym.make``.
"""

from gymnasium.envs.registration import register, registry

from .core import BranchDivergenceError, Generation, TextEnv, TextSpace
from .envs import ENV_IDS
from .info_fields import INFO_FIELDS

__version__ = "0.1.0"

for _env_id, _entry_point in ENV_IDS.items():
    if _env_id not in registry:
        register(_env_id, entry_point=_entry_point)

__all__ = ["BranchDivergenceError", "ENV_IDS", "Generation", "INFO_FIELDS", "TextEnv", "TextSpace", "__version__"]
