#!/usr/bin/env bash
# Every benchmark on the GPU, in one command and about 9 minutes on an H100: the device's matmul rates,
# the whole phrase table scored by `rerank score-table --device cuda`, forced-decoding scores (phrase
# table and n-best list), training throughput, beam 1/5/10 decoding; each beside the reference path.
#
#   bash bench/gpu.sh [DATA]          # DATA: the shared data folder (default ../shared/data)
#
# Run from the repository (python3 with torch, numpy, pyyaml; the package is found through PYTHONPATH).
# Each output goes to "$OUT/<name>.txt" when OUT is set, else to bench-gpu/; summary.txt lists every
# step's exit status and seconds. Environment:
#   RNNSEARCH_SMALL=DIR  a trained rnnsearch-small model for decoding and scoring (default: random weights;
#                        a random model seldom ends its hypotheses, so its decoding runs to the length limit)
#   DEVICE=cuda          the device (cuda:N; cpu with QUICK=1 tries the script on a small scale)
#   BUDGET=530           seconds for the whole run (6 times as much with QUICK, and each step's limit too); each
#                        step stops at its own limit or when this runs out
#   PYTHON=python3       the interpreter
#   QUICK=1              each benchmark's --quick sizes (to check the script, not to quote; the test suite runs
#                        QUICK=1 DEVICE=cpu, tests/integration/test_benchmarks.py)
# A step that fails or runs out of time is recorded and the next one runs; the script then exits with 1.
set -u

DATA=$(cd "${1:-../shared/data}" 2>/dev/null && pwd) || { echo "no data folder ${1:-../shared/data}" >&2; exit 2; }
OUTDIR=${OUT:-bench-gpu}
mkdir -p "$OUTDIR"
PYTHON=${PYTHON:-python3}
DEVICE=${DEVICE:-cuda}
SLACK=1  # each step's limit (set for a GPU at full sizes) is multiplied by it
if [ -n "${QUICK:-}" ]; then
    SLACK=6  # quick sizes on a busy CPU
fi
BUDGET=${BUDGET:-$((530 * SLACK))}
MODEL=()
if [ -n "${RNNSEARCH_SMALL:-}" ]; then
    MODEL=(--model "$RNNSEARCH_SMALL")
fi
if [ -n "${QUICK:-}" ]; then
    TRAIN=(--quick) TRANSLATE=(--quick) SCORING=(--quick) FULL_TABLE="$OUTDIR/quick-table.gz"
    gzip -dc "$DATA/moses-multi30k/model/phrase-table.gz" 2>/dev/null | head -n 200 | gzip > "$FULL_TABLE"
else
    TRAIN=(--updates 30) TRANSLATE=(--beams 1 5 10 --single-sentences 100) SCORING=(--pairs 50000 --naive 300 --repeat 2)
    FULL_TABLE=""
fi
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
START=$SECONDS
: > "$OUTDIR/summary.txt"

# step NAME LIMIT COMMAND...: runs the command under timeout (its limit, or what is left of the budget),
# its output shown and kept in $OUTDIR/NAME.txt, its exit status and seconds added to summary.txt
step() {
    local name=$1 limit=$2 left status began
    shift 2
    limit=$((limit * SLACK))
    left=$((BUDGET - (SECONDS - START)))
    if [ "$left" -lt "$limit" ]; then limit=$left; fi
    if [ "$limit" -lt 15 ]; then
        echo "$name: skipped, the budget of $BUDGET s is spent" | tee -a "$OUTDIR/summary.txt"
        return
    fi
    echo "== $name (at most $limit s): $*"
    began=$SECONDS
    { echo "\$ $*"; timeout -k 10 "$limit" "$@" 2>&1; echo "exit status $?" >&3; } 3>"$OUTDIR/.$name.status" \
        | tee "$OUTDIR/$name.txt"
    status=$(sed 's/exit status //' "$OUTDIR/.$name.status")
    rm -f "$OUTDIR/.$name.status"
    case $status in
        0) status="ok" ;;
        124|137) status="timed out after $limit s (exit $status)" ;;
        *) status="failed (exit $status)" ;;
    esac
    echo "$name: $status, $((SECONDS - began)) s" | tee -a "$OUTDIR/summary.txt"
}

PY=("$PYTHON" -u)
step machine 60 "${PY[@]}" bench/machine.py --device "$DEVICE"
if [ -z "$FULL_TABLE" ]; then
    # the whole phrase table (1,219,049 lines) by rerank score-table, checked line by line afterwards
    step full-table 240 "${PY[@]}" bench/bench_scoring.py --device "$DEVICE" --data "$DATA" --configs rnnsearch-small \
        "${MODEL[@]}" --workloads --naive 0 --full-table
else
    step full-table 240 "${PY[@]}" -m rerank -q score-table "$FULL_TABLE" -o "$OUTDIR/quick-table.scored.gz" \
        --model "${RNNSEARCH_SMALL:-examples/models/rnnsearch}" --device "$DEVICE"
fi
step scoring-rnnsearch-small 100 "${PY[@]}" bench/bench_scoring.py --device "$DEVICE" --data "$DATA" \
    --configs rnnsearch-small "${MODEL[@]}" "${SCORING[@]}"
step scoring-encdec-small 100 "${PY[@]}" bench/bench_scoring.py --device "$DEVICE" --data "$DATA" \
    --configs encdec-small "${SCORING[@]}"
step train 120 "${PY[@]}" bench/bench_train.py --device "$DEVICE" --data "$DATA" \
    --configs rnnsearch-small encdec-small "${TRAIN[@]}"
step translate 150 "${PY[@]}" bench/bench_translate.py --device "$DEVICE" --data "$DATA" "${MODEL[@]}" \
    "${TRANSLATE[@]}"
echo "== all in $((SECONDS - START)) s; outputs in $OUTDIR" | tee -a "$OUTDIR/summary.txt"
# the exit status: 1 when a step failed, ran out of time or was skipped
if grep -v "^== all in" "$OUTDIR/summary.txt" | grep -qv ": ok, "; then
    exit 1
fi
