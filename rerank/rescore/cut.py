"""Each sentence's first N hypotheses of an n-best list: the list the decoder would have written with
N (for Moses' distinct lists, up to the rare sentence whose N-th distinct string needs more
derivations than the smaller list's search extracts)."""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator

from rerank.formats.nbest import NBestEntry, group_by_sentence, read_nbest, write_nbest
from rerank.formats.scored import carry_record


def first_hypotheses(entries: Iterable[NBestEntry], size: int) -> Iterator[NBestEntry]:
    """The first ``size`` entries of every sentence, unchanged and in order (:func:`read_nbest` checks
    that a sentence's lines are consecutive)."""
    if size < 1:
        raise ValueError(f"expected at least one hypothesis per sentence, got {size}")
    for _, group in group_by_sentence(entries):
        yield from group[:size]


def cut_nbest(nbest: str | os.PathLike[str], size: int, output: str | os.PathLike[str]) -> None:
    """Write the first ``size`` hypotheses of every sentence of the list ``nbest`` to ``output``, atomically, with
    the record of a scored list (:func:`~rerank.formats.scored.carry_record`)."""
    write_nbest(first_hypotheses(read_nbest(nbest), size), output)
    carry_record(nbest, output)
