"""Streaming n-best rescoring: append feature values to every hypothesis (``rerank score-nbest``).

The n-best list is read as a stream of sentences (see :func:`~rerank.formats.nbest.group_by_sentence`)
and never more than one chunk of sentences is held in memory, so it runs the same on 100 sentences
or on a whole test set.
"""

from __future__ import annotations

import itertools
import logging
import os
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from rerank.errors import FormatError, NonFiniteScore, RerankError, counted
from rerank.formats.files import STDIO, count_lines, display_name, read_lines
from rerank.formats.nbest import (
    FeatureLayout,
    NBestEntry,
    NBestGroup,
    beyond_source,
    group_by_sentence,
    read_nbest,
    write_nbest,
)
from rerank.formats.tokens import Pair
from rerank.progress import progress_bar, summary
from rerank.rescore.feature import Feature, SentenceList, scores_lists

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class RescoreConfig:
    """What ``rerank score-nbest`` appends: feature specs, in order, and how many sentences to score at once.

    Each spec is a mapping with ``kind`` and that kind's keys (see :mod:`features`). A relative path is read
    from the working directory, or where it is not there, from the config's directory or the nearest one above it
    that has it (:func:`rerank.config.resolved_input`).
    """

    features: tuple[dict[str, Any], ...] = ()
    batch_sentences: int = 64

    def __post_init__(self) -> None:
        if self.batch_sentences < 1:
            raise ValueError(f"batch_sentences must be positive, got {self.batch_sentences}")


class SourceText:
    """The lines of a source file, fetched by increasing sentence id while the file is read as a stream."""

    def __init__(self, path: str | os.PathLike[str]):
        self.name = display_name(path)
        self._lines = read_lines(path)
        self._read = 0  # lines read so far
        self._current = ""
        self._ended = False

    def line(self, sentence_id: int) -> str | None:
        """Line ``sentence_id`` (0-based), or ``None`` past the end of the file. Ids must not decrease."""
        if sentence_id < self._read - 1:
            raise ValueError(f"sentence {sentence_id} requested after {self._read - 1}")
        while self._read <= sentence_id and not self._ended:
            item = next(self._lines, None)
            if item is None:
                self._ended = True
            else:
                self._current = item[1]
                self._read += 1
        return self._current if self._read > sentence_id else None

    def count(self) -> int:
        """The number of lines of the file (reads it to the end)."""
        for _ in self._lines:
            self._read += 1
        self._ended = True
        return self._read


def extended_layout(layout: FeatureLayout, features: Sequence[Feature], nbest_name: str) -> FeatureLayout:
    """``layout`` with the features appended; a label the n-best list already has is an error."""
    clashes = [f.name for f in features if f.name in layout.labels]
    if clashes:
        raise RerankError(f"{nbest_name}: the n-best list already has the feature(s) {', '.join(clashes)}; "
                          "give the new feature another label")
    return layout.extended([f.name for f in features], [f.dims for f in features])


Hypothesis = tuple[int, tuple[str, ...]]  # a sentence id and the hypothesis' words


class ScoredValues:
    """The values that scored n-best lists of the same source hold already, by sentence id and hypothesis words
    (``rerank score-nbest --reuse``): a hypothesis that one of them has is not scored again (Moses' hypotheses
    in their union with RNNsearch's list). The first list that has a hypothesis gives its values."""

    def __init__(self, paths: Sequence[str | os.PathLike[str]], labels: Sequence[str]):
        self.names = [display_name(path) for path in paths]
        self.values: dict[Hypothesis, dict[str, tuple[float, ...]]] = {}
        for path in paths:
            for entry in read_nbest(path):
                offsets = entry.layout.offsets()
                found = {label: entry.dense[offsets[label]] for label in labels if label in offsets}
                if found:
                    self.values.setdefault((entry.sentence_id, tuple(entry.tokens)), found)

    def column(self, feature: Feature, entries: Sequence[NBestEntry]) -> list[tuple[float, ...] | None]:
        """The values of ``feature`` for each entry, None where no list has them."""
        column: list[tuple[float, ...] | None] = []
        for entry in entries:
            values = self.values.get((entry.sentence_id, tuple(entry.tokens)), {}).get(feature.name)
            if values is not None and len(values) != feature.dims:
                raise RerankError(f"{', '.join(self.names)}: {feature.name} has {len(values)} values, but the "
                                  f"feature gives {feature.dims}: reuse lists scored with the same features")
            column.append(values)
        return column


