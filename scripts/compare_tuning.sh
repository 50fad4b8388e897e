#!/usr/bin/env bash
# Tune the real Moses Multi30k English->French system on val two ways, from the same starting
# weights (those of the shipped, tuned moses.ini) and with the same settings: Moses' own
# mert-moses.pl, and `rerank tune --decoder "moses ..."`. Then decode test_2016_flickr with each
# one's final weights and print every figure (see docs/moses-tuning.md).
#
# usage: bash scripts/compare_tuning.sh [SHARED]
#   SHARED     the folder that holds tools/moses and data/ (default ../shared)
# environment (all optional):
#   ITERATIONS decoder runs at most, for both tuners (default 25, the default of both)
#   THREADS    Moses' decoding threads, for both tuners (default 1)
#   NICE       niceness of every step (default 5)
#   STEPS      which steps to run, in order (default "prepare mert rerank test report")
#   WORK       the work directory (default runs/moses-tuning)
#
# Everything goes to the work directory. A step whose results are there already is skipped, so a
# stopped run can be started again; delete its files there to redo one.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
SHARED=$(cd "${1:-$ROOT/../shared}" && pwd)
ITERATIONS=${ITERATIONS:-25}
THREADS=${THREADS:-1}
NICE=${NICE:-5}
STEPS=${STEPS:-prepare mert rerank test report}

MOSES=$SHARED/tools/moses
DATA=$SHARED/data/moses-multi30k
TOK=$SHARED/data/multi30k/tok
DEV_EN=$TOK/val.lc.norm.tok.en
DEV_FR=$TOK/val.lc.norm.tok.fr
TEST_EN=$TOK/test_2016_flickr.lc.norm.tok.en
TEST_FR=$TOK/test_2016_flickr.lc.norm.tok.fr
RERANK=$ROOT/.venv/bin/rerank
W=$(mkdir -p "${WORK:-$ROOT/runs/moses-tuning}" && cd "${WORK:-$ROOT/runs/moses-tuning}" && pwd)
INI=$W/filtered/moses.ini   # the model filtered to val + test_2016_flickr: both tuners start from it
mkdir -p "$W"

run_nice() { nice -n "$NICE" "$@"; }
since() { echo "$(( $(date +%s) - $1 )) s wall"; }
bleu() { # BLEU of a translation (tokenized text, as Moses' mert counts it): bleu REF HYP
    "$RERANK" evaluate --tokenize none -r "$1" "$2" --json - |
        python3 -c 'import json,sys; print("%.2f" % json.load(sys.stdin)["systems"][0]["bleu"])'
}

step_prepare() {
    # 1. the shipped moses.ini with real paths
    sed -e "s#MODEL_DIR#$DATA/model#g" -e "s#LM_DIR#$DATA/lm#g" "$DATA/model/moses.ini" > "$W/moses.ini"
    # 2. filtered once to the sources of val and test_2016_flickr, as Moses users do
    if [ ! -s "$INI" ]; then
        cat "$DEV_EN" "$TEST_EN" > "$W/filter-input.en"
        rm -rf "$W/filtered.tmp"
        local start=$(date +%s)
        run_nice "$MOSES/scripts/training/filter-model-given-input.pl" "$W/filtered.tmp" "$W/moses.ini" \
            "$W/filter-input.en" > "$W/filter.log" 2>&1
        echo "filtering: $(since $start)"
        mv "$W/filtered.tmp" "$W/filtered"
        sed -i "s#$W/filtered.tmp#$W/filtered#g" "$INI"
    fi
    echo "phrase pairs: $(zcat "$DATA/model/phrase-table.gz" | wc -l) in the full table," \
         "$(zcat "$W"/filtered/phrase-table.0-0.1.1.gz | wc -l) after filtering"
    # 3. the filtering must be lossless: val decoded with the filtered model = the shipped 1-best
    if [ ! -s "$W/val.filtered.1best" ]; then
        local start=$(date +%s)
        run_nice "$MOSES/bin/moses" -config "$INI" -threads "$THREADS" -input-file "$DEV_EN" \
            > "$W/val.filtered.1best.tmp" 2> "$W/val.filtered.log"
        echo "decoding val with the filtered model: $(since $start)"
        mv "$W/val.filtered.1best.tmp" "$W/val.filtered.1best"
    fi
    if [ -e "$DATA/nbest/val.1best" ]; then
        if cmp -s "$W/val.filtered.1best" "$DATA/nbest/val.1best"; then
            echo "val 1-best with the filtered model: identical to $DATA/nbest/val.1best"
        else
            echo "val 1-best with the filtered model differs from the shipped one in" \
                 "$(diff "$W/val.filtered.1best" "$DATA/nbest/val.1best" | grep -c '^<') lines" >&2
            exit 1
        fi
    fi
}

