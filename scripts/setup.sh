#!/usr/bin/env bash
# Create .venv and install rerank with everything it needs (torch, kenlm, sacrebleu, ...).
# Safe to run again: when pyproject.toml, the extras and the torch build are those of the last
# install (.venv/.rerank-installed holds their hash), it does nothing and prints nothing.
#
# usage: bash scripts/setup.sh [EXTRAS]   (default "test": pytest, ruff, mypy; scripts/test.sh adds
#        "docs", MkDocs for the site, "ray", Ray Data for score-table --ray, about 500 MB, which
#        the tests run on a local cluster, and "hf" and "ctranslate2", the pretrained models' features:
#        transformers, CTranslate2 and sacremoses)
#
# Quiet: what pip and apt print goes to .venv/setup.log, shown (its end) only when a step fails.
#
# torch: on a machine without an NVIDIA GPU, torch's CPU-only build (about 200 MB), from PyTorch's CPU
# wheel index or from a pip index already configured to serve it; with a GPU (nvidia-smi works), the
# CUDA build from PyPI. Choose explicitly with RERANK_TORCH=cpu or RERANK_TORCH=cuda.
set -euo pipefail
cd "$(dirname "$0")/.."

TORCH_VERSION=2.13.0
CPU_INDEX=https://download.pytorch.org/whl/cpu

log=$(mktemp)  # moved to .venv/setup.log once .venv exists
trap 'rm -f "$log"' EXIT

quietly() {  # run "$@" with its output in the log; on failure, say what failed and show the log's end
  if ! "$@" >>"$log" 2>&1; then
    echo "setup: failed: $*" >&2
    tail -n 40 "$log" >&2
    [ -d .venv ] && cp "$log" .venv/setup.log && echo "setup: the whole output is in .venv/setup.log" >&2
    exit 1
  fi
}

if ! command -v g++ >/dev/null 2>&1 || ! command -v python3 >/dev/null 2>&1; then
  # kenlm's Python module is compiled from source; it needs a C++ compiler.
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    quietly apt-get update -qq
    quietly apt-get install -y -qq build-essential python3 python3-venv python3-dev zlib1g-dev
  else
    echo "setup: please install a C++ compiler and python3 (e.g. apt-get install build-essential python3-venv)" >&2
    exit 1
  fi
fi

torch_build=${RERANK_TORCH:-}
if [ -z "$torch_build" ]; then
  if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then torch_build=cuda; else torch_build=cpu; fi
fi
extras=${1:-test}
stamp=.venv/.rerank-installed
wanted="$( { cat pyproject.toml; echo "extras=$extras torch=$torch_build"; } | python3 -c 'import hashlib, sys; print(hashlib.sha256(sys.stdin.buffer.read()).hexdigest())')"
if [ -x .venv/bin/python ] && [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$wanted" ]; then
  exit 0  # installed from this pyproject.toml with these extras: nothing to do
fi
export PIP_DISABLE_PIP_VERSION_CHECK=1
if [ ! -x .venv/bin/python ]; then
  quietly python3 -m venv .venv
  quietly .venv/bin/python -m pip install --upgrade pip
fi
case "$torch_build" in
  cpu)
    # The local version "+cpu" exists only as the CPU build: PyPI's CUDA build can never be chosen.
    # torch alone from that index; its dependencies come from the usual index with rerank's below.
    .venv/bin/python -c "import torch, sys; sys.exit(torch.version.cuda is not None)" 2>/dev/null ||
      quietly .venv/bin/python -m pip install --retries 1 --timeout 15 --no-deps --extra-index-url "$CPU_INDEX" \
        "torch==${TORCH_VERSION}+cpu" ;;
  cuda)
    .venv/bin/python -c "import torch" 2>/dev/null || quietly .venv/bin/python -m pip install "torch==${TORCH_VERSION}" ;;
  *)
    echo "setup: RERANK_TORCH must be cpu or cuda, not '$torch_build'" >&2
    exit 2 ;;
esac
# The distribution was called "rerank" before (a name another project has on the package index).
if .venv/bin/python -m pip show -q rerank >/dev/null 2>&1; then quietly .venv/bin/python -m pip uninstall -y rerank; fi
quietly .venv/bin/python -m pip install -e ".[${extras}]"
cp "$log" .venv/setup.log
echo "$wanted" > "$stamp"
echo "setup: rerank $(.venv/bin/python -c 'import rerank; print(rerank.__version__)') and its dependencies are in .venv (pip's output: .venv/setup.log)"
