#!/usr/bin/env bash
# Set up ttg-envs for development on a fresh machine: a virtualenv in .venv with every extra the
# tests need. Safe to run again (pip skips what is already installed).
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip
# constraints.txt: the exact tested versions (pyproject.toml has ranges), torch's CPU wheel among them.
.venv/bin/python -m pip install -q -c constraints.txt -e ".[dev]"
# bfcl-eval's declared dependencies would pull a CUDA torch and pin numpy 1.26; its modules need
# only what the `bfcl` extra installs.
.venv/bin/python -m pip install -q --no-deps "bfcl-eval==2026.3.23"
