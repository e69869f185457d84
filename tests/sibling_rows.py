"""The rows the meter's pair losses read, for tests of siblings: one batch through the training code's own passes."""

from __future__ import annotations

from typing import Any


def sibling_rows(meter: Any, trajectories: list) -> tuple[Any, list, tuple, Any]:
    """(each sibling's head output, its targets, the pairs, the best-sibling-and-parent pairs) for ``trajectories`` as one training
    batch, built and read as ``train_encoder_meter`` builds and reads it (expert targets)."""
    import torch

    from ttg_envs.training.meter.regression import _example, _full_history_outputs, _sibling_outputs

    batch = [_example(meter, traj, "expert") for traj in trajectories]
    texts = list(dict.fromkeys(s for ex in batch for s in ex.texts()))
    index = {t: i for i, t in enumerate(texts)}
    inputs = meter.tokenize(texts)
    with torch.no_grad():
        vectors = meter.model.embed(inputs["input_ids"], inputs["attention_mask"])
        *_, (out, states, _) = _full_history_outputs(meter, batch, index, vectors, torch, "cpu")
        last, _, y, _, pairs, _, parents = _sibling_outputs(meter, batch, index, vectors, states, out, torch, "cpu")
    return last, y, pairs, parents
