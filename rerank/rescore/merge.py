"""The union of several systems' n-best lists, sentence by sentence, streamed.

An empty list is an error (it is almost always the wrong file) unless partial lists are allowed; a
list with hypotheses for only some of the sentences (of ``num_sentences``, or of those the lists
have together) is merged with a warning that says how many it covers.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator, Sequence

from rerank.errors import FormatError, RerankError, log_once
from rerank.formats.files import display_name
from rerank.formats.nbest import NBestEntry, group_by_sentence, read_nbest

logger = logging.getLogger(__name__)


def merge_nbest(systems: Sequence[tuple[str, str | os.PathLike[str]]], num_sentences: int | None = None,
                allow_empty: bool = False) -> Iterator[NBestEntry]:
    """Entries of the merged list: for each sentence id, each distinct hypothesis once (first system
    first), with features ``In<Name>= 1`` or ``0`` for each system and a total of 0. An empty list is
    an error unless ``allow_empty``; lists covering only some sentences are a warning when the merge ends."""
    labels = tuple(f"In{name}" for name, _ in systems)
    streams = [_Sentences(path) for _, path in systems]
    empty = [(name, stream.name) for (name, _), stream in zip(systems, streams, strict=True) if stream.done]
    if empty and not allow_empty:
        raise RerankError(f"{empty[0][1]}: the n-best list of {empty[0][0]} is empty; give --allow-partial to "
                          "merge it anyway")
    sentences = 0
    while any(not s.done for s in streams):
        sentences += 1
        sentence_id = min(s.next_id for s in streams if not s.done)
        if num_sentences is not None and sentence_id >= num_sentences:
            stream = next(s for s in streams if not s.done and s.next_id == sentence_id)
            raise FormatError(stream.name, stream.group[0].lineno, f"a sentence id below {num_sentences}",
                              got=str(sentence_id))
        found: dict[tuple[str, ...], list[float]] = {}
        for i, stream in enumerate(streams):
            for entry in stream.take(sentence_id):
                found.setdefault(tuple(entry.tokens), [0.0] * len(streams))[i] = 1.0
        for words, indicators in found.items():
            features = [(label, [value]) for label, value in zip(labels, indicators, strict=True)]
            yield NBestEntry.build(sentence_id, words, features, 0.0)
    total = num_sentences if num_sentences is not None else sentences
    for (name, _), stream in zip(systems, streams, strict=True):
        if stream.covered < total:
            log_once(logger, logging.WARNING, "%s: the n-best list of %s has hypotheses for %d of the %d sentences; "
                     "the others have none of its hypotheses", stream.name, name, stream.covered, total)


class _Sentences:
    """One n-best list read sentence by sentence, with a look-ahead of one sentence."""

    def __init__(self, path: str | os.PathLike[str]):
        self.name = display_name(path)
        self._groups = group_by_sentence(read_nbest(path))
        self.group: list[NBestEntry] = []
        self.next_id = -1
        self.done = False
        self.covered = 0  # sentences taken
        self._advance()

    def _advance(self) -> None:
        item = next(self._groups, None)
        if item is None:
            self.done = True
        else:
            self.next_id, self.group = item

    def take(self, sentence_id: int) -> list[NBestEntry]:
        """The entries of ``sentence_id`` if that is the next sentence, else none."""
        if self.done or self.next_id != sentence_id:
            return []
        group = self.group
        self.covered += 1
        self._advance()
        return group
