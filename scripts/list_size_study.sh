#!/usr/bin/env bash
# docs/results/list-sizes.md: BLEU against n-best list size, and the oracle BLEU of each
# list, on the real Multi30k English->French Moses system (../shared/data/moses-multi30k).
#
#  1. Moses 1000-best lists (distinct) of val and test_2016_flickr with the shipped tuned moses.ini,
#     the model filtered to their sources first; the 300- and 100-best lists are each sentence's first
#     300 and 100 hypotheses of them (`rerank cut-nbest`), checked against the shipped 100-best lists.
#  2. RNNsearch's own n-best lists (examples/models/rnnsearch): beam 20 / 20-best and beam 50 / 50-best.
#  3. The oracle BLEU of every list (`rerank oracle`), beside its 1-best BLEU.
#  4. The features of each list: LM1 WP1 UNK1; the consensus features MBRbleu0 MBRchrf0 (computed on
#     each size's own list: they depend on it) for the sizes in MBR_SIZES; RNN0 and RNNsearch0 (the
#     shipped models, configs/rescore-multi30k-shipped.yaml) once per hypothesis of the 1000-best
#     list, in parts (hypotheses 1-100, 101-300, 301-1000), for the sizes in NEURAL_SIZES. MERT on val (seeds
#     1 2 3, from the shipped weights) with Moses' features alone, with the cheap features, and with
#     all of them; the weights applied to the test list of the same size.
#
# usage: bash scripts/list_size_study.sh [SHARED]      (from anywhere; SHARED defaults to ../shared)
# environment:
#   NBEST_FACTOR  Moses' -n-best-factor for the 1000-best lists (default 10; Moses' default, 20,
#                 costs about 3.5 times the CPU: see docs/results/list-sizes.md)
#   SPLITS        the splits to build and score (default "val test"); the tuning step needs both
#   MBR_SIZES     the list sizes that get the rows with the consensus features (default "100 300 1000")
#   NEURAL_SIZES  those that also get the rows with the neural features (default "100 300 1000"; each
#                 must be in MBR_SIZES)
#   SEEDS         MERT seeds (default "1 2 3"); THREADS (default 2); WORK (default runs/lists)
# Every step whose output exists is skipped: start the script again after a stop. Wall times of the
# steps go to $WORK/times.txt, the BLEU of every tuning run to $WORK/results.txt.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
SHARED=$(cd "${1:-$ROOT/../shared}" && pwd)
NBEST_FACTOR=${NBEST_FACTOR:-10}
SPLITS=${SPLITS:-val test}
NEURAL_SIZES=${NEURAL_SIZES-100 300 1000}
MBR_SIZES=${MBR_SIZES-100 300 1000}
SEEDS=${SEEDS:-1 2 3}
THREADS=${THREADS:-2}
RERANK=$ROOT/.venv/bin/rerank
MOSES=$SHARED/tools/moses
DATA=$SHARED/data/moses-multi30k
TOK=$SHARED/data/multi30k/tok
W=$(mkdir -p "${WORK:-$ROOT/runs/lists}" && cd "${WORK:-$ROOT/runs/lists}" && pwd)
cd "$ROOT"   # the feature configs name their files relative to the repository root

declare -A SRC REF SHIPPED
for split in val test; do
    name=$split; [ "$split" = test ] && name=test_2016_flickr
    SRC[$split]=$TOK/$name.lc.norm.tok.en
    REF[$split]=$TOK/$name.lc.norm.tok.fr
    SHIPPED[$split]=$DATA/nbest/$name.100best.gz
done
# step NAME CMD...: run CMD under nice, its wall time appended to times.txt
step() {
    local name=$1; shift
    local start end
    start=$(date +%s.%N)
    nice -n 10 "$@"
    end=$(date +%s.%N)
    printf '%-40s %8.1f s\n' "$name" "$(echo "$end - $start" | bc)" >> "$W/times.txt"
}

