"""Benchmark the offline Qwen3 tokenizer: conversion, warm load, encode throughput.

Run: python benchmarks/bench_tokenization.py
Each load is timed in a fresh interpreter, so imports and in-process caching don't hide it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile

_LOAD = """
import json, time
t0 = time.perf_counter()
from ttg_envs.tokenization import load_tokenizer
t1 = time.perf_counter()
tok = load_tokenizer()
t2 = time.perf_counter()
text = open({sample!r}, encoding="utf-8").read()
tok.encode(text)
t3 = time.perf_counter()
n = tok.count(text)
t4 = time.perf_counter()
print(json.dumps({{"import_s": t1 - t0, "load_s": t2 - t1, "tokens": n,
                  "chars": len(text), "encode_s": t4 - t3}}))
"""


def _run(cache: str, sample: str) -> dict[str, float]:
    env = {**os.environ, "TTG_ENVS_CACHE": cache}
    out = subprocess.run(
        [sys.executable, "-c", _LOAD.format(sample=sample)],
        env=env,
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    return json.loads(out)


def main() -> None:
    """Print conversion time, warm-load times and encode throughput."""
    sample = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "ttg_envs", "tokenization.py")
    with tempfile.TemporaryDirectory() as cache:
        cold = _run(cache, sample)
        warm = [_run(cache, sample) for _ in range(5)]
    print(f"conversion (cold cache): {cold['load_s'] * 1000:8.1f} ms")
    loads = sorted(w["load_s"] * 1000 for w in warm)
    print(f"warm load (disk cache):  {loads[len(loads) // 2]:8.1f} ms median of {len(loads)}")
    best = min(warm, key=lambda w: w["encode_s"])
    print(f"module import:           {warm[0]['import_s'] * 1000:8.1f} ms")
    print(
        f"encode {best['chars']} chars -> {best['tokens']} tokens: "
        f"{best['encode_s'] * 1000:.2f} ms "
        f"({best['chars'] / best['encode_s'] / 1e6:.1f} M chars/s)"
    )


if __name__ == "__main__":
    main()
