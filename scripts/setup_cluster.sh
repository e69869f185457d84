#!/usr/bin/env bash
# The cluster environment: ttg-envs[verl] beside verl 0.9.1 and its rollout engine, in a fresh
# virtualenv (default .venv-cluster; the first argument names another), then the verl plugin's
# tests and an import of verl's rollout server. ENGINE=sglang takes verl[sglang] instead of
# verl[vllm]. Both pin torch 2.11.0 (a CUDA build) and transformers 5.9.0: a multi-GB download.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${1:-.venv-cluster}
ENGINE=${ENGINE:-vllm}
python3 -m venv "$VENV"
"$VENV/bin/python" -m pip install -q --upgrade pip
# The README's cluster install, verbatim: verl's own pins decide torch, transformers and the engine.
"$VENV/bin/python" -m pip install -e ".[verl]" "verl[$ENGINE]==0.9.1"
"$VENV/bin/python" - "$ENGINE" <<'PY'
import importlib.metadata as md
import sys

import verl  # noqa: F401  (loads the verl.plugins entry point, which registers the plugin)
from verl.experimental.agent_loop.agent_loop import _agent_loop_registry
from verl.trainer.ppo import core_algos
from verl.workers.rollout.replica import get_rollout_replica_class

assert "ttg_agent" in _agent_loop_registry, "verl did not load the ttg_envs entry point"
for name in ("delta_ttg", "ttg_grpo", "ttg_gigpo", "ttg_hgpo"):
    core_algos.get_adv_estimator_fn(name)
replica = get_rollout_replica_class(sys.argv[1])  # imports verl's rollout server module and the engine
versions = {p: md.version(p) for p in ("verl", "torch", "transformers", sys.argv[1])}
print("registered delta_ttg ttg_grpo ttg_gigpo ttg_hgpo ttg_agent;", replica.__module__ + "." + replica.__name__, versions)
PY
"$VENV/bin/python" -m pytest -q -p no:cacheprovider tests/test_verl_plugin.py
