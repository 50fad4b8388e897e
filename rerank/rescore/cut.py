"""Each sentence's first N hypotheses of an n-best list: the list the decoder would have written with
N (for Moses' distinct lists, up to the rare sentence whose N-th distinct string needs more
derivations than the smaller list's search extracts)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from rerank.formats.nbest import NBestEntry, group_by_sentence


def first_hypotheses(entries: Iterable[NBestEntry], size: int) -> Iterator[NBestEntry]:
    """The first ``size`` entries of every sentence, unchanged and in order (:func:`read_nbest` checks
    that a sentence's lines are consecutive)."""
    if size < 1:
        raise ValueError(f"expected at least one hypothesis per sentence, got {size}")
    for _, group in group_by_sentence(entries):
        yield from group[:size]
