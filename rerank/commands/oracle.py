"""Oracle BLEU of n-best lists: the corpus BLEU of the best hypothesis per sentence, beside that of the
lists' first hypotheses, so that the headroom of reranking a candidate pool is known.

The oracle is the usual greedy approximation (a lower bound): each sentence's best BLEU+1, then
sweeps that give each sentence the hypothesis maximising corpus BLEU with the others fixed. For the
oracle of several systems' candidates together, score their union (`rerank merge-nbest`).
A warning where a list's hypotheses and the references are tokenized or cased differently, or where the
references look unrelated to the list's 1-best (as `rerank evaluate`).
"""

from __future__ import annotations

import argparse
import logging

logger = logging.getLogger(__name__)

# files written and read, checked by rerank.cli before the command runs: no output is an input
OUTPUTS = ("output", "json")
INPUTS = ("nbest", "references")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("nbest", nargs="+", metavar="NBEST", help="Moses n-best lists of the same source (.gz allowed)")
    parser.add_argument("-r", "--reference", action="append", required=True, metavar="REF", dest="references",
                        help="reference translations; repeat for several references")
    parser.add_argument("--tokenize", default="none", metavar="TOK",
                        help="sacrebleu's BLEU tokenizer (default none: the text is tokenized)")
    parser.add_argument("-o", "--output", metavar="FILE", help="the oracle's hypothesis of every sentence of the "
                                                                  "last list")
    parser.add_argument("--json", metavar="FILE", help="also write the figures as JSON: for each list (by its name "
                                                       "as given), first, oracle and hypotheses_per_sentence")


def run(args: argparse.Namespace) -> int:
    from rerank.evaluation.metrics import list_oracles, write_oracle_json
    from rerank.formats.files import atomic_output, display_name

    results, signature = list_oracles(args.nbest, args.references, args.tokenize)
    print(f"{'n-best list':40s} {'hyps/sent':>9s} {'first':>7s} {'oracle':>7s}")
    for path, result in results.items():
        print(f"{display_name(path):40s} {result.hypotheses_per_sentence:9.1f} {result.first:7.2f} "
              f"{result.oracle:7.2f}")
    if args.output:
        with atomic_output(args.output) as out:
            out.writelines(text + "\n" for text in results[args.nbest[-1]].choice)
    if args.json:
        write_oracle_json(results, args.json)
    print(f"BLEU {signature}; first: each sentence's first hypothesis; hyps/sent: distinct (words, features)")
    return 0
