"""Merge the n-best lists of several systems into one, per sentence, with "which system" indicators.

Each distinct hypothesis (same words) appears once, in the order the systems are given. A system's
own features cannot be computed for another system's hypotheses, so they are dropped: the merged
list carries one indicator per system (``InMoses= 1 InRNNsearch= 0``), and `rerank score-nbest`
then adds the features any (source, hypothesis) pair can have (LM, word and UNK penalties, RNN0,
RNNsearch0) before `rerank tune` weighs them all.

With --moses-ini (and --source), Moses' features are kept instead, for every hypothesis: copied from
Moses' list (the first system, or --moses-system) for its own hypotheses, and for the others taken
from Moses' best derivation under forced decoding (its ConstrainedDecoding feature, one Moses process
for all of them). A hypothesis Moses cannot produce with its phrase table gets the mean of each
feature over Moses' hypotheses of its sentence (over all of Moses' list where Moses has no hypothesis
of that sentence) and ``Unreachable0= 1`` (0 elsewhere); the counts go to stderr.

An empty list is an error unless --allow-partial; a list with hypotheses for only some of the
sentences (of --num-sentences or --source, else of those the lists have together) is merged with a
warning saying how many it covers. The moses.ini must be the one that made Moses' list (same features, same weights):

    rerank merge-nbest Moses=val.100best.gz RNNsearch=rnn.20best.gz --moses-ini moses.ini \\
        --source val.en --moses $MOSES/bin/moses --threads 2 \\
        --filter-script $MOSES/scripts/training/filter-model-given-input.pl -o union.gz
"""

from __future__ import annotations

import argparse
import logging
import shlex

from rerank.commands.arguments import positive_int
from rerank.errors import RerankError
from rerank.formats.files import read_text

# files written and read, checked by rerank.cli before the command runs: no output is an input
OUTPUTS = ("output",)
INPUTS = ("systems", "moses_ini", "source", "moses", "filter_script")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("systems", nargs="+", metavar="NAME=NBEST",
                        help="a system's name (letters and digits) and its n-best list, e.g. Moses=val.100best.gz")
    parser.add_argument("-o", "--output", default="-", metavar="OUT", help="merged n-best list (default: stdout)")
    parser.add_argument("--num-sentences", type=positive_int, metavar="N",
                        help="check that every id is below N (the source's line count)")
    parser.add_argument("--allow-partial", action="store_true",
                        help="merge an empty n-best list too (an error otherwise; a list covering only some "
                             "sentences is always merged, with a warning)")
    add_forced_decoding_arguments(parser)


def run(args: argparse.Namespace) -> int:
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
    if args.moses_ini is None:
        if args.source is not None or args.moses_system is not None:
            raise RerankError("merge-nbest: --source and --moses-system go with --moses-ini")
        write_nbest(merge_nbest(systems, num_sentences=args.num_sentences, allow_empty=args.allow_partial),
                    args.output)
        return 0
    return _run_forced(args, systems)


def add_forced_decoding_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of --moses-ini's forced decoding (read by :func:`_run_forced`)."""
    forced = parser.add_argument_group("Moses' features for every hypothesis (forced decoding)")
    forced.add_argument("--moses-ini", metavar="INI",
                        help="keep Moses' features: the moses.ini that made Moses' list (its paths resolved "
                             "from the current directory, as Moses does)")
    forced.add_argument("--source", metavar="SRC", help="the source sentences, one per line (needed with --moses-ini)")
    forced.add_argument("--moses", default="moses", metavar="BIN", help="the Moses decoder (default: moses on PATH)")
    forced.add_argument("--moses-system", metavar="NAME", help="the system whose list is Moses' (default: the first)")
    forced.add_argument("--threads", type=positive_int, default=1, metavar="N", help="Moses' threads (default 1)")
    forced.add_argument("--filter-script", metavar="PL",
                        help="Moses' filter-model-given-input.pl: filter the phrase tables to the source sentences "
                             "first (faster loading, same features)")
    forced.add_argument("--moses-args", default="", metavar="ARGS",
                        help="more Moses options for the forced decoding, quoted (e.g. '-s 500')")


def _run_forced(args: argparse.Namespace, systems: list[tuple[str, str]]) -> int:
    from rerank.formats.nbest import write_nbest
    from rerank.rescore.forced import ForcedDecoding
    from rerank.rescore.union import union_with_moses_features

    if args.source is None:
        raise RerankError("merge-nbest: --moses-ini needs --source (the sentences Moses translated)")
    names = [name for name, _ in systems]
    moses_name = args.moses_system or names[0]
    if moses_name not in names:
        raise RerankError(f"merge-nbest: --moses-system {moses_name} is not one of the systems {names}")
    sources = read_text(args.source)
    if args.num_sentences is not None and args.num_sentences != len(sources):
        raise RerankError(f"merge-nbest: --num-sentences {args.num_sentences} but {args.source} has "
                          f"{len(sources)} lines")
    try:
        moses_args = tuple(shlex.split(args.moses_args))
    except ValueError as e:
        raise RerankError(f"merge-nbest: --moses-args: {e}") from None
    settings = ForcedDecoding(args.moses, args.moses_ini, threads=args.threads, moses_args=moses_args,
                              filter_script=args.filter_script)
    entries, report = union_with_moses_features(systems, names.index(moses_name), settings, sources,
                                                allow_empty=args.allow_partial)
    write_nbest(entries, args.output)
    forced = report.forced
    per_thousand = 1000 * forced.seconds / len(forced.derivations) if forced.derivations else 0.0
    logging.getLogger(__name__).info(
        "%s lines: %s copied from the list of %s, %s forced-decoded (%s reachable, %s unreachable: Unreachable0= 1); "
        "forced decoding %.1f s (%.1f s per 1,000 hypotheses)", f"{report.lines:,}", f"{report.from_moses:,}",
        moses_name, f"{len(forced.derivations):,}", f"{forced.reachable:,}", f"{forced.unreachable:,}",
        forced.seconds, per_thousand)
    return 0
