#!/usr/bin/env bash
# The rescoring study of docs/results/more-features.md: a Moses system's val and test_2016_flickr
# 100-best lists scored with the neural features it is given (a second RNNsearch, an ensemble of three
# seeds, the right-to-left and the French-to-English channel models, the CSLM) beside the five base features
# (the shipped encoder-decoder and RNNsearch, the 4-gram LM again and two penalties); then MERT (and
# OPTIMIZERS) on val for every feature set (the five base features, they plus each new feature, all, all but
# one), seeds 1 2 3, applied to test; with ENSEMBLE, the ensemble's own 20-best lists and the union of
# both lists; with UNION=rnnsearch, the union with the shipped RNNsearch's 20-best lists in which every
# line has Moses' features (forced decoding with the real Moses); the oracle BLEU of each pool.
#
# usage: bash scripts/rescoring_study.sh [SHARED]
# environment (the models: give at least one):
#   SMALL       rnnsearch-small trained with seed 1234 (configs/rnnsearch-small.yaml): Small0
#   ENSEMBLE    three rnnsearch-small seeds, space-separated (SMALL and --seed 2, 3): Ens0, and the union
#   R2L         a right-to-left model (configs/rnnsearch-small-r2l.yaml): R2L0
#   CHANNEL     a French-to-English model (configs/rnnsearch-small-fr-en.yaml): Chan0
#   CSLM        a CSLM (configs/cslm.yaml), completed by the Moses system's 4-gram LM: CSLM0
#   LISTS       a folder with val.100best.gz and test.100best.gz; default: those of the RNNsearch-column
#               system of scripts/phrase_table_study.sh, tuning run 1 (its seed1.* files are linked here);
#               "shipped": the shipped Moses system's lists (INIT and MOSES_INI: its moses.ini)
#   UNION       "rnnsearch": the union with the shipped RNNsearch's 20-best (beam 20, UNK replacement from
#               the phrase table), Moses' features on every line by forced decoding with MOSES_INI, the
#               moses.ini that made the lists (its paths absolute), and the Moses of SHARED/tools/moses
#   INIT        the system's tuned weights, MERT's starting point (YAML or moses.ini; default: that run's)
#   SENTENCES   the first N sentences only (a quick check of the whole pipeline; default: all)
#   SEEDS       tuning seeds (default "1 2 3"), OPTIMIZERS (default "mert"), THREADS (default 2),
#   DEVICE      cpu or cuda (default cpu), WORK (default runs/rescoring-study)
# Every step whose output exists is skipped: start the script again after a stop.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
SHARED=$(cd "${1:-$ROOT/../shared}" && pwd)
SMALL=${SMALL:-} ENSEMBLE=${ENSEMBLE:-} R2L=${R2L:-} CHANNEL=${CHANNEL:-} CSLM=${CSLM:-}
[ -n "$SMALL$ENSEMBLE$R2L$CHANNEL$CSLM" ] || { echo "rescoring_study: give SMALL, ENSEMBLE, R2L, CHANNEL or CSLM" >&2; exit 2; }
SEEDS=${SEEDS:-1 2 3}
OPTIMIZERS=${OPTIMIZERS:-mert}
THREADS=${THREADS:-2}
DEVICE=${DEVICE:-cpu}
RERANK=$ROOT/.venv/bin/rerank
DATA=$SHARED/data/moses-multi30k
TOK=$SHARED/data/multi30k/tok
W=$(mkdir -p "${WORK:-$ROOT/runs/rescoring-study}" && cd "${WORK:-$ROOT/runs/rescoring-study}" && pwd)

# 1. The inputs: sources, references and the system's lists (cut to SENTENCES for a quick check).
if [ "${LISTS:-}" = shipped ]; then
    LISTS=$W/system
    mkdir -p "$LISTS"
    ln -sf "$DATA/nbest/val.100best.gz" "$LISTS/val.100best.gz"
    ln -sf "$DATA/nbest/test_2016_flickr.100best.gz" "$LISTS/test.100best.gz"
    sed -e "s#MODEL_DIR/#$DATA/model/#" -e "s#LM_DIR/#$DATA/lm/#" "$DATA/model/moses.ini" > "$LISTS/moses.ini"
    INIT=${INIT:-$LISTS/moses.ini} MOSES_INI=${MOSES_INI:-$LISTS/moses.ini}
elif [ -z "${LISTS:-}" ]; then
    LISTS=$W/system
    mkdir -p "$LISTS"
    study=$ROOT/runs/phrase-table-study/rnnsearch
    for f in val.100best.gz test.100best.gz; do ln -sf "$study/seed1.$f" "$LISTS/$f"; done
    INIT=${INIT:-$study/seed1.yaml}
