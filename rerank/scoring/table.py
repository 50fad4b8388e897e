"""Appending a neural model's p(target | source) to every phrase pair of a Moses phrase table.

The new value, last in the scores field (field 3), is p(target | source) of the whole phrase pair,
``</s>`` included, by forced decoding (Cho et al. 2014, Sec. 4.1); or, in the forms of :class:`Column`,
p(source | target) under a target-to-source (channel) model, as Moses' own table holds both directions, and
the per-word probability p^(1/(n+1)) of the n words (and ``</s>``) scored, which keeps the value on the scale
of Moses' per-phrase scores whatever the phrase's length. Moses reads max(ln x, -100) for
each phrase-table score x, so the value is written as exp(ln p) floored at exp(-100): Moses reads
about -100 for it, as it would have anyway, and the value is never 0, whose log is -inf for the
other tools that read tables. Every other byte of each line stays as it was, and the lines keep
their order. The table is streamed: memory stays flat whatever its size.

The scorer's windows start afresh at each segment of the table
(:func:`~rerank.formats.shards.table_segments`: cut before a source phrase chosen by its content),
where the shards of ``score-table --shard`` start too: the pairs scored together, and so the values,
are the same in a shard as in the whole table.
"""

from __future__ import annotations

import itertools
import logging
import math
import os
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from rerank.errors import FormatError, RerankError, counted
from rerank.formats.files import STDIO, atomic_output, count_lines, display_name
from rerank.formats.moses_ini import TRAIN_MODEL_WEIGHT, MosesIni
from rerank.formats.phrase_table import MOSES_LOWEST_LOG, PhraseEntry
from rerank.formats.pipeline import Behind, ahead
from rerank.formats.shards import WHITESPACE, starts_table_segment
from rerank.formats.tokens import Pair
from rerank.progress import progress_bar, summary
from rerank.scoring.pairs import ScoringConfig, windows

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Column:
    """Which probability of a phrase pair the new column holds.

    ``channel``: the model reads the pair's target phrase and scores its source phrase, p(source | target)
    (a target-to-source model, such as the fr->en one of an en->fr system); otherwise p(target | source).
    ``per_word``: ln p divided by the scored phrase's words plus one (``</s>``), the geometric mean of the
    word probabilities; otherwise ln p of the whole phrase."""

    channel: bool = False
    per_word: bool = False

    def pair(self, entry: PhraseEntry) -> tuple[list[str], list[str]]:
        """What the model reads and what it scores, as tokens."""
        source, target = entry.source.split(), entry.target.split()
        return (target, source) if self.channel else (source, target)

    def value(self, entry: PhraseEntry, log_prob: float) -> float:
        """The column's ln value for ``entry`` whose scored side has model score ``log_prob``."""
        if not self.per_word:
            return log_prob
        scored = entry.source if self.channel else entry.target
        return log_prob / (len(scored.split()) + 1)

    def describe(self) -> str:
        """The probability in words, for messages: ``p(source | target) per word``."""
        return f"p({'source | target' if self.channel else 'target | source'}){' per word' if self.per_word else ''}"


TARGET_GIVEN_SOURCE = Column()  # the whole pair's p(target | source), as Cho et al. (2014) scored it


class Spread:
    """The standard deviation over a table's lines of each score as Moses reads it, max(ln x, -100), the added
    one last: what :func:`spread_matched_weight` needs."""

    def __init__(self) -> None:
        self.count = 0
        self.sums: np.ndarray | None = None
        self.squares: np.ndarray | None = None

    def add(self, scores: tuple[float, ...]) -> None:
        """One line's scores."""
        self.add_lines([scores])

    def add_lines(self, lines: Sequence[tuple[float, ...]]) -> None:
        """The scores of several lines (as many on each, as a table has), in one pass over an array."""
        if not lines:
            return
        with np.errstate(divide="ignore"):  # a 0 reads as Moses' lowest
            values = np.maximum(np.log(np.maximum(np.array(lines, dtype=np.float64), 0.0)), MOSES_LOWEST_LOG)
        if self.sums is None or self.squares is None:
            self.sums, self.squares = np.zeros(values.shape[1]), np.zeros(values.shape[1])
        self.count += len(values)
        self.sums += values.sum(axis=0)
        self.squares += (values * values).sum(axis=0)

    def deviations(self) -> np.ndarray:
        """Each score's standard deviation (empty before the first line)."""
        if self.sums is None or self.squares is None:
            return np.zeros(0)
        mean = self.sums / self.count
        return np.sqrt(np.maximum(self.squares / self.count - mean * mean, 0.0))


