"""Merge the n-best lists of several systems into one, per sentence, with "which system" indicators.

Each distinct hypothesis (same words) appears once, in the order the systems are given. A system's
own features cannot be computed for another system's hypotheses, so they are dropped: the merged
list carries one indicator per system (``InMoses= 1 InRNNsearch= 0``), and `rerank score-nbest`
then adds the features any (source, hypothesis) pair can have (LM, word and UNK penalties, RNN0,
RNNsearch0) before `rerank tune` weighs them all.
"""

from __future__ import annotations

import argparse

from rerank.commands.arguments import positive_int

OUTPUTS = ("output",)  # checked by rerank.cli before the command runs


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("systems", nargs="+", metavar="NAME=NBEST",
                        help="a system's name (letters and digits) and its n-best list, e.g. Moses=val.100best.gz")
    parser.add_argument("-o", "--output", default="-", metavar="OUT", help="merged n-best list (default: stdout)")
    parser.add_argument("--num-sentences", type=positive_int, metavar="N",
                        help="check that every id is below N (the source's line count)")


def run(args: argparse.Namespace) -> int:
    from rerank.errors import RerankError
    from rerank.formats.nbest import check_label, write_nbest
    from rerank.rescore.merge import merge_nbest

    systems = []
    for text in args.systems:
        name, sep, path = text.partition("=")
        try:
            if not sep or not name or not path:
                raise ValueError(f"expected NAME=NBEST, got {text!r}")
            check_label(f"In{name}")
        except ValueError as e:
            raise RerankError(f"merge-nbest: {e}") from None
        systems.append((name, path))
    if len({name for name, _ in systems}) != len(systems):
        raise RerankError("merge-nbest: each system needs its own name")
    write_nbest(merge_nbest(systems, num_sentences=args.num_sentences), args.output)
    return 0
