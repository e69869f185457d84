"""Actor-training hyperparameters per environment, as paper table 4 (appendix C.3) gives them for Qwen3-4B."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["PAPER_SETTINGS", "EnvSettings", "paper_settings"]


@dataclass(frozen=True)
class EnvSettings:
    """Table 4's common and DeltaTTG settings for one environment (Qwen3-4B column).

    ``batch_size`` counts tasks per update; each task gets ``group_size`` rollouts.
    """

    lr: float
    batch_size: int
    group_size: int
    max_turns: int
    max_tokens_per_turn: int
    kl_coef: float
    entropy_coef: float
    failure_cost: float
    temperature: float = 1.0
    top_p: float = 1.0
    ppo_epochs: int = 1
    rho: float = 0.2
    cap: float = 5.0


_ALFWORLD = EnvSettings(1e-6, 16, 8, 50, 1024, 0.01, 0.001, 16384)
_PAPERSEARCHQA = EnvSettings(1e-6, 512, 5, 6, 1024, 0.001, 0.0, 6144)
_AWM = EnvSettings(1e-6, 16, 16, 20, 2048, 0.001, 0.0, 16384)

#: Table 4 per registered env id. Table 4 has no BFCL or tau2 column: those tool-use envs take the
#: AgentWorldModel settings, the paper's complex-engineering domain whose meter they share.
PAPER_SETTINGS: dict[str, EnvSettings] = {
    "ttg/ALFWorld-v0": _ALFWORLD,
    "ttg/PaperSearchQA-v0": _PAPERSEARCHQA,
    "ttg/AWM-v0": _AWM,
    "ttg/BFCL-v0": _AWM,
    "ttg/Tau2-v0": _AWM,
}


def paper_settings(env_id: str) -> EnvSettings:
    """Table 4's settings for ``env_id`` (ALFWorld's for an env the table does not cover)."""
    return PAPER_SETTINGS.get(env_id, _ALFWORLD)
