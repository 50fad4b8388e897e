#!/usr/bin/env bash
# Cho et al. (2014), Table 1, as they ran it, on the real Moses Multi30k English->French system: add a
# neural model's p(target | source) to every phrase pair as one more phrase-table feature, re-tune
# Moses with it (rerank tune --decoder "moses ..."), and decode val and test_2016_flickr with the
# tuned moses.ini. One system per model directory given, beside the baseline re-tuned the same way.
#
# usage: bash scripts/phrase_table_study.sh [SHARED] [MODEL_DIR ...]
#   SHARED      the folder that holds tools/moses and data/ (default ../shared)
#   MODEL_DIR   trained models (default: examples/models/encdec examples/models/rnnsearch)
# environment (all optional):
#   SEEDS       tuning seeds, one tuning run each (default "1 2 3")
#   THREADS     Moses' decoding threads (default 2)
#   BASELINE    "no" to leave the re-tuned baseline out (default: in)
#   WORK        the work directory (default runs/phrase-table-study)
#   RESCORE     a system (or "best", by val BLEU) whose own 100-best lists get the n-best features and
#               re-tuned weights (step 5; default: none)
#
# The model is first filtered to the sources of val and test_2016_flickr, as Moses users do (the
# neural scores are computed only for the pairs Moses can use on them). Every step whose output is
# there already is skipped, and a stopped tuning run resumes where it stopped: start the script
# again after a stop.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
SHARED=$(cd "${1:-$ROOT/../shared}" && pwd)
shift || true
MODELS=("$@")
[ ${#MODELS[@]} -gt 0 ] || MODELS=("$ROOT/examples/models/encdec" "$ROOT/examples/models/rnnsearch")
SEEDS=${SEEDS:-1 2 3}
THREADS=${THREADS:-2}

MOSES=$SHARED/tools/moses
DATA=$SHARED/data/moses-multi30k
TOK=$SHARED/data/multi30k/tok
DEV=$TOK/val.lc.norm.tok
TEST=$TOK/test_2016_flickr.lc.norm.tok
RERANK=$ROOT/.venv/bin/rerank
W=$(mkdir -p "${WORK:-$ROOT/runs/phrase-table-study}" && cd "${WORK:-$ROOT/runs/phrase-table-study}" && pwd)
TIMES=$W/times.txt

timed() { # timed LABEL COMMAND...: run it (its output goes where the caller sends it), and add
           # "LABEL: N s" to times.txt
    local label=$1 start
    shift
    start=$(date +%s)
    "$@"
    echo "$label: $(( $(date +%s) - start )) s" >> "$TIMES"
}
bleu() { "$RERANK" evaluate --tokenize none -r "$1" "$2" --json - |
         python3 -c 'import json,sys; print("%.2f" % json.load(sys.stdin)["systems"][0]["bleu"])'; }

# 1. The shipped moses.ini with real paths, filtered to val + test_2016_flickr.
if [ ! -s "$W/filtered/moses.ini" ]; then
    sed -e "s#MODEL_DIR#$DATA/model#g" -e "s#LM_DIR#$DATA/lm#g" "$DATA/model/moses.ini" > "$W/moses.ini"
    cat "$DEV.en" "$TEST.en" > "$W/filter-input.en"
    rm -rf "$W/filtered.tmp"
    timed "filter the model" "$MOSES/scripts/training/filter-model-given-input.pl" "$W/filtered.tmp" \
        "$W/moses.ini" "$W/filter-input.en" > "$W/filter.log" 2>&1
    mv "$W/filtered.tmp" "$W/filtered"
    sed -i "s#$W/filtered.tmp#$W/filtered#g" "$W/filtered/moses.ini"
fi
TABLE=$(sed -n 's/.*PhraseDictionaryMemory.* path=\([^ ]*\).*/\1/p' "$W/filtered/moses.ini")

# 2. One more phrase-table column per model, and the moses.ini that uses it.
systems=()
[ "${BASELINE:-yes}" = no ] || systems=(baseline)
for model in "${MODELS[@]}"; do
    name=$(basename "$model")
    mkdir -p "$W/$name"
    if [ ! -s "$W/$name/moses.ini" ]; then
        timed "score-table $name ($(zcat "$TABLE" | wc -l) pairs)" "$RERANK" -q score-table "$TABLE" \
            -o "$W/$name/phrase-table.gz" --model "$model" --moses-ini "$W/filtered/moses.ini" \
            --moses-ini-out "$W/$name/moses.ini"
    fi
    systems+=("$name")
done
mkdir -p "$W/baseline"
[ -s "$W/baseline/moses.ini" ] || cp "$W/filtered/moses.ini" "$W/baseline/moses.ini"

# 3. Each system tuned on val from its moses.ini (the shipped weights, 0.2 for a new column), once per
#    seed, then val and test_2016_flickr decoded with the tuned moses.ini.
for system in "${systems[@]}"; do
    for seed in $SEEDS; do
        out=$W/$system/seed$seed
        if [ ! -s "$out.moses.ini" ]; then
            timed "tune $system seed $seed" "$RERANK" tune --source "$DEV.en" -r "$DEV.fr" \
                --init "$W/$system/moses.ini" --seed "$seed" --restarts 20 --nbest-size 100 -o "$out.yaml" \
                --decoder-flags "-threads $THREADS" \
                --decoder "$MOSES/bin/moses -f $W/$system/moses.ini -n-best-list {nbest} {nbest_size} distinct -weight-overwrite {weights_overwrite}" \
                > "$out.tune.log" 2>&1
        fi
        for split in val test; do
            src=$DEV.en; [ "$split" = test ] && src=$TEST.en
            if [ ! -s "$out.$split.1best" ]; then
                timed "decode $split $system seed $seed" "$MOSES/bin/moses" -f "$out.moses.ini" -threads "$THREADS" \
                    -input-file "$src" > "$out.$split.1best" 2> "$out.$split.log"
            fi
        done
    done
done

# 4. With RESCORE=SYSTEM (or RESCORE=best: the system with the best mean val BLEU): each tuning run of
#    SYSTEM decodes val and test_2016_flickr into 100-best lists (distinct) with its tuned moses.ini,
#    score-nbest appends RNN0 RNNsearch0 LM1 WP1 UNK1, and the weights of all features are re-tuned on the
#    val list (MERT, the run's seed) and applied to the test list.
val_mean() { for seed in $SEEDS; do bleu "$DEV.fr" "$W/$1/seed$seed.val.1best"; done |
             awk '{ s += $1 } END { printf "%.4f", s / NR }'; }
rescored=
if [ -n "${RESCORE:-}" ]; then
    rescored=$RESCORE
    if [ "$rescored" = best ]; then
        rescored=$(for system in "${systems[@]}"; do echo "$(val_mean "$system") $system"; done |
                   sort -rn | head -1 | cut -d' ' -f2)
    fi
    cat > "$W/rescore.yaml" <<YAML
batch_sentences: 64
features:
  - {kind: nmt, name: RNN0, model: $ROOT/examples/models/encdec}
  - {kind: nmt, name: RNNsearch0, model: $ROOT/examples/models/rnnsearch}
  - {kind: kenlm, name: LM1, path: $DATA/lm/train.fr.4.arpa}
  - {kind: word-penalty, name: WP1}
  - {kind: unk-penalty, name: UNK1, vocab: $ROOT/examples/models/rnnsearch/vocab.trg.txt}
YAML
    for seed in $SEEDS; do
        out=$W/$rescored/seed$seed
        for split in val test; do
            src=$DEV.en; [ "$split" = test ] && src=$TEST.en
            if [ ! -s "$out.$split.100best.gz" ]; then
                timed "decode $split 100-best $rescored seed $seed" "$MOSES/bin/moses" -f "$out.moses.ini" \
                    -threads "$THREADS" -n-best-list "$out.$split.100best" 100 distinct -input-file "$src" \
                    > /dev/null 2> "$out.$split.100best.log"
                gzip -f "$out.$split.100best"
            fi
            if [ ! -s "$out.$split.scored.gz" ]; then
                timed "score-nbest $split $rescored seed $seed" "$RERANK" -q score-nbest "$out.$split.100best.gz" \
                    --source "$src" --config "$W/rescore.yaml" --threads "$THREADS" -o "$out.$split.scored.gz"
            fi
        done
        if [ ! -s "$out.rescored.yaml" ]; then
            timed "tune rescored $rescored seed $seed" "$RERANK" -q tune --nbest "$out.val.scored.gz" -r "$DEV.fr" \
                --init "$out.yaml" --seed "$seed" --restarts 20 -o "$out.rescored.yaml" > "$out.rescored.log" 2>&1
        fi
        for split in val test; do
            src=$DEV.en; [ "$split" = test ] && src=$TEST.en
            "$RERANK" -q apply "$out.$split.scored.gz" --weights "$out.rescored.yaml" --source "$src" \
                -o "$out.$split.rescored.1best"
        done
    done
fi

# 5. The table: val and test BLEU of every tuning run, their mean and standard deviation.
echo
printf '%-12s %-8s %8s %8s %11s\n' system seed val test iterations
for system in "${systems[@]}"; do
    for seed in $SEEDS; do
        out=$W/$system/seed$seed
        iterations=$(ls "$out.work"/run*.tuned.yaml 2>/dev/null | wc -l)
        printf '%-12s %-8s %8s %8s %11s\n' "$system" "$seed" "$(bleu "$DEV.fr" "$out.val.1best")" \
            "$(bleu "$TEST.fr" "$out.test.1best")" "$iterations"
    done
done
if [ -n "$rescored" ]; then
    for seed in $SEEDS; do
        out=$W/$rescored/seed$seed
        printf '%-12s %-8s %8s %8s %11s\n' "$rescored+rescored" "$seed" "$(bleu "$DEV.fr" "$out.val.rescored.1best")" \
            "$(bleu "$TEST.fr" "$out.test.rescored.1best")" 1
    done
fi
echo
echo "BLEU: $("$RERANK" evaluate --tokenize none -r "$TEST.fr" "$W/baseline/seed${SEEDS%% *}.test.1best" --json - |
    python3 -c 'import json,sys; print(json.load(sys.stdin)["bleu_signature"])')"
echo "wall times (2-core machine), from $TIMES:"
cat "$TIMES"