def starting_weight(moses_ini: str | os.PathLike[str], table_name: str, spread: Spread) -> float:
    """``score-table --weight auto``: :func:`spread_matched_weight` for the scores of ``table_name`` in
    ``moses_ini`` and their ``spread`` over the scored table (train-model.perl's weight for an empty table)."""
    deviations = spread.deviations()
    if not len(deviations):
        return TRAIN_MODEL_WEIGHT
    weights = MosesIni.read(moses_ini).weights().get(table_name)
    if weights is None:
        raise RerankError(f"--weight auto: {moses_ini} has no weights named {table_name}")
    weight = spread_matched_weight(weights, deviations)
    logger.info("%s: the new score's ln spreads %.3g (sd over the lines), the others' %s: its weight %g",
                table_name, deviations[-1], " ".join(f"{d:.3g}" for d in deviations[:-1]), weight)
    return weight


def spread_matched_weight(weights: tuple[float, ...], deviations: np.ndarray) -> float:
    """The starting weight of the added score whose contribution spreads as much as an existing score's does on
    average: mean(|w_i| sd_i) / sd_new over the table's ``weights`` (of its existing scores) and the scores'
    ``deviations`` (the added one last); 0 where the added score does not vary. A column of ln p of whole
    phrases spreads several times wider than Moses' scores, and a weight meant for those (train-model.perl's
    0.2) lets it outweigh them all in the first decoding."""
    if len(deviations) != len(weights) + 1:
        raise ValueError(f"expected the deviations of {len(weights)} scores and the added one, got {len(deviations)}")
    if deviations[-1] <= 0:
        return 0.0
    contribution = float(np.mean(np.abs(np.array(weights)) * deviations[:-1]))
    return float(f"{contribution / deviations[-1]:.6g}")


class TableScorer(Protocol):
    """What scores a table's pairs a window at a time: a :class:`~rerank.scoring.pairs.Scorer`, or a feature's
    scorer (:mod:`rerank.features.phrase_table`)."""

    config: ScoringConfig  # its windows

    def prepare(self, pairs: Sequence[Pair]) -> Any: ...  # a window made ready to score (by a thread beside)

    def score_prepared(self, window: Any) -> np.ndarray: ...  # ln p (P,) of a prepared window


def score_phrase_table(entries: Iterable[PhraseEntry], scorer: TableScorer, *, table: str | os.PathLike[str],
                       output: str | os.PathLike[str], encoding: str = "utf-8", show_progress: bool = True,
                       count: bool = True, overlap: bool = True, column: Column = TARGET_GIVEN_SOURCE) -> Spread:
    """Write the ``entries`` of ``table`` to ``output`` (atomically) with exp(ln p(target | source)) appended
    (or the probability ``column`` names); with ``count``, the table's lines are counted first, for the
    progress bar. With ``overlap``, the entries are read, parsed and turned into ids by one thread and the
    scored lines formatted and written by another, while the model scores (:mod:`rerank.formats.pipeline`):
    the same bytes are written. A table read from stdin is read in the scoring thread (a thread blocked
    reading a pipe cannot be stopped). Returns the spread of the written scores."""
    appender = ScoreAppender(scorer, display_name(table), encoding, column)
    total = count_lines(table, encoding) if count and str(table) != STDIO else None
    progress = progress_bar("pairs", total, enabled=show_progress)
    with atomic_output(output, encoding) as out:
        def write(scored: tuple[list[PhraseEntry], np.ndarray]) -> None:
            window, log_probs = scored
            out.write("".join([f"{entry.line()}\n" for entry in appender.with_values(window, log_probs)]))
            progress.update(len(window))

        with Behind(write, enabled=overlap) as writer:
            read_ahead = overlap and str(table) != STDIO
            for window, prepared in ahead(appender.prepared_windows(entries), enabled=read_ahead):
                writer.put((window, scorer.score_prepared(prepared)))
    logger.info("%s: %s; %s floored at exp(%g)", display_name(output), summary(progress),
                counted(appender.floored, "value"), MOSES_LOWEST_LOG)
    return appender.spread


