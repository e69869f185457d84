#!/usr/bin/env bash
# The cluster environment: ttg-envs[verl,alfworld] beside verl 0.9.1 and its vLLM rollout engine,
# in a fresh virtualenv (default .venv-cluster; the first argument names another), then the verl
# plugin's tests and an import of verl's vLLM rollout server. verl[vllm] pins torch 2.11.0 (a CUDA
# build), transformers 5.9.0 and vllm 0.24.0: 11 GB, 9 minutes here. (verl[sglang]==0.9.1 does not resolve
# even alone: sglang 0.5.12 pins transformers 5.6.0, which verl 0.9.1 excludes.)
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${1:-.venv-cluster}
python3 -m venv "$VENV"
"$VENV/bin/python" -m pip install -q --upgrade pip
# The README's cluster install: verl's own pins decide torch, transformers and vllm. The alfworld
# extra is what the README's ALFWorld launch needs; `.[verl]` alone resolves the same way.
"$VENV/bin/python" -m pip install -e ".[verl,alfworld]" "verl[vllm]==0.9.1"
"$VENV/bin/python" - <<'PY'
import importlib.metadata as md

import verl  # noqa: F401  (loads the verl.plugins entry point, which registers the plugin)
from verl.experimental.agent_loop.agent_loop import _agent_loop_registry
from verl.trainer.ppo import core_algos
from verl.workers.rollout.replica import get_rollout_replica_class

assert "ttg_agent" in _agent_loop_registry, "verl did not load the ttg_envs entry point"
for name in ("delta_ttg", "ttg_grpo", "ttg_gigpo", "ttg_hgpo"):
    core_algos.get_adv_estimator_fn(name)
replica = get_rollout_replica_class("vllm")  # imports verl's vLLM server module, and vllm
versions = {p: md.version(p) for p in ("verl", "torch", "transformers", "vllm")}
print("registered delta_ttg ttg_grpo ttg_gigpo ttg_hgpo ttg_agent;", replica.__module__ + "." + replica.__name__, versions)
PY
"$VENV/bin/python" -m pytest -q -p no:cacheprovider tests/test_verl_plugin.py
