"""Training, split by what it trains: the actor (:mod:`.actor`: loss, rollouts, advantages, trainer,
verl plugin) and the progress meter (:mod:`.meter`: datasets, SFT, GRPO, regression, evaluation);
tiny CPU models for both (``tiny_models``). The credit maths is :mod:`ttg_envs.credit`."""
