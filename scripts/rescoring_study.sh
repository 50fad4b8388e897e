#!/usr/bin/env bash
# The rescoring study of README "More neural features": a Moses system's val and test_2016_flickr
# 100-best lists scored with every neural feature (two RNNsearch models, an ensemble of three seeds,
# the right-to-left and the French-to-English channel models), the 4-gram LM again and two penalties;
# then MERT on val for every feature set (all, all but one, the first round's), seeds 1 2 3, applied to
# test; the ensemble's own 20-best lists; the union of both lists; the oracle BLEU of each pool.
#
# usage: bash scripts/rescoring_study.sh [SHARED]
# environment:
#   SMALL       rnnsearch-small trained with seed 1234 (configs/rnnsearch-small.yaml)      [required]
#   ENSEMBLE    three rnnsearch-small seeds, space-separated (SMALL and --seed 2, 3)      [required]
#   R2L         the right-to-left model (configs/rnnsearch-small-r2l.yaml)                 [required]
#   CHANNEL     the French-to-English model (configs/rnnsearch-small-fr-en.yaml)           [required]
#   LISTS       a folder with val.100best.gz and test.100best.gz; default: those of the RNNsearch-column
#               system of scripts/phrase_table_study.sh, tuning run 1 (its seed1.* files are linked here)
#   INIT        the system's tuned weights, MERT's starting point (YAML or moses.ini; default: that run's)
#   SENTENCES   the first N sentences only (a quick check of the whole pipeline; default: all)
#   SEEDS       tuning seeds (default "1 2 3"), OPTIMIZERS (default "mert"), THREADS (default 2),
#   DEVICE      cpu or cuda (default cpu), WORK (default runs/rescoring-study)
# Every step whose output exists is skipped: start the script again after a stop.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
SHARED=$(cd "${1:-$ROOT/../shared}" && pwd)
: "${SMALL:?the rnnsearch-small model}" "${ENSEMBLE:?three rnnsearch-small seeds}" "${R2L:?the R2L model}" \
  "${CHANNEL:?the fr-en model}"
SEEDS=${SEEDS:-1 2 3}
OPTIMIZERS=${OPTIMIZERS:-mert}
THREADS=${THREADS:-2}
DEVICE=${DEVICE:-cpu}
RERANK=$ROOT/.venv/bin/rerank
DATA=$SHARED/data/moses-multi30k
TOK=$SHARED/data/multi30k/tok
W=$(mkdir -p "${WORK:-$ROOT/runs/rescoring-study}" && cd "${WORK:-$ROOT/runs/rescoring-study}" && pwd)

# 1. The inputs: sources, references and the system's lists (cut to SENTENCES for a quick check).
if [ -z "${LISTS:-}" ]; then
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
read -r -a ens <<< "$ENSEMBLE"
ens_yaml=$(printf '%s, ' "${ens[@]}"); ens_yaml="[${ens_yaml%, }]"
cat > "$W/features.yaml" <<YAML
batch_sentences: 64
features:
  - {kind: nmt, name: RNN0, model: $ROOT/examples/models/encdec, device: $DEVICE}
  - {kind: nmt, name: RNNsearch0, model: $ROOT/examples/models/rnnsearch, device: $DEVICE}
  - {kind: nmt, name: Small0, model: $SMALL, device: $DEVICE}
  - {kind: nmt, name: Ens0, model: $ens_yaml, per_word: true, device: $DEVICE}
  - {kind: nmt, name: R2L0, model: $R2L, per_word: true, device: $DEVICE}
  - {kind: nmt, name: Chan0, model: $CHANNEL, channel: true, per_word: true, device: $DEVICE}
  - {kind: kenlm, name: LM1, path: $DATA/lm/train.fr.4.arpa}
  - {kind: word-penalty, name: WP1}
  - {kind: unk-penalty, name: UNK1, vocab: $ROOT/examples/models/rnnsearch/vocab.trg.txt}
YAML
for split in val test; do
    [ -s "$W/$split.scored.gz" ] || "$RERANK" -q score-nbest "${LIST[$split]}" --source "${SRC[$split]}" \
        --config "$W/features.yaml" --threads "$THREADS" -o "$W/$split.scored.gz"
done

# 3. The ensemble's own 20-best lists (beam 20), the union with the system's, scored the same way
#    but for the system's own features, which exist only for its hypotheses.
for split in val test; do
    [ -s "$W/$split.ensemble.20best.gz" ] || "$RERANK" -q translate --model "${ens[@]}" -i "${SRC[$split]}" \
        --beam 20 --nbest 20 --length-penalty wu --device "$DEVICE" -o "$W/$split.ensemble.20best.gz"
    [ -s "$W/$split.union.gz" ] || "$RERANK" -q merge-nbest Moses="${LIST[$split]}" \
        Ensemble="$W/$split.ensemble.20best.gz" -o "$W/$split.union.gz"
    [ -s "$W/$split.union.scored.gz" ] || "$RERANK" -q score-nbest "$W/$split.union.gz" \
        --source "${SRC[$split]}" --config "$W/features.yaml" --threads "$THREADS" -o "$W/$split.union.scored.gz"
done

# 4. The rows: MERT (and OPTIMIZERS) on val for each feature set, the weights applied to test.
moses=$(set +o pipefail; zcat "${LIST[val]}" | head -1 | awk -F' [|][|][|] ' '{ print $3 }' | tr ' ' '\n' | sed -n 's/=$//p' | paste -sd,)
new=RNN0,RNNsearch0,LM1,WP1,UNK1
extra="Small0 Ens0 R2L0 Chan0"
declare -A ROWS=([base]="$moses,$new" [all]="$moses,$new,${extra// /,}")
for drop in RNN0 RNNsearch0 LM1 $extra; do
    ROWS[without-$drop]=$(tr ',' '\n' <<< "${ROWS[all]}" | grep -vx "$drop" | paste -sd,)
done
ROWS[union]="InMoses,InEnsemble,$new,${extra// /,}"
bleu() { "$RERANK" evaluate --tokenize none -r "$1" "$2" --json - |
         python3 -c 'import json,sys; print("%.2f" % json.load(sys.stdin)["systems"][0]["bleu"])'; }
mkdir -p "$W/tuning"
printf '%-22s %-6s %-5s %7s %7s\n' row optim seed val test > "$W/results.txt"
for row in base all $(for d in RNN0 RNNsearch0 LM1 $extra; do echo "without-$d"; done) union; do
    prefix=; [ "$row" = union ] && prefix=union.
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
    "$RERANK" oracle -r "${REF[$split]}" "${LIST[$split]}" "$W/$split.ensemble.20best.gz" "$W/$split.union.gz"
done
