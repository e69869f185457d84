"""One subpackage per benchmark; :data:`ENV_SPECS` below is the only place that lists them.

Each :class:`~ttg_envs.envs.spec.EnvSpec` holds what the library knows about one env: its entry
point, splits, scripted policies, paper table 4 settings (failure cost C, max turns), the meter's
task pattern and the shipped meter. ``import ttg_envs`` registers every id with gymnasium.
"""

from __future__ import annotations

from .spec import EnvSettings, EnvSpec

__all__ = ["DEFAULT_SETTINGS", "ENV_SPECS", "EnvSettings", "EnvSpec", "env_settings", "env_spec", "policy_factory"]

_ALFWORLD = EnvSettings(1e-6, 16, 8, 50, 1024, 0.01, 0.001, 16384)
_PAPERSEARCHQA = EnvSettings(1e-6, 512, 5, 6, 1024, 0.001, 0.0, 6144)
# Table 4 has no BFCL or tau2 column: those tool-use envs take the AgentWorldModel settings, the
# paper's complex-engineering domain, and its meter, as the paper reuses that meter for them.
_AWM = EnvSettings(1e-6, 16, 16, 20, 2048, 0.001, 0.0, 16384)

#: Table 4's settings for an env that has no record (ALFWorld's; C = 16384).
DEFAULT_SETTINGS = _ALFWORLD

_SPECS = (
    EnvSpec("ttg/ALFWorld-v0", "ttg_envs.envs.alfworld.env:ALFWorldEnv", "ttg_envs.envs.alfworld.policies:make_policy",
            ("train", "valid_seen", "valid_unseen"), _ALFWORLD, task_pattern=r"Your task is to: ([^\n]*)",
            meter="alfworld"),
    EnvSpec("ttg/PaperSearchQA-v0", "ttg_envs.envs.papersearchqa.env:PaperSearchQAEnv",
            "ttg_envs.envs.papersearchqa.policies:make_policy", ("train", "test"), _PAPERSEARCHQA, meter="papersearchqa"),
    EnvSpec("ttg/AWM-v0", "ttg_envs.envs.awm.env:AWMEnv", "ttg_envs.envs.awm.policies:make_policy", ("train",), _AWM,
            meter="awm"),
    # BFCL's split is a category group (or one category); tau2's a shipped task split of a domain.
    EnvSpec("ttg/BFCL-v0", "ttg_envs.envs.bfcl.env:BFCLEnv", "ttg_envs.envs.bfcl.policies:make_policy",
            ("all", "non_live", "live", "multi_turn", "hallucination"), _AWM, meter="awm"),
    EnvSpec("ttg/Tau2-v0", "ttg_envs.envs.tau2.env:Tau2Env", "ttg_envs.envs.tau2.policies:make_policy",
            ("base", "train", "test"), _AWM, meter="awm"),
)

#: Registered env id -> its record.
ENV_SPECS: dict[str, EnvSpec] = {spec.id: spec for spec in _SPECS}


def env_spec(env_id: str) -> EnvSpec:
    """The record of ``env_id``; a ``ValueError`` names the known ids when there is none."""
    try:
        return ENV_SPECS[env_id]
    except KeyError:
        raise ValueError(f"unknown env id {env_id!r}; registered: {', '.join(sorted(ENV_SPECS))}") from None


def env_settings(env_id: str | None) -> EnvSettings:
    """Table 4's settings for ``env_id`` (:data:`DEFAULT_SETTINGS` for an env with no record)."""
    spec = ENV_SPECS.get(env_id) if env_id else None
    return spec.settings if spec else DEFAULT_SETTINGS


def policy_factory(env_id: str):
    """The scripted-policy factory of ``env_id`` (``factory(name, seed=..., **kwargs) -> policy``)."""
    if env_id not in ENV_SPECS:
        raise ValueError(f"unknown env id {env_id!r}; scripted policies exist for: {', '.join(sorted(ENV_SPECS))}")
    return ENV_SPECS[env_id].policy_factory()
