"""Append a neural model's p(target | source) to every phrase pair of a Moses phrase table.

The new value, last in the scores field (field 3), is p(target | source) of the whole phrase pair,
``</s>`` included, by forced decoding with an RNN encoder-decoder or RNNsearch model (Cho et al.
2014, Sec. 4.1). Moses reads max(ln x, -100) for each phrase-table score x, so the value is
written as exp(ln p) floored at exp(-100) = 3.72008e-44: Moses reads about -100 for it, as it
would have anyway, and the value is never 0, whose log is -inf for the other tools that read
tables. Every other byte of each line stays as it was, and the lines keep their order. The
table is streamed: memory stays flat whatever its size.

With --moses-ini, a moses.ini is also written in which the table has one more feature
(num-features), one more weight (--weight) and the new table as its path.
"""

from __future__ import annotations

import argparse
import itertools
import logging
import math
import os
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING

from rerank.cli import StoreOnce, positive_int
from rerank.errors import FormatError, RerankError
from rerank.formats.files import STDIO, count_lines, display_name
from rerank.formats.moses_ini import MosesIni
from rerank.formats.phrase_table import PhraseEntry, read_phrase_table, write_phrase_table
from rerank.progress import ProgressBar

if TYPE_CHECKING:
    from rerank.scoring import Scorer

logger = logging.getLogger(__name__)

MOSES_LOWEST_LOG = -100.0  # Moses' LOWEST_SCORE: it reads max(ln x, -100) for every phrase-table score
TRAIN_MODEL_WEIGHT = 0.2  # the initial weight train-model.perl gives each phrase-table score


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("input", metavar="TABLE", help="Moses phrase table, text (.gz allowed; - for stdin)")
    parser.add_argument("-o", "--output", required=True, action=StoreOnce, metavar="OUT",
                        help="the table with the added score (.gz for gzip; - for stdout)")
    parser.add_argument("--model", required=True, action=StoreOnce, metavar="DIR",
                        help="model directory written by rerank train")
    parser.add_argument("--encoding", default="utf-8", help="of the table (default: %(default)s)")
    ini = parser.add_argument_group("moses.ini")
    ini.add_argument("--moses-ini", action=StoreOnce, metavar="IN", help="the configuration that uses TABLE")
    ini.add_argument("--moses-ini-out", action=StoreOnce, metavar="OUT", help="where to write it with the new score")
    ini.add_argument("--table", default="TranslationModel0", metavar="NAME",
                     help="the table's feature name in IN (default: %(default)s); in an old-format moses.ini, "
                          "its path as [ttable-file] gives it")
    ini.add_argument("--weight", type=float, default=TRAIN_MODEL_WEIGHT, metavar="W",
                     help="initial weight of the new score, to be tuned (default: %(default)s, what "
                          "train-model.perl gives each phrase-table score)")
    speed = parser.add_argument_group("speed and memory")
    speed.add_argument("--max-tokens", type=positive_int, action=StoreOnce, metavar="N",
                       help="padded target tokens per batch (default 4096); bounds memory")
    speed.add_argument("--window", type=positive_int, action=StoreOnce, metavar="N",
                       help="phrase pairs sorted and deduplicated together (default 8192)")
    speed.add_argument("--threads", type=positive_int, action=StoreOnce, metavar="N",
                       help="CPU threads (default: all cores)")
    speed.add_argument("--device", default="cpu", help="cpu, cuda or cuda:N (default: %(default)s)")


def run(args: argparse.Namespace) -> int:
    import torch

    from rerank.rescoring import peek
    from rerank.scoring import Scorer, ScoringConfig, torch_device

    if (args.moses_ini is None) != (args.moses_ini_out is None):
        raise RerankError("give both --moses-ini and --moses-ini-out, or neither")
    if args.moses_ini is not None and args.output == STDIO:
        raise RerankError("--moses-ini needs -o to be a file: the new moses.ini points to it")
    table = display_name(args.input)
    first, entries = peek(read_phrase_table(args.input, args.encoding))  # a bad first line fails before loading
    num_scores = len(first.scores) if first is not None else None
    ini = updated_ini(args, table, num_scores) if args.moses_ini is not None else None
    if args.threads:
        torch.set_num_threads(args.threads)
    scoring = ScoringConfig(**{key: value for key in ("max_tokens", "window")
                               if (value := getattr(args, key)) is not None})
    appender = ScoreAppender(Scorer.load(args.model, torch_device(args.device), scoring), table)
    progress = ProgressBar("pairs", count_lines(args.input, args.encoding) if args.input != STDIO else None,
                           enabled=not args.quiet)
    windows = progress.track(appender.scored(entries), len)
    write_phrase_table(itertools.chain.from_iterable(windows), args.output, args.encoding)
    logger.info("%s: %s; %d value(s) floored at exp(%g)", display_name(args.output), progress.close(),
                appender.floored, MOSES_LOWEST_LOG)
    if first is None:
        logger.warning("%s is empty: wrote an empty table", table)
    if ini is not None:
        ini.write(args.moses_ini_out)
        logger.info("%s: %s now has %s scores, the last weighted %g, read from %s", args.moses_ini_out,
                    args.table, num_scores + 1 if num_scores is not None else "one more", args.weight,
                    os.path.abspath(args.output))
    return 0


def updated_ini(args: argparse.Namespace, table: str, num_scores: int | None) -> MosesIni:
    """The moses.ini to write, built and checked against the table before any scoring starts."""
    ini = MosesIni.read(args.moses_ini)
    if not ini.is_old_format and num_scores is not None:
        declared = ini.feature(args.table).args.get("num-features")
        if declared is not None and declared != str(num_scores):
            raise RerankError(f"{args.moses_ini}: {args.table} has num-features={declared}, but {table} has "
                              f"{num_scores} scores per line: is this the moses.ini of that table?")
    directory = os.path.dirname(os.path.abspath(args.moses_ini_out))
    if not os.path.isdir(directory):
        raise RerankError(f"{args.moses_ini_out}: cannot write: directory {directory!r} does not exist")
    return ini.with_added_score(args.table, args.weight).with_table_path(args.table, os.path.abspath(args.output))


class ScoreAppender:
    """Appends exp(ln p(target | source)) to phrase-table entries; counts the values it floored."""

    def __init__(self, scorer: Scorer, table: str):
        self.scorer = scorer
        self.table = table
        self.floored = 0

    def scored(self, entries: Iterable[PhraseEntry]) -> Iterator[list[PhraseEntry]]:
        """The entries with their new score, in order, a window of the scorer at a time."""
        ahead, behind = itertools.tee(entries)
        pairs = ((entry.source.split(), entry.target.split()) for entry in ahead)
        for log_probs in self.scorer.score_windows(pairs):
            window = list(itertools.islice(behind, len(log_probs)))
            yield [self.with_value(entry, log_prob) for entry, log_prob in zip(window, log_probs.tolist(), strict=True)]

    def with_value(self, entry: PhraseEntry, log_prob: float) -> PhraseEntry:
        """``entry`` with exp(ln p) appended; a non-finite ln p is an error naming the line."""
        if not math.isfinite(log_prob):
            raise FormatError(self.table, entry.lineno, "a phrase pair the model gives a finite score",
                              got=f"ln p = {log_prob}: are the model weights broken?")
        self.floored += log_prob < MOSES_LOWEST_LOG
        return entry.with_score(phrase_table_value(log_prob))


def phrase_table_value(log_prob: float) -> float:
    """What a phrase table holds for ln p: exp(ln p), floored at Moses' lowest score so that it is never 0."""
    return math.exp(max(log_prob, MOSES_LOWEST_LOG))