step_mert() {
    [ -s "$W/mert/moses.ini" ] && { echo "mert-moses.pl: done already ($W/mert)"; return; }
    local start=$(date +%s)
    # --continue resumes a stopped run in the same working directory
    local cont=""; [ -e "$W/mert/finished_step.txt" ] && cont=--continue
    run_nice "$MOSES/scripts/training/mert-moses.pl" "$DEV_EN" "$DEV_FR" "$MOSES/bin/moses" "$INI" \
        --working-dir="$W/mert" --mertdir="$MOSES/bin" --predictable-seeds \
        --decoder-flags="-threads $THREADS" --maximum-iterations="$ITERATIONS" $cont \
        > "$W/mert.log" 2> "$W/mert.err"
    echo $(( $(date +%s) - start )) >> "$W/mert.seconds"
}

step_rerank() {
    [ -s "$W/rerank/weights.moses.ini" ] && { echo "rerank tune: done already ($W/rerank)"; return; }
    mkdir -p "$W/rerank"
    local start=$(date +%s)
    # the decoder command of mert-moses.pl, with the weights and file names as placeholders
    run_nice "$RERANK" tune --source "$DEV_EN" -r "$DEV_FR" --init "$INI" -o "$W/rerank/weights.yaml" \
        --decoder "$MOSES/bin/moses -config $INI -weight-overwrite {weights_overwrite} -n-best-list {nbest} {nbest_size} distinct -input-file {source}" \
        --decoder-flags "-threads $THREADS" --optimizer mert --restarts 20 --nbest-size 100 \
        --iterations "$ITERATIONS" --tokenize none > "$W/rerank.log" 2> "$W/rerank.err"
    echo $(( $(date +%s) - start )) >> "$W/rerank.seconds"
}

step_test() {
    # val and test_2016_flickr decoded with each tuner's final moses.ini
    local name ini set src
    for name in mert rerank; do
        ini=$W/mert/moses.ini; [ $name = rerank ] && ini=$W/rerank/weights.moses.ini
        for set in val test; do
            src=$DEV_EN; [ $set = test ] && src=$TEST_EN
            [ -s "$W/$set.$name.1best" ] && continue
            run_nice "$MOSES/bin/moses" -config "$ini" -threads "$THREADS" -input-file "$src" \
                > "$W/$set.$name.1best.tmp" 2> "$W/$set.$name.log"
            mv "$W/$set.$name.1best.tmp" "$W/$set.$name.1best"
        done
    done
}

step_report() {
    local i out
    echo "== mert-moses.pl ($W/mert): $(awk '{s += $1} END {print s}' "$W/mert.seconds") s wall =="
    echo "iteration  decoder-BLEU  tuned-BLEU (mert)"
    for out in $(ls "$W"/mert/run*.out | grep -E '/run[0-9]+\.out$' | sort -V); do
        i=$(basename "$out" .out); i=${i#run}
        printf "%9s  %12s  %s\n" "$i" "$(bleu "$DEV_FR" "$out")" \
            "$(grep -o "^($i) BEST at $i: .* => [0-9.]*" "$W/mert.log" | sed 's/.* => //')"
    done
    echo "final weights: $(grep -A20 '^\[weight\]' "$W/mert/moses.ini" | grep '=' | tr '\n' ' ')"
    echo
    echo "== rerank tune --decoder ($W/rerank): $(awk '{s += $1} END {print s}' "$W/rerank.seconds") s wall =="
    sed -n '/^iteration/,$p' "$W/rerank.log"
    echo
    echo "== val, decoded with each final moses.ini =="
    "$RERANK" evaluate --tokenize none -r "$DEV_FR" "mert-moses.pl=$W/val.mert.1best" "rerank=$W/val.rerank.1best"
    echo
    echo "== test_2016_flickr, decoded with each final moses.ini =="
    "$RERANK" evaluate --tokenize none -r "$TEST_FR" "mert-moses.pl=$W/test.mert.1best" "rerank=$W/test.rerank.1best"
    echo "lines that differ between the two: val $(diff "$W/val.mert.1best" "$W/val.rerank.1best" | grep -c '^<'), " \
         "test $(diff "$W/test.mert.1best" "$W/test.rerank.1best" | grep -c '^<')"
}

for step in $STEPS; do
    echo "[$(date '+%F %T')] $step"
    "step_$step"
done
