"""ttg-envs: gymnasium text environments for LLM agents with Token-to-Go progress signals.

``import ttg_envs`` registers the ``ttg/*`` ids with gymnasium; engines load on ``gym.make``.
"""

from gymnasium.envs.registration import register
from gymnasium.envs.registration import registry as _gym_registry

from .core import BranchDivergenceError, Generation, TextEnv, TextSpace
from .info_fields import INFO_FIELDS
from .registry import ENV_SPECS

__version__ = "0.1.0"

for _spec in ENV_SPECS.values():
    if _spec.id not in _gym_registry:
        register(_spec.id, entry_point=_spec.entry_point)
#: A ttg env served by ``ttg serve`` elsewhere: ``gym.make("ttg/Remote-v0", url=..., env_id=...)``.
if "ttg/Remote-v0" not in _gym_registry:
    register("ttg/Remote-v0", entry_point="ttg_envs.serve.remote_env:RemoteEnv")

__all__ = ["BranchDivergenceError", "ENV_SPECS", "Generation", "INFO_FIELDS", "TextEnv", "TextSpace", "__version__"]
