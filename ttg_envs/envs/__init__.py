"""One subpackage per benchmark; the tables below are the only place that lists them."""

#: Registered gymnasium ids and their entry points (imported only on ``gym.make``).
ENV_IDS: dict[str, str] = {
    "ttg/ALFWorld-v0": "ttg_envs.envs.alfworld.env:ALFWorldEnv",
}

#: Per env id, the ``module:function`` that builds its scripted policies by name.
SCRIPTED_POLICIES: dict[str, str] = {
    "ttg/ALFWorld-v0": "ttg_envs.envs.alfworld.policies:make_policy",
}


def policy_factory(env_id: str):
    """The scripted-policy factory of ``env_id`` (``factory(name, seed=..., **kwargs) -> policy``)."""
    import importlib

    if env_id not in SCRIPTED_POLICIES:
        raise KeyError(f"{env_id} has no scripted policies; known: {sorted(SCRIPTED_POLICIES)}")
    module, func = SCRIPTED_POLICIES[env_id].split(":")
    return getattr(importlib.import_module(module), func)
