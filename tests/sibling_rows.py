"""The rows the meter's pair losses read, for tests of siblings: one batch through the training code's own passes."""

from __future__ import annotations

from typing import Any


def sibling_rows(meter: Any, trajectories: list, turn_limit: int | None = None) -> tuple[Any, list, tuple]:
    """(each sibling's head output, its targets, the pairs) for ``trajectories`` as one training
    batch, read the way ``train_encoder_meter`` reads them (an env's opening segments included)."""
    import torch

    from ttg_envs.training.meter.regression import _Example, _full_history_outputs, _sibling_example, _sibling_outputs, trajectory_targets

    batch = []
    for traj in trajectories:
        segments = meter.segments(traj.messages)
        opening = len(segments) - (traj.num_steps + 1)
        b, y = trajectory_targets(traj, "expert")
        siblings = [_sibling_example(meter, s, opening) for s in traj.siblings]
        batch.append(_Example(segments, b[:1] * opening + b, y[:1] * opening + y, siblings, turn_limit))
    texts = list(dict.fromkeys(s for ex in batch for s in ex.texts()))
    index = {t: i for i, t in enumerate(texts)}
    inputs = meter.tokenize(texts)
    with torch.no_grad():
        vectors = meter.model.embed(inputs["input_ids"], inputs["attention_mask"])
        *_, (out, states, _) = _full_history_outputs(meter, batch, index, vectors, torch, "cpu")
        last, _, y, _, pairs, _ = _sibling_outputs(meter, batch, index, vectors, states, out, torch, "cpu")
    return last, y, pairs
