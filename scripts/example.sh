#!/usr/bin/env bash
# Install everything (see setup.sh), then run the main job end to end on the sample shipped in
# examples/data with the small trained models shipped in examples/models: score the phrase table,
# decode with both models, rescore Moses' n-best lists, tune (MERT, PRO, MIRA, three seeds each),
# rerank, and write the results table to runs/sample/results.md. About 2.5 minutes of CPU after set-up
# (docs/results/sample.md has the measured run).
# (configs/experiments/sample-training.yaml is the same study with tiny models trained first.)
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
.venv/bin/rerank experiment configs/experiments/sample.yaml "$@"
