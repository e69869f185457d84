"""1 against 2 torch threads for a forward + backward pass of tiny Qwen3 policies of growing size.

The measurement behind ``ttg train``'s thread default (``launch.ONE_THREAD_PARAMS``): each size runs
the same pass (``--rows`` x ``--tokens`` random ids of the committed start's tokenizer, a log-softmax
loss, backward) on 1 and on 2 threads, interleaved ``--repeats`` times in this one process, and prints
the wall and process-CPU seconds of each and their 2/1 ratios.

    python benchmarks/bench_threads.py [--rows 2] [--tokens 256] [--repeats 2]
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

START = Path(__file__).resolve().parent / "results" / "train_compare" / "start"
#: (hidden, layers, heads) of the sizes measured; the first is the committed start's shape.
SIZES = ((64, 2, 2), (256, 4, 4), (512, 6, 8), (768, 8, 12))


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rows", type=int, default=2)
    p.add_argument("--tokens", type=int, default=256)
    p.add_argument("--repeats", type=int, default=2)
    args = p.parse_args(argv)
    import torch
    from transformers import PreTrainedTokenizerFast

    from ttg_envs.training.tiny_models import tiny_causal_lm

    tokenizer = PreTrainedTokenizerFast.from_pretrained(START)
    before = torch.get_num_threads()
    for hidden, layers, heads in SIZES:
        model = tiny_causal_lm(tokenizer, hidden=hidden, layers=layers, heads=heads)
        params = sum(p.numel() for p in model.parameters())
        ids = torch.randint(3, len(tokenizer), (args.rows, args.tokens), generator=torch.Generator().manual_seed(0))
        spent = {1: [0.0, 0.0], 2: [0.0, 0.0]}
        for _ in range(args.repeats):
            for threads in (1, 2):
                torch.set_num_threads(threads)
                wall, cpu = time.perf_counter(), time.process_time()
                model(input_ids=ids).logits.float().log_softmax(-1).mean().backward()
                spent[threads][0] += time.perf_counter() - wall
                spent[threads][1] += time.process_time() - cpu
        (w1, c1), (w2, c2) = spent[1], spent[2]
        n = args.repeats
        print(
            f"{params / 1e6:6.2f}M parameters: 1 thread {w1 / n:.3f}s wall, {c1 / n:.3f}s CPU; 2 threads {w2 / n:.3f}s wall, "
            f"{c2 / n:.3f}s CPU; 2/1: {w2 / w1:.2f}x wall, {c2 / c1:.2f}x CPU",
            flush=True,
        )
    torch.set_num_threads(before)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
