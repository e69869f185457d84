"""What the shipped tau2 meter's pretrained backbone costs per estimate against the tiny encoder it replaced.

tau2 retail episodes (gold and perturbed gold, scripted gold user) are recorded on train tasks;
then at each turn t every live episode's history h_t is scored in one call (estimate cache cleared
between repeats, so every history is new, as in a rollout; the segment cache stays on, so each
call embeds the segments new since the last turn). Two meters, interleaved in one process:

- ``minilm``: the shipped ``load_meter("ttg/Tau2-v0")`` (all-MiniLM-L6-v2, 6 layers of width 384,
  frozen, under a GRU and head);
- ``tiny``: the ``encoder:tiny`` backbone the tau2 meter had before (2 layers of width 64, a
  WordPiece vocabulary trained on the episodes' segments), with the same reading settings. Its
  weights are random: the cost of an estimate does not depend on them.

Printed: CPU ms per estimate of each (best of repeats) and their ratio.

    PYTHONPATH=. python benchmarks/bench_meter_backbones.py [--tasks 12] [--repeats 3]
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from meter_rollouts import score_turn_by_turn


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=12, help="train tasks recorded, 3 policies each (default: %(default)s)")
    parser.add_argument("--repeats", type=int, default=3, help="interleaved repeats of each meter (default: %(default)s)")
    args = parser.parse_args(argv)

    import torch

    from ttg_envs.meters import EncoderMeter, load_meter
    from ttg_envs.meters.encoder import build_model, history_segments
    from ttg_envs.training.meter.datasets import load_trajectories
    from ttg_envs.training.meter.record import collect_trajectories
    from ttg_envs.training.tiny_models import tiny_encoder, train_wordpiece_tokenizer

    torch.set_num_threads(1)
    policies = ["gold", "perturbed:0.3", "perturbed:0.5"]
    with tempfile.TemporaryDirectory() as tmp:
        files = collect_trajectories("ttg/Tau2-v0", {"user": "gold"}, "train", policies, Path(tmp), limit=args.tasks)
        trajectories = load_trajectories(files)
    prefixes = [list(t.prefixes()) for t in trajectories]

    minilm = load_meter("ttg/Tau2-v0")
    config = minilm.config
    texts = [s for t in trajectories for s in history_segments(t.messages, drop_reasoning=config.drop_reasoning)]
    tokenizer = train_wordpiece_tokenizer(texts)
    backbone = tiny_encoder(tokenizer, hidden=64, max_tokens=config.pair_tokens)
    tiny = EncoderMeter(build_model(backbone, config.hidden), tokenizer, config)
    meters = {"tiny": tiny, "minilm": minilm}

    times: dict[str, list[float]] = {name: [] for name in meters}
    for _ in range(args.repeats):
        for name, meter in meters.items():
            seconds, n, _ = score_turn_by_turn(meter, prefixes)
            times[name].append(seconds / n * 1000)
    print(f"{len(trajectories)} episodes, {n} estimates per repeat, {args.repeats} repeats (CPU ms per estimate, best of repeats)")
    for name, values in times.items():
        print(f"  {name}: {min(values):.2f} ms")
    print(f"  ratio (minilm / tiny): {min(times['minilm']) / min(times['tiny']):.1f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
