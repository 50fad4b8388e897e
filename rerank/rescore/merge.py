"""The union of several systems' n-best lists, sentence by sentence, streamed."""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence

from rerank.errors import FormatError
from rerank.formats.files import display_name
from rerank.formats.nbest import NBestEntry, group_by_sentence, read_nbest


def merge_nbest(systems: Sequence[tuple[str, str | os.PathLike[str]]], num_sentences: int | None = None
                ) -> Iterator[NBestEntry]:
    """Entries of the merged list: for each sentence id, each distinct hypothesis once (first system
    first), with features ``In<Name>= 1`` or ``0`` for each system and a total of 0."""
    labels = tuple(f"In{name}" for name, _ in systems)
    streams = [_Sentences(path) for _, path in systems]
    while any(not s.done for s in streams):
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


class _Sentences:
    """One n-best list read sentence by sentence, with a look-ahead of one sentence."""

    def __init__(self, path: str | os.PathLike[str]):
        self.name = display_name(path)
        self._groups = group_by_sentence(read_nbest(path))
        self.group: list[NBestEntry] = []
        self.next_id = -1
        self.done = False
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
        self._advance()
        return group
