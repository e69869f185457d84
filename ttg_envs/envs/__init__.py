"""One subpackage per benchmark; the tables below are the only place that lists them."""

#: Registered gymnasium ids and their entry points (imported only on ``gym.make``).
ENV_IDS: dict[str, str] = {
    "ttg/ALFWorld-v0": "ttg_envs.envs.alfworld.env:ALFWorldEnv",
    "ttg/PaperSearchQA-v0": "ttg_envs.envs.papersearchqa.env:PaperSearchQAEnv",
    "ttg/AWM-v0": "ttg_envs.envs.awm.env:AWMEnv",
    "ttg/BFCL-v0": "ttg_envs.envs.bfcl.env:BFCLEnv",
    "ttg/Tau2-v0": "ttg_envs.envs.tau2.env:Tau2Env",
}

#: Per env id, the ``module:function`` that builds its scripted policies by name.
SCRIPTED_POLICIES: dict[str, str] = {
    "ttg/ALFWorld-v0": "ttg_envs.envs.alfworld.policies:make_policy",
    "ttg/PaperSearchQA-v0": "ttg_envs.envs.papersearchqa.policies:make_policy",
    "ttg/AWM-v0": "ttg_envs.envs.awm.policies:make_policy",
    "ttg/BFCL-v0": "ttg_envs.envs.bfcl.policies:make_policy",
    "ttg/Tau2-v0": "ttg_envs.envs.tau2.policies:make_policy",
}


def policy_factory(env_id: str):
    """The scripted-policy factory of ``env_id`` (``factory(name, seed=..., **kwargs) -> policy``)."""
    import importlib

    if env_id not in SCRIPTED_POLICIES:
        raise ValueError(f"unknown env id {env_id!r}; scripted policies exist for: {', '.join(sorted(SCRIPTED_POLICIES))}")
    module, func = SCRIPTED_POLICIES[env_id].split(":")
    return getattr(importlib.import_module(module), func)
