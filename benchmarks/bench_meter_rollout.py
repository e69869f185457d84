"""The shipped ALFWorld meter scoring rollouts step by step, as the trainer and ``ProgressMeterWrapper`` ask it.

Episodes of noisy experts are recorded on train tasks; then at each turn t every live episode's
history h_t is scored in one call (estimates cache cleared between repeats, so every history is
new, as in a rollout; the segment cache stays on). Two variants, interleaved in one process:

- ``remembered``: this checkout (each segment's marked task words computed once, ``EncoderMeter._marked``);
- ``marked each call``: the previous behaviour, ``mark_task_words`` over every segment of every
  history at every call.

Both give the same estimates (checked). Printed: CPU ms per estimate of each and their ratio.

    PYTHONPATH=. python benchmarks/bench_meter_rollout.py [--episodes 64] [--repeats 3]
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from meter_rollouts import score_turn_by_turn


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=64, help="episodes scored per repeat (default: %(default)s)")
    parser.add_argument("--repeats", type=int, default=3, help="interleaved repeats of each variant (default: %(default)s)")
    args = parser.parse_args(argv)

    import torch

    from ttg_envs.meters import load_meter
    from ttg_envs.meters.encoder import mark_task_words
    from ttg_envs.training.meter.datasets import load_trajectories
    from ttg_envs.training.meter.record import collect_trajectories

    torch.set_num_threads(1)
    policies = ["noisy_expert:0.25", "noisy_expert:0.5", "noisy_expert:0.75", "noisy_expert:1"]
    with tempfile.TemporaryDirectory() as tmp:
        files = collect_trajectories("ttg/ALFWorld-v0", {}, "train", policies, Path(tmp), limit=-(-args.episodes // len(policies)))
        trajectories = load_trajectories(files)[: args.episodes]
    prefixes = [list(t.prefixes()) for t in trajectories]
    meter = load_meter("ttg/ALFWorld-v0")
    remembered = meter._marked

    def each_call(text: str, task: str) -> str:
        return mark_task_words(text, task)

    def score(variant) -> tuple[float, int, list]:
        meter._marked = variant
        return score_turn_by_turn(meter, prefixes)

    variants = {"marked each call": each_call, "remembered": remembered}
    times: dict[str, list[float]] = {name: [] for name in variants}
    results = {}
    for _ in range(args.repeats):
        for name, variant in variants.items():
            seconds, n, out = score(variant)
            times[name].append(seconds / n * 1000)
            results[name] = [(e.can_complete, e.remaining_tokens) for e in out]
    assert results["remembered"] == results["marked each call"], "the variants gave different estimates"
    print(f"{len(trajectories)} episodes, {n} estimates per repeat, {args.repeats} repeats (CPU ms per estimate, best of repeats)")
    for name, values in times.items():
        print(f"  {name}: {min(values):.3f} ms")
    print(f"  ratio (marked each call / remembered): {min(times['marked each call']) / min(times['remembered']):.2f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
