"""One subpackage per benchmark; ``ENV_IDS`` maps each registered id to its entry point."""

#: Registered gymnasium ids and their entry points (imported only on ``gym.make``).
ENV_IDS: dict[str, str] = {
    "ttg/ALFWorld-v0": "ttg_envs.envs.alfworld.env:ALFWorldEnv",
}
