"""Rerank an n-best list with log-linear weights: write the 1-best translation of every sentence.

The score of a hypothesis is its dense features · weights; the best is the first maximum in file
order. Weights come from YAML weights files, from a moses.ini's [weight] section, and from --weight
flags, merged in that order (later ones win). A moses.ini may weight features the n-best list does
not print (UnknownWordPenalty0): those are skipped. A sentence with no hypotheses gets an empty
line, as Moses writes for a sentence it failed to translate; an empty list is an error, as for
`rerank tune` (a decoding run that failed, not a translation). --nbest-out keeps a scored list's
record (``FILE.features.yaml``: what ``rerank score-nbest`` computed each feature from).
"""

from __future__ import annotations

import argparse
import logging
from typing import TYPE_CHECKING

from rerank.commands.arguments import finite_float, positive_int
from rerank.errors import RerankError
from rerank.formats.files import count_lines, display_name

if TYPE_CHECKING:
    from rerank.formats.moses_ini import Weights
    from rerank.formats.weights import Origin

logger = logging.getLogger(__name__)

# files written and read, checked by rerank.cli before the command runs: no output is an input
OUTPUTS = ("output", "nbest_out")
INPUTS = ("nbest", "weights", "source")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("nbest", metavar="NBEST", help="Moses n-best list (.gz allowed; - for stdin)")
    parser.add_argument("--weights", action="append", default=[], metavar="FILE",
                        help="YAML weights file (.yaml/.yml) or moses.ini; repeat to merge several")
    parser.add_argument("--weight", action="append", default=[], metavar="LABEL=V[,V...]",
                        help="one feature's weight(s), e.g. LM1=0.1 or TranslationModel0=0.2,0.1,0.2,0.1")
    parser.add_argument("--missing-weight", type=finite_float, metavar="X",
                        help="weight of n-best features that no weight source mentions (default: an error)")
    count = parser.add_mutually_exclusive_group()
    count.add_argument("--source", metavar="SRC",
                       help="source text: one output line per source line, an empty one for a sentence "
                            "without hypotheses")
    count.add_argument("--num-sentences", type=positive_int, metavar="N",
                       help="the number of sentences, when the source text is not at hand")
    parser.add_argument("-o", "--output", default="-", metavar="1BEST", help="1-best output (default: stdout)")
    parser.add_argument("--nbest-out", metavar="FILE",
                        help="also write the n-best list re-sorted by the new score, with it in field 4")


def merged_weights(args: argparse.Namespace) -> tuple[dict[str, tuple[float, ...]], dict[str, Origin]]:
    """All weights by label, later sources winning, and for each label the source it came from (each file read
    once: ``--weights <(...)`` works)."""
    from rerank.formats.weights import FROM_COMMAND_LINE, parse_weight_assignment, read_weights

    if not args.weights and not args.weight:
        raise RerankError("no weights: give --weights FILE (YAML or moses.ini) and/or --weight LABEL=V")
    weights: dict[str, tuple[float, ...]] = {}
    origins: dict[str, Origin] = {}
    assignments: list[tuple[Origin, Weights]] = []
    for path in args.weights:
        read = read_weights(path)
        assignments.append((read, read.weights))
    assignments += [(FROM_COMMAND_LINE, dict([parse_weight_assignment(text)])) for text in args.weight]
    for origin, values in assignments:
        for label, value in values.items():
            weights[label] = value
            origins[label] = origin
    return weights, origins


def run(args: argparse.Namespace) -> int:
    from rerank.formats.scored import carry_record
    from rerank.formats.weights import known_weights
    from rerank.rescore.rerank import rerank_nbest

    weights, origins = merged_weights(args)
    nbest_name = display_name(args.nbest)
    num_sentences = count_lines(args.source) if args.source is not None else args.num_sentences
    rerank_nbest(args.nbest, weights, args.output, nbest_out=args.nbest_out, num_sentences=num_sentences,
                 source_name=display_name(args.source) if args.source else "--num-sentences",
                 weights_name=" + ".join([*map(str, args.weights), *["--weight"] * bool(args.weight)]),
                 missing=args.missing_weight,
                 known=lambda layout: known_weights(weights, origins, layout.labels, nbest_name))
    if args.nbest_out is not None:
        carry_record(args.nbest, args.nbest_out)
    return 0