def table_moses_ini(moses_ini: str | os.PathLike[str], output_ini: str | os.PathLike[str], table_name: str,
                    num_scores: int | None, scored_table: str | os.PathLike[str], weight: float) -> MosesIni:
    """The moses.ini to write beside a scored table, built and checked before any scoring starts:
    ``table_name`` gets one more score (``num-features``), one more weight and the new table as path."""
    ini = MosesIni.read(moses_ini)
    if not ini.is_old_format and num_scores is not None:
        declared = ini.feature(table_name).args.get("num-features")
        if declared is not None and declared != str(num_scores):
            raise RerankError(f"{moses_ini}: {table_name} has num-features={declared}, but the table has "
                              f"{num_scores} scores per line: is this the moses.ini of that table?")
    directory = os.path.dirname(os.path.abspath(output_ini))
    if not os.path.isdir(directory):
        raise RerankError(f"{output_ini}: cannot write: directory {directory!r} does not exist")
    scored = ini.with_added_score(table_name, weight).with_table_path(table_name, os.path.abspath(scored_table))
    return absolute_paths(scored, output_ini, keep=table_name)


def absolute_paths(ini: MosesIni, output_ini: str | os.PathLike[str], keep: str | None = None) -> MosesIni:
    """``ini`` with every feature's relative ``path=`` made absolute (Moses reads them from the directory it
    runs in, this one), so that the written moses.ini means the same wherever it is used; a path that names
    no file (a placeholder such as ``LM_DIR/...``) is kept, with a warning. Feature ``keep`` is left as it is."""
    import glob

    if ini.is_old_format:
        return ini
    for feature in ini.features():
        path = feature.args.get("path")
        if path is None or feature.name == keep:
            continue
        if not (os.path.exists(path) or glob.glob(glob.escape(path) + ".*")):  # Moses adds .gz, .minphr, ...
            logger.warning("%s: %s's path %s names no file (from %s): set it before Moses reads this moses.ini",
                           output_ini, feature.name, path, ini.path)
        elif not os.path.isabs(path):
            ini = ini.with_table_path(feature.name, os.path.abspath(path))
    return ini


class ScoreAppender:
    """Appends exp(ln p(target | source)) (or the probability ``column`` names) to phrase-table entries; counts
    the values it floored."""

    def __init__(self, scorer: TableScorer, table: str, encoding: str = "utf-8",
                 column: Column = TARGET_GIVEN_SOURCE):
        self.scorer = scorer
        self.table = table
        self.encoding = encoding
        self.column = column
        self.floored = 0
        self.spread = Spread()  # of the scores of the lines appended so far

    def scored(self, entries: Iterable[PhraseEntry]) -> Iterator[list[PhraseEntry]]:
        """The entries with their new score, in order, a window of the scorer at a time (the windows of
        each segment of the table apart)."""
        for window, prepared in self.prepared_windows(entries):
            yield self.with_values(window, self.scorer.score_prepared(prepared))

    def prepared_windows(self, entries: Iterable[PhraseEntry]) -> Iterator[tuple[list[PhraseEntry], Any]]:
        """The entries a window of the scorer at a time (each segment of the table apart), with the window's
        ids ready to score."""
        for _, segment in itertools.groupby(entries, key=_Segments(self.encoding)):
            pairs = ((*self.column.pair(entry), entry) for entry in segment)
            for window in windows(pairs, self.scorer.config):
                yield [entry for _, _, entry in window], self.scorer.prepare([(s, t) for s, t, _ in window])

    def with_values(self, window: list[PhraseEntry], log_probs: np.ndarray) -> list[PhraseEntry]:
        """The ``window``'s entries with exp(ln p) appended."""
        scored = [self.with_value(entry, log_prob) for entry, log_prob in zip(window, log_probs.tolist(), strict=True)]
        self.spread.add_lines([entry.scores for entry in scored])
        return scored

    def with_value(self, entry: PhraseEntry, log_prob: float) -> PhraseEntry:
        """``entry`` with exp(ln p) (per word, for a per-word column) appended; a non-finite ln p is an error
        naming the line."""
        if not math.isfinite(log_prob):
            raise FormatError(self.table, entry.lineno, "a phrase pair the model gives a finite score",
                              got=f"ln p = {log_prob}: are the model weights broken?")
        value = self.column.value(entry, log_prob)
        self.floored += value < MOSES_LOWEST_LOG
        return entry.with_score(phrase_table_value(value))


def phrase_table_value(log_prob: float) -> float:
    """What a phrase table holds for ln p: exp(ln p), floored at Moses' lowest score so that it is never 0."""
    return math.exp(max(log_prob, MOSES_LOWEST_LOG))


class _Segments:
    """A key for :func:`itertools.groupby`: the number of the table segment of each entry, in order."""

    def __init__(self, encoding: str):
        self.encoding = encoding
        self.previous: bytes | None = None
        self.number = 0

    def __call__(self, entry: PhraseEntry) -> int:
        source = entry.fields[0].strip(WHITESPACE).encode(self.encoding)
        if starts_table_segment(self.previous, source):
            self.number += 1
        self.previous = source
        return self.number
