"""Progress-meter training: trajectory datasets and TTG labels (``datasets``), SFT (``sft``), GRPO
(``grpo``), encoder-meter regression (``regression``), evaluation (``evaluation``) and the
``train-meter`` / ``eval-meter`` commands (``cli``)."""