fi
: "${INIT:?the tuned weights of the system}"
declare -A SRC REF LIST
for split in val test; do
    name=$split; [ "$split" = test ] && name=test_2016_flickr
    SRC[$split]=$TOK/$name.lc.norm.tok.en
    REF[$split]=$TOK/$name.lc.norm.tok.fr
    LIST[$split]=$LISTS/$split.100best.gz
    if [ -n "${SENTENCES:-}" ]; then
        head -n "$SENTENCES" "${SRC[$split]}" > "$W/$split.en"
        head -n "$SENTENCES" "${REF[$split]}" > "$W/$split.fr"
        zcat "${LIST[$split]}" | awk -F' [|][|][|] ' -v n="$SENTENCES" '$1 < n' | gzip > "$W/$split.100best.gz"
        SRC[$split]=$W/$split.en; REF[$split]=$W/$split.fr; LIST[$split]=$W/$split.100best.gz
    fi
done

# 2. Every feature, on both lists.
extra=
{
    echo "batch_sentences: 64"
    echo "features:"
    echo "  - {kind: nmt, name: RNN0, model: $ROOT/examples/models/encdec, device: $DEVICE}"
    echo "  - {kind: nmt, name: RNNsearch0, model: $ROOT/examples/models/rnnsearch, device: $DEVICE}"
    if [ -n "$SMALL" ]; then
        echo "  - {kind: nmt, name: Small0, model: $SMALL, device: $DEVICE}"; extra+=" Small0"
    fi
    if [ -n "$ENSEMBLE" ]; then
        read -r -a ens <<< "$ENSEMBLE"
        ens_yaml=$(printf '%s, ' "${ens[@]}")
        echo "  - {kind: nmt, name: Ens0, model: [${ens_yaml%, }], per_word: true, device: $DEVICE}"; extra+=" Ens0"
    fi
    if [ -n "$R2L" ]; then
        echo "  - {kind: nmt, name: R2L0, model: $R2L, per_word: true, device: $DEVICE}"; extra+=" R2L0"
    fi
    if [ -n "$CHANNEL" ]; then
        echo "  - {kind: nmt, name: Chan0, model: $CHANNEL, channel: true, per_word: true, device: $DEVICE}"
        extra+=" Chan0"
    fi
    if [ -n "$CSLM" ]; then
        echo "  - {kind: cslm, name: CSLM0, model: $CSLM, lm: $DATA/lm/train.fr.4.arpa, device: $DEVICE}"
        extra+=" CSLM0"
    fi
    echo "  - {kind: kenlm, name: LM1, path: $DATA/lm/train.fr.4.arpa}"
    echo "  - {kind: word-penalty, name: WP1}"
    echo "  - {kind: unk-penalty, name: UNK1, vocab: $ROOT/examples/models/rnnsearch/vocab.trg.txt}"
} > "$W/features.yaml"
extra=${extra# }
for split in val test; do
    [ -s "$W/$split.scored.gz" ] || "$RERANK" -q score-nbest "${LIST[$split]}" --source "${SRC[$split]}" \
        --config "$W/features.yaml" --threads "$THREADS" -o "$W/$split.scored.gz"
done

# 3. The ensemble's own 20-best lists (beam 20), the union with the system's, scored the same way
#    but for the system's own features, which exist only for its hypotheses.
for split in val test; do
    [ -n "$ENSEMBLE" ] || break
    [ -s "$W/$split.ensemble.20best.gz" ] || "$RERANK" -q translate --model "${ens[@]}" -i "${SRC[$split]}" \
        --beam 20 --nbest 20 --length-penalty wu --device "$DEVICE" -o "$W/$split.ensemble.20best.gz"
    [ -s "$W/$split.union.gz" ] || "$RERANK" -q merge-nbest Moses="${LIST[$split]}" \
        Ensemble="$W/$split.ensemble.20best.gz" -o "$W/$split.union.gz"
    [ -s "$W/$split.union.scored.gz" ] || "$RERANK" -q score-nbest "$W/$split.union.gz" \
        --source "${SRC[$split]}" --config "$W/features.yaml" --threads "$THREADS" -o "$W/$split.union.scored.gz"
done

# 3b. The shipped RNNsearch's own 20-best lists (beam 20) and their union with the system's, every line with
#     Moses' features (copied, forced-decoded, or its sentence's mean and Unreachable0= 1), scored the same way.
if [ "${UNION:-}" = rnnsearch ]; then
    : "${MOSES_INI:?the moses.ini that made the lists, for forced decoding}"
    MOSES=$SHARED/tools/moses
    for split in val test; do
        [ -s "$W/$split.rnnsearch.20best.gz" ] || "$RERANK" -q translate --model "$ROOT/examples/models/rnnsearch" \
            -i "${SRC[$split]}" --beam 20 --nbest 20 --length-penalty wu --unk-replace \
            --phrase-table "$DATA/model/phrase-table.gz" --threads "$THREADS" --device "$DEVICE" \
            -o "$W/$split.rnnsearch.20best.gz"
        [ -s "$W/$split.union-moses.gz" ] || "$RERANK" -q merge-nbest Moses="${LIST[$split]}" \
            RNNsearch="$W/$split.rnnsearch.20best.gz" --moses-ini "$MOSES_INI" --source "${SRC[$split]}" \
            --moses "$MOSES/bin/moses" --threads "$THREADS" \
            --filter-script "$MOSES/scripts/training/filter-model-given-input.pl" -o "$W/$split.union-moses.gz"
        [ -s "$W/$split.union-moses.scored.gz" ] || "$RERANK" -q score-nbest "$W/$split.union-moses.gz" \
            --source "${SRC[$split]}" --config "$W/features.yaml" --threads "$THREADS" \
            -o "$W/$split.union-moses.scored.gz"
    done
fi

# 4. The rows: MERT (and OPTIMIZERS) on val for each feature set, the weights applied to test.
moses=$(set +o pipefail; zcat "${LIST[val]}" | head -1 | awk -F' [|][|][|] ' '{ print $3 }' | tr ' ' '\n' | sed -n 's/=$//p' | paste -sd,)
new=RNN0,RNNsearch0,LM1,WP1,UNK1
declare -A ROWS=([base]="$moses,$new" [all]="$moses,$new,${extra// /,}")
rows="base"
for add in $extra; do ROWS[plus-$add]="$moses,$new,$add"; rows+=" plus-$add"; done
rows+=" all"
for drop in RNN0 RNNsearch0 LM1 $extra; do
    ROWS[without-$drop]=$(tr ',' '\n' <<< "${ROWS[all]}" | grep -vx "$drop" | paste -sd,)
    rows+=" without-$drop"
done
if [ -n "$ENSEMBLE" ]; then ROWS[union]="InMoses,InEnsemble,$new,${extra// /,}"; rows+=" union"; fi
if [ "${UNION:-}" = rnnsearch ]; then
    ROWS[union-moses]="Unreachable0,InMoses,InRNNsearch,${ROWS[all]}"; rows+=" union-moses"
fi
bleu() { "$RERANK" evaluate --tokenize none -r "$1" "$2" --json - |
         python3 -c 'import json,sys; print("%.2f" % json.load(sys.stdin)["systems"][0]["bleu"])'; }
mkdir -p "$W/tuning"
printf '%-22s %-6s %-5s %7s %7s\n' row optim seed val test > "$W/results.txt"
for row in $rows; do
    case $row in union|union-moses) prefix=$row. ;; *) prefix= ;; esac
    for optimizer in $OPTIMIZERS; do
        for seed in $SEEDS; do
            out=$W/tuning/$row.$optimizer.$seed
            [ -s "$out.yaml" ] || "$RERANK" -q tune --nbest "$W/val.${prefix}scored.gz" -r "${REF[val]}" \
                --init "$INIT" --features "${ROWS[$row]}" --optimizer "$optimizer" --seed "$seed" \
                -o "$out.yaml" > "$out.log" 2>&1
            for split in val test; do
                [ -s "$out.$split.1best" ] || "$RERANK" -q apply "$W/$split.${prefix}scored.gz" \
                    --weights "$out.yaml" --source "${SRC[$split]}" -o "$out.$split.1best"
            done
            printf '%-22s %-6s %-5s %7s %7s\n' "$row" "$optimizer" "$seed" "$(bleu "${REF[val]}" "$out.val.1best")" \
                "$(bleu "${REF[test]}" "$out.test.1best")" >> "$W/results.txt"
        done
    done
done

# 5. The table (mean ± sd over the seeds) and the oracle BLEU of each candidate pool.
awk 'NR > 1 { k = $1 " " $2; n[k]++; v[k] += $4; vv[k] += $4 * $4; t[k] += $5; tt[k] += $5 * $5 }
     END { for (k in n) { mv = v[k] / n[k]; mt = t[k] / n[k]
           d = n[k] > 1 ? n[k] - 1 : 1   # sample standard deviation
           printf "%-30s val %.2f ± %.2f  test %.2f ± %.2f\n", k, mv, sqrt((vv[k] - n[k] * mv * mv) / d + 1e-12),
                  mt, sqrt((tt[k] - n[k] * mt * mt) / d + 1e-12) } }' "$W/results.txt" | sort
for split in val test; do
    pools=("${LIST[$split]}")
    [ -z "$ENSEMBLE" ] || pools+=("$W/$split.ensemble.20best.gz" "$W/$split.union.gz")
    [ "${UNION:-}" != rnnsearch ] || pools+=("$W/$split.rnnsearch.20best.gz" "$W/$split.union-moses.gz")
    "$RERANK" oracle -r "${REF[$split]}" "${pools[@]}"
done
