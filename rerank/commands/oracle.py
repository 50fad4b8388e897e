"""Oracle BLEU of n-best lists: the corpus BLEU of the best hypothesis per sentence, beside that of the
lists' first hypotheses, so that the headroom of reranking a candidate pool is known.

The oracle is the usual greedy approximation (a lower bound): each sentence's best BLEU+1, then
sweeps that give each sentence the hypothesis maximising corpus BLEU with the others fixed. For the
oracle of several systems' candidates together, score their union (`rerank merge-nbest`).
"""

from __future__ import annotations

import argparse
import logging

logger = logging.getLogger(__name__)

# files written and read, checked by rerank.cli before the command runs: no output is an input
OUTPUTS = ("output",)
INPUTS = ("nbest", "references")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("nbest", nargs="+", metavar="NBEST", help="Moses n-best lists of the same source (.gz allowed)")
    parser.add_argument("-r", "--reference", action="append", required=True, metavar="REF", dest="references",
                        help="reference translations; repeat for several references")
    parser.add_argument("--tokenize", default="none", metavar="TOK",
                        help="sacrebleu's BLEU tokenizer (default none: the text is tokenized)")
    parser.add_argument("-o", "--output", metavar="FILE", help="the oracle's hypothesis of every sentence of the "
                                                                  "last list")


def run(args: argparse.Namespace) -> int:
    from rerank.errors import FormatError, RerankError
    from rerank.formats.files import atomic_output, display_name, read_lines
    from rerank.tune.oracle import list_oracle
    from rerank.tune.stats import BleuStatistics

    references = [[line for _, line in read_lines(path)] for path in args.references]
    for path, lines in zip(args.references, references, strict=True):
        if len(lines) != len(references[0]):
            raise FormatError(display_name(path), None, f"{len(references[0])} lines, as "
                              f"{display_name(args.references[0])} has", got=f"{len(lines)} lines")
    try:
        bleu = BleuStatistics(references, tokenize=args.tokenize)
    except ValueError as e:
        raise RerankError(f"--tokenize: {e}") from None
    print(f"{'n-best list':40s} {'hyps/sent':>9s} {'first':>7s} {'oracle':>7s}")
    for path in args.nbest:
        result = list_oracle(path, bleu, reference_name=display_name(args.references[0]))
        print(f"{display_name(path):40s} {result.hypotheses_per_sentence:9.1f} {result.first:7.2f} "
              f"{result.oracle:7.2f}")
    if args.output:
        with atomic_output(args.output) as out:
            out.writelines(text + "\n" for text in result.choice)
    print(f"BLEU {bleu.signature()}; first: each sentence's first hypothesis; hyps/sent: distinct (words, features)")
    return 0