# 1. The filtered model and Moses' 1000-best lists; their 300- and 100-best prefixes.
if [ ! -s "$W/filtered/moses.ini" ]; then
    sed -e "s#MODEL_DIR#$DATA/model#g" -e "s#LM_DIR#$DATA/lm#g" "$DATA/model/moses.ini" > "$W/moses.ini"
    cat "${SRC[val]}" "${SRC[test]}" > "$W/filter-input.en"
    step filter "$MOSES/scripts/training/filter-model-given-input.pl" "$W/filtered" "$W/moses.ini" \
        "$W/filter-input.en" > "$W/filter.log" 2>&1
fi
for split in $SPLITS; do
    if [ ! -s "$W/moses.$split.1000best.gz" ]; then
        step "moses $split 1000-best" "$MOSES/bin/moses" -f "$W/filtered/moses.ini" -threads "$THREADS" \
            -n-best-list "$W/moses.$split.1000best.tmp" 1000 distinct -n-best-factor "$NBEST_FACTOR" \
            < "${SRC[$split]}" > "$W/moses.$split.1best" 2> "$W/moses.$split.1000best.stderr"
        gzip -c "$W/moses.$split.1000best.tmp" > "$W/moses.$split.1000best.tmp.gz"
        mv "$W/moses.$split.1000best.tmp.gz" "$W/moses.$split.1000best.gz"
        rm "$W/moses.$split.1000best.tmp"
    fi
    for n in 300 100; do
        [ -s "$W/moses.$split.${n}best.gz" ] || "$RERANK" -q cut-nbest "$W/moses.$split.1000best.gz" -n "$n" \
            -o "$W/moses.$split.${n}best.gz"
    done
    # The shipped 100-best list, decoded with the whole model, must be a prefix of every sentence's
    # first 100 here (it has fewer than 100 where its own search, 2,000 paths, ran out first).
    python3 - "${SHIPPED[$split]}" "$W/moses.$split.100best.gz" > "$W/check.$split.txt" <<'EOF'
import gzip, sys
def read(path):
    lists = {}
    for line in gzip.open(path, "rt", encoding="utf-8"):
        fields = line.rstrip("\n").split(" ||| ")
        lists.setdefault(fields[0], []).append(" ||| ".join(fields[1:4]))
    return lists
shipped, ours = read(sys.argv[1]), read(sys.argv[2])
prefix = sum(ours.get(i, [])[: len(h)] == h for i, h in shipped.items())
same = sum(ours.get(i, []) == h for i, h in shipped.items())
longer = sum(len(ours.get(i, [])) > len(h) for i, h in shipped.items())
print(f"{len(shipped)} sentences: the shipped 100-best is a prefix of ours for {prefix}, identical for {same}; "
      f"ours is longer for {longer} (shipped {sum(map(len, shipped.values()))} lines, "
      f"ours {sum(map(len, ours.values()))})")
EOF
    cat "$W/check.$split.txt"
done

# 2. RNNsearch's own n-best lists (beam = n-best size, ranked by ln p, no UNK replacement).
for split in $SPLITS; do
    for n in 20 50; do
        out=$W/rnnsearch.$split.${n}best.gz
        [ -s "$out" ] || { step "rnnsearch $split beam $n" "$RERANK" translate --model examples/models/rnnsearch \
            -i "${SRC[$split]}" --beam "$n" --nbest "$n" --threads 1 -o "$W/rnnsearch.$split.${n}best.tmp.gz" \
            2> "$W/translate.$split.${n}best.log" && mv "$W/rnnsearch.$split.${n}best.tmp.gz" "$out"; }
    done
done

# 3. Oracle BLEU of every list.
for split in $SPLITS; do
    [ -s "$W/oracle.$split.txt" ] || "$RERANK" oracle -r "${REF[$split]}" "${SHIPPED[$split]}" \
        "$W/moses.$split.100best.gz" "$W/moses.$split.300best.gz" "$W/moses.$split.1000best.gz" \
        "$W/rnnsearch.$split.20best.gz" "$W/rnnsearch.$split.50best.gz" > "$W/oracle.$split.txt"
    cat "$W/oracle.$split.txt"
done

