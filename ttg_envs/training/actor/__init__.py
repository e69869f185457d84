"""Actor training: the DeltaTTG policy loss (``loss``), episodes and rollout engines (``rollout``),
advantages from episodes (``advantages``), the one-node trainer (``trainer``), ``ttg train``
(``cli``) and the verl plugin (``verl_plugin``)."""
