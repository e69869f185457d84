#!/usr/bin/env bash
# The verl plugin's tests against real verl, beside the dev environment: .venv-verl sees every
# package of .venv (a .pth file) and adds verl 0.9.1 without its declared dependencies plus the few
# packages its agent loop, trainer and config modules import. About two minutes; run after
# scripts/setup.sh. This is the dev env's torch and transformers (outside verl's transformers<5.11
# pin), which is what the plugin's tests need; full training runs use scripts/setup_cluster.sh.
#
#   bash scripts/setup_verl_tests.sh && TTG_REQUIRE_VERL=1 .venv-verl/bin/python -m pytest -q tests/test_verl_plugin.py
set -euo pipefail
cd "$(dirname "$0")/.."
[ -x .venv/bin/python ] || { echo "run scripts/setup.sh first" >&2; exit 1; }
python3 -m venv .venv-verl
site=$(.venv/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
own=$(.venv-verl/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
echo "$site" > "$own/ttg_dev_env.pth"
.venv-verl/bin/python -m pip install -q --no-deps "verl==0.9.1"
.venv-verl/bin/python -m pip install -q "codetiming==1.4.0" "hydra-core==1.3.8" "omegaconf==2.3.1" "tensordict==0.10.0" \
  "ray==2.60.0" "cachetools" "dill==0.4.1" "pylatexenc==2.11" "torchdata==0.11.0" "datasets==5.2.0"
