"""Keep each sentence's first N hypotheses of an n-best list (its lines unchanged).

A 1000-best list gives the 100- and 300-best lists of the same decoding without decoding again, so
that list sizes can be compared on one search:

  rerank cut-nbest dev.1000best.gz -n 100 -o dev.100best.gz

A list scored by ``rerank score-nbest`` keeps its record (``OUT.features.yaml``, what each feature was computed
from), so that ``score-nbest --reuse`` takes the cut list's values.
"""

from __future__ import annotations

import argparse

from rerank.commands.arguments import positive_int

# files written and read, checked by rerank.cli before the command runs: no output is an input
OUTPUTS = ("output",)
INPUTS = ("nbest",)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("nbest", metavar="NBEST", help="Moses n-best list (.gz allowed)")
    parser.add_argument("-n", "--size", type=positive_int, required=True, metavar="N",
                        help="hypotheses kept per sentence: the first N in the list's order")
    parser.add_argument("-o", "--output", default="-", metavar="OUT", help="the cut list (default: stdout)")


def run(args: argparse.Namespace) -> int:
    from rerank.rescore.cut import cut_nbest

    cut_nbest(args.nbest, args.size, args.output)
    return 0
