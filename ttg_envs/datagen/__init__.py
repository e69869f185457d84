"""Build tools beside the runtime package: the offline generators of the bundled task sets.

Nothing at runtime imports them (loading and playing a bundled task needs only its env package);
``ttg generate-alfworld`` and ``python -m ttg_envs.datagen.<benchmark>`` run them.
"""
