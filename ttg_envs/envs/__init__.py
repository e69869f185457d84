"""One subpackage per benchmark; their records (entry point, splits, policies, settings) are in :mod:`ttg_envs.registry`."""
