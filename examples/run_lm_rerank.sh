#!/usr/bin/env bash
# Rerank Moses' n-best lists of the sample with an n-gram LM, the word penalty and the UNK penalty:
# score the n-best lists, pick the 1-best with weights, and evaluate it against Moses' own 1-best.
#
#   bash examples/run_lm_rerank.sh [OUT_DIR]                        # default OUT_DIR: runs/lm-rerank
#   WEIGHTS=tuned.yaml bash examples/run_lm_rerank.sh               # also apply weights for LM1 WP1 UNK1
#
# It runs from the repository root (OUT_DIR and WEIGHTS are relative to it) with the rerank of
# scripts/setup.sh's .venv, or the one on PATH: no virtualenv needs activating. Without WEIGHTS, the
# new features are weighted 0 next to Moses' tuned weights, which must give Moses' 1-best back
# exactly; the script checks that.
set -euo pipefail
cd "$(dirname "$0")/.."

rerank() {
  if [[ -x .venv/bin/rerank ]]; then .venv/bin/rerank "$@"; else command rerank "$@"; fi
}

data=examples/data
out=${1:-runs/lm-rerank}
mkdir -p "$out"

for split in val test; do
  rerank score-nbest "$data/$split.100best.gz" --source "$data/$split.en" --config configs/rescoring/rescore.yaml \
    -o "$out/$split.scored.100best.gz"
done

rerank apply "$out/test.scored.100best.gz" --weights "$data/moses.ini" \
  --weight LM1=0 --weight WP1=0 --weight UNK1=0 --source "$data/test.en" -o "$out/test.moses-weights.1best"
cmp "$out/test.moses-weights.1best" "$data/test.1best"
echo "Moses' weights with the new features at 0 reproduce Moses' 1-best exactly"

systems=(moses="$data/test.1best")
if [[ -n "${WEIGHTS:-}" ]]; then
  rerank apply "$out/test.scored.100best.gz" --weights "$data/moses.ini" --weights "$WEIGHTS" \
    --source "$data/test.en" -o "$out/test.rerank.1best" --nbest-out "$out/test.reranked.100best.gz"
  systems+=(rerank="$out/test.rerank.1best")
fi

rerank evaluate -r "$data/test.fr" --tokenize none --source "$data/test.en" --buckets quintiles \
  --plot "$out/test.bleu-by-length.png" --json "$out/test.scores.json" "${systems[@]}"
