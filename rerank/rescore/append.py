"""Streaming n-best rescoring: append feature values to every hypothesis (``rerank score-nbest``).

The n-best list is read as a stream of sentences (see :func:`~rerank.formats.nbest.group_by_sentence`)
and never more than one chunk of sentences is held in memory, so it runs the same on 100 sentences
or on a whole test set.
"""

from __future__ import annotations

import hashlib
import itertools
import logging
import os
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from rerank.errors import FormatError, NonFiniteScore, RerankError, counted
from rerank.formats.files import STDIO, atomic_output, committed_together, count_lines, display_name, read_lines
from rerank.formats.nbest import (
    FeatureLayout,
    NBestEntry,
    NBestGroup,
    beyond_source,
    group_by_sentence,
    read_nbest,
)
from rerank.formats.pipeline import Behind, ahead
from rerank.formats.scored import (
    Identity,
    content_digest,
    difference,
    has_record,
    read_record,
    record_path,
    write_record,
)
from rerank.formats.tokens import Pair
from rerank.progress import progress_bar, summary
from rerank.rescore.feature import Feature, SentenceList, scores_lists

logger = logging.getLogger(__name__)

STDIN_NAME = display_name(STDIO)


@dataclass(frozen=True)
class RescoreConfig:
    """What ``rerank score-nbest`` appends: feature specs, in order, and how many sentences to score at once.

    Each spec is a mapping with ``kind`` and that kind's keys (see :mod:`features`). A relative path is read
    from the working directory, or where it is not there, from the config's directory or the nearest one above it
    that has it (:func:`rerank.config.resolved_input`).
    """

    features: tuple[dict[str, Any], ...] = ()  # in order: each a mapping of kind and that kind's keys (below)
    batch_sentences: int = 64  # sentences whose hypotheses each feature scores in one call

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


def check_new_labels(layout: FeatureLayout, labels: Sequence[str], nbest_name: str,
                     renames: Mapping[str, str] | None = None) -> None:
    """A label the n-best list already has is an error; ``renames`` says, by label, how to give that feature
    another one (the option or config key), where the caller knows."""
    clashes = [label for label in labels if label in layout.labels]
    if clashes:
        renames = renames or {}
        how = sorted({renames[label] for label in clashes if label in renames})
        raise RerankError(f"{nbest_name}: the n-best list already has the feature(s) {', '.join(clashes)}; "
                          f"give the new feature another label{' (' + '; '.join(how) + ')' if how else ''}")


def check_source_given(needy: Sequence[str], source: str | os.PathLike[str] | None) -> None:
    """Features that read the source (labels ``needy``) need ``source``."""
    if needy and source is None:
        raise RerankError(f"feature(s) {', '.join(needy)} need the source text: give --source")


def extended_layout(layout: FeatureLayout, features: Sequence[Feature], nbest_name: str) -> FeatureLayout:
    """``layout`` with the features appended (:func:`check_new_labels`)."""
    check_new_labels(layout, [f.name for f in features], nbest_name)
    return layout.extended([f.name for f in features], [f.dims for f in features])


Hypothesis = tuple[int, tuple[str, ...]]  # a sentence id and the hypothesis' words


def check_reusable(paths: Sequence[str | os.PathLike[str]], record: Mapping[str, Identity],
                   labels: Sequence[str]) -> None:
    """Each scored list of ``paths`` has a record (:mod:`rerank.formats.scored`) that describes its text, and its
    values of ``labels`` were computed from what ``record`` says they are computed from now (the same kind and
    options, files of the same content, the same source): else an error naming the list, the label and what
    differs. Only the record is read, and the list's text once: before any model loads."""
    for path in paths:
        name = display_name(path)
        first = next(read_nbest(path), None)
        present = [label for label in labels if first is not None and label in first.layout.labels]
        if not present:
            continue  # none of its values is taken: every hypothesis is scored anew
        recorded = read_record(path)
        unchecked = f"score it again, or give it as --reuse-unchecked {name} to take its values as they are"
        if recorded is None:
            raise RerankError(f"{name}: no record of what its features were computed from ({record_path(path).name}, "
                              f"which score-nbest writes beside a list): {unchecked}")
        if content_digest(path) != recorded.nbest:
            raise RerankError(f"{name}: not the list its record {recorded.path} describes (it changed since it was "
                              f"scored): {unchecked}")
        for label in present:
            if label not in recorded.features:
                raise RerankError(f"{name}: its record {recorded.path} does not say what its {label} values were "
                                  f"computed from: {unchecked}")
            differs = difference(recorded.features[label], record[label])
            if differs is not None:
                raise RerankError(f"{name}: {label} was scored with {differs}: its values are not this feature's; "
                                  "reuse a list scored with the same features, or score without it")


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