# 4. Features of each size's own list. The cheap ones first, on every size: LM1 WP1 UNK1 (as in
#    configs/rescore-multi30k-shipped.yaml) and the consensus features MBRbleu0 MBRchrf0
#    (configs/consensus.yaml), which depend on the list they are computed on. Then the neural ones,
#    RNN0 and RNNsearch0, once per hypothesis of the 1000-best list, in parts so that the smaller lists'
#    rows come first: each sentence's hypotheses 1-100, then 101-300, then 301-1000 (a hypothesis'
#    scores do not depend on the others), appended to the lists of the cheap features.
cheap() {
    local split=$1 n=$2
    [ -s "$W/moses.$split.${n}best.lm.gz" ] || step "score-nbest $split $n (LM1 WP1 UNK1)" \
        "$RERANK" score-nbest "$W/moses.$split.${n}best.gz" --lm "$DATA/lm/train.fr.4.arpa" --word-penalty \
        --unk-vocab examples/models/rnnsearch/vocab.trg.txt -o "$W/moses.$split.${n}best.lm.gz"
}
consensus() {
    local split=$1 n=$2
    [ -s "$W/moses.$split.${n}best.base.gz" ] || step "score-nbest $split $n (MBR)" \
        "$RERANK" score-nbest "$W/moses.$split.${n}best.lm.gz" --config configs/consensus.yaml \
        -o "$W/moses.$split.${n}best.base.gz"
}
neural() {
    local split=$1 n=$2 lo parts=() m
    [ -s "$W/moses.$split.${n}best.all.gz" ] && return
    for m in 100 300 1000; do
        case $m in 100) lo=0 ;; 300) lo=100 ;; 1000) lo=300 ;; esac
        [ -s "$W/moses.$split.part$m.gz" ] || { zcat "$W/moses.$split.1000best.gz" |
            awk -F' [|][|][|] ' -v lo=$lo -v hi=$m '{ if ($1 != id) { id = $1; k = 0 } } ++k > lo && k <= hi' |
            gzip > "$W/moses.$split.part$m.tmp.gz" && mv "$W/moses.$split.part$m.tmp.gz" "$W/moses.$split.part$m.gz"; }
        [ -s "$W/moses.$split.part$m.scored.gz" ] || step "score-nbest $split $((lo + 1))-$m (neural, LM, penalties)" \
            "$RERANK" score-nbest "$W/moses.$split.part$m.gz" --source "${SRC[$split]}" \
            --config configs/rescore-multi30k-shipped.yaml --threads "$THREADS" -o "$W/moses.$split.part$m.scored.gz"
        parts+=("$W/moses.$split.part$m.scored.gz")
        [ "$m" = "$n" ] && break
    done
    # Each sentence's lines of the parts, in order, are the lines of its list: append their RNN0 and
    # RNNsearch0 to the lines of the cheap features' list.
    python3 -c '
import gzip, itertools, os, re, sys
*parts, base, out = sys.argv[1:]
def key(line):
    return int(line.split(" ||| ", 1)[0])
scored = {}
for path in parts:
    for i, lines in itertools.groupby(gzip.open(path, "rt", encoding="utf-8"), key=key):
        scored.setdefault(i, []).extend(lines)
neural = re.compile(r" RNN0= \S+ RNNsearch0= \S+")
with gzip.open(out + ".tmp", "wt", encoding="utf-8") as f:
    for i, lines in itertools.groupby(gzip.open(base, "rt", encoding="utf-8"), key=key):
        lines = list(lines)
        assert len(scored[i]) == len(lines), (i, len(scored[i]), len(lines))
        for line, other in zip(lines, scored[i], strict=True):
            fields, others = line.split(" ||| "), other.split(" ||| ")
            assert fields[1] == others[1], (i, fields[1], others[1])
            fields[2] += neural.search(others[2]).group(0)
            f.write(" ||| ".join(fields))
os.replace(out + ".tmp", out)
' "${parts[@]}" "$W/moses.$split.${n}best.base.gz" "$W/moses.$split.${n}best.all.gz"
}

