#!/usr/bin/env bash
# Install everything (see setup.sh), then run the main job end to end on the sample shipped in
# examples/data: train a small RNN encoder-decoder and RNNsearch, score the phrase table, rescore
# Moses' n-best lists, tune (MERT, PRO, MIRA), decode with RNNsearch, and write the results table
# to runs/sample/results.md. Takes a few minutes on 2 CPU cores.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
.venv/bin/rerank experiment configs/experiments/sample.yaml "$@"