@dataclass
class _Block:
    """A block of sentence ids' hypotheses: the sentences, each with its source, the hypotheses in file order,
    and the (source, hypothesis) pairs the features score."""

    lists: list[tuple[tuple[str, ...], list[NBestEntry]]]
    flat: list[NBestEntry]
    pairs: list[Pair]


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
    appender = _Appender(features, nbest_name, reuse)
    for block in _blocks(entries, source, nbest_name, batch_sentences):
        yield from appender.appended(block, appender.columns(block))
    appender.done()


def _blocks(entries: Iterable[NBestEntry], source: SourceText | None, nbest_name: str,
            batch_sentences: int) -> Iterator[_Block]:
    """The blocks of :func:`add_features`, read and parsed."""
    blocks = itertools.groupby(group_by_sentence(entries), key=lambda group: group[0] // batch_sentences)
    for _, block in blocks:
        chunk = list(block)
        lists = list(_with_source(chunk, source, nbest_name))
        yield _Block(lists, [entry for _, group in chunk for entry in group],
                     [(tokens, entry.tokens) for tokens, group in lists for entry in group])


class _Appender:
    """The features' values of each block (:meth:`columns`, the model's part) and the entries with them
    (:meth:`appended`, the host's part), with the progress of both. With ``reuse``, the pairs it holds values
    for are not scored again."""

    def __init__(self, features: Sequence[Feature], nbest_name: str, reuse: ScoredValues | None = None):
        self.features, self.nbest_name, self.reuse = features, nbest_name, reuse
        self.layout: FeatureLayout | None = None
        self.progress = progress_bar("sentences", enabled=logger.isEnabledFor(logging.INFO))
        self.hypotheses = 0

    def columns(self, block: _Block) -> list[list[Any]]:
        if self.layout is None:
            self.layout = extended_layout(block.flat[0].layout, self.features, self.nbest_name)
        return [_reused_or_scored(feature, block.pairs, block.lists, block.flat, self.reuse)
                for feature in self.features]

    def appended(self, block: _Block, columns: list[list[Any]]) -> Iterator[NBestEntry]:
        assert self.layout is not None
        for i, entry in enumerate(block.flat):
            values = [(f.name, column[i]) for f, column in zip(self.features, columns, strict=True)]
            try:
                yield entry.with_features(values, self.layout)
            except NonFiniteScore as e:
                raise e.in_file(self.nbest_name) from None
        self.progress.update(len(block.lists))
        self.hypotheses += len(block.flat)

    def done(self) -> None:
        logger.info("scored %s (%s)", summary(self.progress), counted(self.hypotheses, "hypothesis", "hypotheses"))


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
                overlap: bool = True, reuse: Sequence[str | os.PathLike[str]] = (),
                reuse_unchecked: Sequence[str | os.PathLike[str]] = (),
                record: Mapping[str, Identity] | None = None) -> None:
    """Write the n-best ``entries`` (of the list ``nbest_name``) to ``output``, atomically, with the values of
    ``features`` appended to every line; the values of a hypothesis that a scored list of ``reuse`` has are
    copied from it (:class:`ScoredValues`), once its record matches ``record`` (:func:`check_reusable`), and
    those of ``reuse_unchecked`` as they are. With ``record`` (each label's entry: the features', and those of
    the input list's record), the list's record is written beside it, together with it
    (:mod:`rerank.formats.scored`; not beside stdout, a device or a FIFO). With ``overlap``, the list (and the
    source) are read and parsed by one thread and the lines formatted and written by another while the features
    score (:mod:`rerank.formats.pipeline`): the same bytes are written. A list or source read from stdin is read
    in the scoring thread (a thread blocked reading a pipe cannot be stopped)."""
    check_source_given([f.name for f in features if f.needs_source], source)
    reused = [f.name for f in features if not scores_lists(f)]
    if reuse:
        if record is None:
            raise ValueError("reuse needs the record of the features, to check the lists against")
        check_reusable(reuse, record, reused)
    for path in reuse_unchecked:
        logger.warning("%s: its values are taken unchecked (what they were computed from is not compared)",
                       display_name(path))
    text = SourceText(source) if source is not None else None
    scored_lists = [*reuse, *reuse_unchecked]
    known = ScoredValues(scored_lists, reused) if scored_lists else None
    appender = _Appender(features, nbest_name, known)
    digest = hashlib.sha256()
    with committed_together():  # the list and its record appear together
        with atomic_output(output) as out:
            def write(scored: tuple[_Block, list[list[Any]]]) -> None:
                lines = "".join([f"{entry.line()}\n" for entry in appender.appended(*scored)])
                digest.update(lines.encode("utf-8"))
                out.write(lines)

            with Behind(write, enabled=overlap) as writer:
                read_ahead = overlap and STDIN_NAME not in (nbest_name, text.name if text is not None else None)
                for block in ahead(_blocks(entries, text, nbest_name, batch_sentences), enabled=read_ahead):
                    writer.put((block, appender.columns(block)))
        if record is not None and has_record(output):
            write_record(output, digest.hexdigest(), record)
    appender.done()