# 5. MERT on val per size and feature set, seeds 1 2 3, from the shipped weights (the new features
#    from 0), the weights applied to the test list of the same size. Rows: Moses' features alone;
#    with LM1 WP1 UNK1 MBRbleu0 MBRchrf0 (base); with RNN0 RNNsearch0 too (all).
moses=$(set +o pipefail; zcat "$W/moses.val.100best.gz" | head -1 | awk -F' [|][|][|] ' '{ print $3 }' |
        tr ' ' '\n' | sed -n 's/=$//p' | paste -sd,)
declare -A ROWS=([moses]="$moses" [base]="$moses,LM1,WP1,UNK1,MBRbleu0,MBRchrf0"
                 [all]="$moses,RNN0,RNNsearch0,LM1,WP1,UNK1,MBRbleu0,MBRchrf0")
declare -A LISTS=([moses]=lm [base]=base [all]=all)
bleu() { "$RERANK" evaluate --tokenize none -r "$1" "$2" --json - |
         python3 -c 'import json,sys; print("%.2f" % json.load(sys.stdin)["systems"][0]["bleu"])'; }
mkdir -p "$W/tuning"
[ -s "$W/results.txt" ] || printf '%-5s %-6s %-5s %7s %7s\n' size row seed val test > "$W/results.txt"
tune() {
    local n=$1 row=$2 seed out split list
    for seed in $SEEDS; do
        out=$W/tuning/$n.$row.$seed
        list=${LISTS[$row]}
        grep -q "^$n *$row *$seed " "$W/results.txt" && continue
        [ -s "$out.yaml" ] || step "mert $n $row seed $seed" "$RERANK" -q tune \
            --nbest "$W/moses.val.${n}best.$list.gz" -r "${REF[val]}" --init "$W/moses.ini" \
            --features "${ROWS[$row]}" --seed "$seed" -o "$out.yaml" > "$out.log" 2>&1
        for split in val test; do
            [ -s "$out.$split.1best" ] || "$RERANK" -q apply "$W/moses.$split.${n}best.$list.gz" \
                --weights "$out.yaml" --source "${SRC[$split]}" -o "$out.$split.1best"
        done
        printf '%-5s %-6s %-5s %7s %7s\n' "$n" "$row" "$seed" "$(bleu "${REF[val]}" "$out.val.1best")" \
            "$(bleu "${REF[test]}" "$out.test.1best")" >> "$W/results.txt"
    done
}
both=no; case " $SPLITS " in *" val "*) case " $SPLITS " in *" test "*) both=yes ;; esac ;; esac
in_list() { case " $2 " in *" $1 "*) return 0 ;; *) return 1 ;; esac; }
for n in 100 300 1000; do
    for split in $SPLITS; do cheap "$split" "$n"; done
    if [ $both = yes ]; then tune "$n" moses; fi
    in_list "$n" "$MBR_SIZES" || continue
    for split in $SPLITS; do consensus "$split" "$n"; done
    if [ $both = yes ]; then tune "$n" base; fi
    in_list "$n" "$NEURAL_SIZES" || continue
    for split in $SPLITS; do neural "$split" "$n"; done
    if [ $both = yes ]; then tune "$n" all; fi
done
[ $both = yes ] || exit 0

# The table: mean ± sample sd over the seeds.
awk 'NR > 1 { k = $1 " " $2; n[k]++; v[k] += $4; vv[k] += $4 * $4; t[k] += $5; tt[k] += $5 * $5 }
     END { for (k in n) { mv = v[k] / n[k]; mt = t[k] / n[k]; d = n[k] > 1 ? n[k] - 1 : 1
           printf "%-12s val %.2f ± %.2f  test %.2f ± %.2f  (%d seeds)\n", k, mv,
                  sqrt((vv[k] - n[k] * mv * mv) / d + 1e-12), mt, sqrt((tt[k] - n[k] * mt * mt) / d + 1e-12), n[k] } }' \
    "$W/results.txt" | sort -n | tee "$W/summary.txt"