def add_features(entries: Iterable[NBestEntry], features: Sequence[Feature], *, nbest_name: str,
                 source: SourceText | None = None, batch_sentences: int = 64,
                 reuse: ScoredValues | None = None) -> Iterator[NBestEntry]:
    """The entries with every feature's values appended to field 3, in file order.

    Each feature scores the (source, hypothesis) pairs of a block of ``batch_sentences`` sentence ids
    at a time (0-63, 64-127, ...: the same blocks in a shard of the list, see
    :func:`~rerank.formats.shards.nbest_blocks`); a :class:`~rerank.rescore.feature.ListFeature` scores the
    block's sentences, each with its entries. With a ``source``, an n-best id beyond its last line is
    an error; without one, features get an empty source. With ``reuse``, the pairs it holds values for are
    not scored again (a list feature, whose values depend on the whole list, still scores every entry).
    """
    layout: FeatureLayout | None = None
    progress = progress_bar("sentences", enabled=logger.isEnabledFor(logging.INFO))
    hypotheses = 0
    blocks = itertools.groupby(group_by_sentence(entries), key=lambda group: group[0] // batch_sentences)
    for _, block in blocks:
        chunk = list(block)
        flat = [entry for _, group in chunk for entry in group]
        if layout is None:
            layout = extended_layout(flat[0].layout, features, nbest_name)
        lists = list(_with_source(chunk, source, nbest_name))
        pairs = [(tokens, entry.tokens) for tokens, group in lists for entry in group]
        columns = [_reused_or_scored(feature, pairs, lists, flat, reuse) for feature in features]
        for i, entry in enumerate(flat):
            values = [(f.name, column[i]) for f, column in zip(features, columns, strict=True)]
            try:
                yield entry.with_features(values, layout)
            except NonFiniteScore as e:
                raise e.in_file(nbest_name) from None
        progress.update(len(chunk))
        hypotheses += len(flat)
    logger.info("scored %s (%s)", summary(progress), counted(hypotheses, "hypothesis", "hypotheses"))


def _with_source(chunk: list[NBestGroup], source: SourceText | None, nbest_name: str
                 ) -> Iterator[tuple[tuple[str, ...], list[NBestEntry]]]:
    for sentence_id, group in chunk:
        if source is None:
            yield (), group
            continue
        line = source.line(sentence_id)
        if line is None:
            raise beyond_source(nbest_name, group[0], source.count(), source.name)
        yield tuple(line.split()), group


def _reused_or_scored(feature: Feature, pairs: Sequence[Pair], lists: Sequence[SentenceList],
                      entries: Sequence[NBestEntry], reuse: ScoredValues | None) -> list[list[float]]:
    """The feature's values of every pair (floats, not numpy scalars): those ``reuse`` holds, the others scored."""
    if reuse is None or scores_lists(feature):
        return list(_score(feature, pairs, lists).tolist())
    column = reuse.column(feature, entries)
    missing = [i for i, values in enumerate(column) if values is None]
    scored = iter(_score(feature, [pairs[i] for i in missing], lists).tolist() if missing else [])
    return [list(values) if values is not None else next(scored) for values in column]


def _score(feature: Feature, pairs: Sequence[Pair], lists: Sequence[SentenceList]) -> np.ndarray:
    scored = feature.score_lists(lists) if scores_lists(feature) else feature.score(pairs)
    values = np.asarray(scored, dtype=np.float64)
    if values.shape != (len(pairs), feature.dims):
        raise RuntimeError(f"feature {feature.name} returned an array of shape {values.shape} "
                           f"for {len(pairs)} pairs and {feature.dims} values each")
    return values


def check_sentence_ids(nbest: str | os.PathLike[str], source: str | os.PathLike[str]) -> None:
    """Every sentence id of the n-best list ``nbest`` has a line in ``source``: a pre-pass that reads the ids only,
    so that a list of another source fails in a second, before any model loads, not after its scoring. (From
    stdin, the ids are checked as the list is scored.)"""
    if str(nbest) == STDIO:
        return
    lines = count_lines(source)
    for lineno, line in read_lines(nbest):
        head = line.split("|||", 1)[0].strip()  # a malformed line is reported by the reader, later
        if head.isdigit() and int(head) >= lines:
            raise FormatError(display_name(nbest), lineno, f"a sentence id below {lines}, the number of lines of "
                              f"{display_name(source)}", got=head)


def score_nbest(entries: Iterable[NBestEntry], output: str | os.PathLike[str], features: Sequence[Feature], *,
                nbest_name: str, source: str | os.PathLike[str] | None = None, batch_sentences: int = 64,
                reuse: Sequence[str | os.PathLike[str]] = ()) -> None:
    """Write the n-best ``entries`` (of the list ``nbest_name``) to ``output``, atomically, with the values of
    ``features`` appended to every line; the values of a hypothesis that a scored list of ``reuse`` has are
    copied from it (:class:`ScoredValues`)."""
    needy = [f.name for f in features if f.needs_source]
    if needy and source is None:
        raise RerankError(f"feature(s) {', '.join(needy)} need the source text: give --source")
    text = SourceText(source) if source is not None else None
    known = ScoredValues(reuse, [f.name for f in features]) if reuse else None
    write_nbest(add_features(entries, features, nbest_name=nbest_name, source=text,
                             batch_sentences=batch_sentences, reuse=known), output)
