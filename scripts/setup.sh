#!/usr/bin/env bash
# Create .venv and install rerank with everything it needs (torch CPU build, kenlm, sacrebleu, ...).
# Safe to run again: it only installs what is missing.
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v g++ >/dev/null 2>&1 || ! command -v python3 >/dev/null 2>&1; then
  # kenlm's Python module is compiled from source; it needs a C++ compiler.
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    apt-get update -qq && apt-get install -y -qq build-essential python3 python3-venv python3-dev zlib1g-dev >/dev/null
  else
    echo "setup: please install a C++ compiler and python3 (e.g. apt-get install build-essential python3-venv)" >&2
    exit 1
  fi
fi

[ -x .venv/bin/python ] || python3 -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip
# torch first, pinned: the 2.13.0 CPU build (a plain "torch" would pull several GB of CUDA packages).
.venv/bin/python -c "import torch" 2>/dev/null || .venv/bin/python -m pip install -q torch==2.13.0
.venv/bin/python -m pip install -q -e ".[test]"
