"""Training-side code: DeltaTTG credit assignment (``credit``); progress-meter data (``ttg_datasets``),
SFT (``meter_sft``), GRPO (``meter_grpo``), encoder-meter training (``meter_regression``), evaluation
(``meter_eval``), tiny CPU models (``tiny_models``) and the ``train-meter``/``eval-meter`` commands (``meter_cli``)."""
