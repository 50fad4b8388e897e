"""Streaming n-best rescoring: append feature values, and rerank hypotheses with weights.

Both loops read an n-best list as a stream of sentences (see :func:`group_by_sentence`) and never
hold more than one chunk of sentences in memory, so they run the same on 100 sentences or on a
whole test set. :func:`add_features` is what ``rerank score-nbest`` does; :func:`best_hypothesis`,
:func:`reranked` and :func:`all_sentences` are what ``rerank apply`` does.
"""

from __future__ import annotations

import itertools
import logging
import os
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np

from rerank.errors import FormatError, RerankError
from rerank.formats.files import display_name, read_lines
from rerank.formats.nbest import FeatureLayout, NBestEntry, group_by_sentence
from rerank.progress import ProgressBar

if TYPE_CHECKING:  # features depend on rerank, not the other way round
    from features.base import Feature, Pair

logger = logging.getLogger(__name__)

T = TypeVar("T")
Sentence = tuple[int, list[NBestEntry]]


@dataclass(frozen=True)
class RescoreConfig:
    """What ``rerank score-nbest`` appends: feature specs, in order, and how many sentences to score at once.

    Each spec is a mapping with ``kind`` and that kind's keys (see :mod:`features`). Relative paths
    are relative to the directory the command runs in.
    """

    features: tuple[dict[str, Any], ...] = ()
    batch_sentences: int = 64

    def __post_init__(self) -> None:
        if self.batch_sentences < 1:
            raise ValueError(f"batch_sentences must be positive, got {self.batch_sentences}")


class SourceText:
    """The lines of a source file, fetched by increasing sentence id while the file is read as a stream."""

    def __init__(self, path: str | os.PathLike):
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


def beyond_source(nbest_name: str, entry: NBestEntry, num_sentences: int, source_name: str) -> FormatError:
    """The error for an n-best sentence id that the source file has no line for."""
    return FormatError(nbest_name, entry.lineno,
                       f"a sentence id below {num_sentences}, the number of lines of {source_name}",
                       got=str(entry.sentence_id))


def peek(items: Iterable[T]) -> tuple[T | None, Iterator[T]]:
    """The first item (``None`` if there is none) and an iterator over all the items, the first included."""
    iterator = iter(items)
    first = next(iterator, None)
    return first, (iterator if first is None else itertools.chain([first], iterator))


def chunks(items: Iterable[T], size: int) -> Iterator[list[T]]:
    """Consecutive lists of ``size`` items (the last one shorter)."""
    iterator = iter(items)
    while chunk := list(itertools.islice(iterator, size)):
        yield chunk


def extended_layout(layout: FeatureLayout, features: Sequence[Feature], nbest_name: str) -> FeatureLayout:
    """``layout`` with the features appended; a label the n-best list already has is an error."""
    clashes = [f.name for f in features if f.name in layout.labels]
    if clashes:
        raise RerankError(f"{nbest_name}: the n-best list already has the feature(s) {', '.join(clashes)}; "
                          "give the new feature another label")
    return layout.extended([f.name for f in features], [f.dims for f in features])


def add_features(entries: Iterable[NBestEntry], features: Sequence[Feature], *, nbest_name: str,
                 source: SourceText | None = None, batch_sentences: int = 64) -> Iterator[NBestEntry]:
    """The entries with every feature's values appended to field 3, in file order.

    Each feature scores the (source, hypothesis) pairs of ``batch_sentences`` sentences at a time.
    With a ``source``, an n-best id beyond its last line is an error; without one, features get an
    empty source.
    """
    layout: FeatureLayout | None = None
    progress = ProgressBar("sentences", enabled=logger.isEnabledFor(logging.INFO))
    hypotheses = 0
    for chunk in chunks(group_by_sentence(entries), batch_sentences):
        flat = [entry for _, group in chunk for entry in group]
        if layout is None:
            layout = extended_layout(flat[0].layout, features, nbest_name)
        pairs = [(tokens, entry.tokens) for tokens, group in _with_source(chunk, source, nbest_name)
                 for entry in group]
        columns = [_score(feature, pairs).tolist() for feature in features]  # floats, not numpy scalars: faster
        for i, entry in enumerate(flat):
            yield entry.with_features([(f.name, column[i]) for f, column in zip(features, columns)], layout)
        progress.update(len(chunk))
        hypotheses += len(flat)
    logger.info("scored %s (%d hypotheses)", progress.close(), hypotheses)


def _with_source(chunk: list[Sentence], source: SourceText | None, nbest_name: str
                 ) -> Iterator[tuple[tuple[str, ...], list[NBestEntry]]]:
    for sentence_id, group in chunk:
        if source is None:
            yield (), group
            continue
        line = source.line(sentence_id)
        if line is None:
            raise beyond_source(nbest_name, group[0], source.count(), source.name)
        yield tuple(line.split()), group


def _score(feature: Feature, pairs: Sequence[Pair]) -> np.ndarray:
    values = np.asarray(feature.score(pairs), dtype=np.float64)
    if values.shape != (len(pairs), feature.dims):
        raise RuntimeError(f"feature {feature.name} returned an array of shape {values.shape} "
                           f"for {len(pairs)} pairs and {feature.dims} values each")
    return values


def all_sentences(sentences: Iterable[Sentence], *, num_sentences: int | None, nbest_name: str,
                  source_name: str = "the source") -> Iterator[Sentence]:
    """Every sentence id from 0 on, in order, with an empty list where the n-best list has no line.

    With ``num_sentences``, the ids run up to ``num_sentences - 1`` and a larger id is an error;
    without it, they stop at the last id of the n-best list.
    """
    expected = 0
    for sentence_id, group in sentences:
        if num_sentences is not None and sentence_id >= num_sentences:
            raise beyond_source(nbest_name, group[0], num_sentences, source_name)
        for missing in range(expected, sentence_id):
            yield missing, []
        yield sentence_id, group
        expected = sentence_id + 1
    for missing in range(expected, num_sentences or 0):
        yield missing, []


def model_scores(group: Sequence[NBestEntry], weights: np.ndarray) -> np.ndarray:
    """The log-linear score (dense features · weights) of each hypothesis."""
    return np.array([entry.dense for entry in group], dtype=np.float64).reshape(len(group), -1) @ weights


def reranked(group: Sequence[NBestEntry], weights: np.ndarray) -> list[NBestEntry]:
    """The hypotheses best first, each with its new total in field 4.

    The sort is stable: of hypotheses with equal scores, the one earlier in the file comes first, so
    the first is the first maximum, as Moses picks it.
    """
    scores = model_scores(group, weights)
    order = np.argsort(-scores, kind="stable")
    return [group[i].with_total(float(scores[i])) for i in order]


def best_hypothesis(group: Sequence[NBestEntry], weights: np.ndarray) -> NBestEntry:
    """The hypothesis with the highest score; of equal ones, the first in the file."""
    return group[int(np.argmax(model_scores(group, weights)))]
