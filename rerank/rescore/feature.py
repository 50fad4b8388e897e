"""What every feature function provides to n-best rescoring: a Moses label, a number of values, and a
batch scorer. The kinds of features live in the top-level ``features`` folder (installed as
``rerank.features``), which implements this protocol.

A feature whose values depend on the other hypotheses of a sentence and on their scores (a consensus
feature) also implements :class:`ListFeature`: it is given each sentence's n-best entries."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar, Protocol, TypeGuard

import numpy as np

from rerank.formats.nbest import NBestEntry
from rerank.formats.tokens import Pair, Tokens

SentenceList = tuple[Tokens, Sequence[NBestEntry]]  # a sentence's source tokens and its n-best entries, in order


class Feature(Protocol):
    """A log-linear feature computed for (source, hypothesis) pairs.

    ``name`` is the label written into n-best lists (letters and digits only: Moses reads a
    label with ``_`` as a sparse feature). ``score`` returns one row of ``dims`` values per pair.
    Pairs that share a source sentence come together (all hypotheses of an n-best list), so a
    feature may do per-source work once for the whole run of them.
    """

    Config: ClassVar[type]
    name: str
    dims: int
    needs_source: bool

    @staticmethod
    def label(config: Any) -> str: ...  # the ``name`` an instance built from ``config`` will have

    def score(self, pairs: Sequence[Pair]) -> np.ndarray: ...  # (len(pairs), dims) float64


class ListFeature(Feature, Protocol):
    """A feature computed from whole n-best lists: ``score_lists`` gets every sentence's source and entries
    (their hypotheses, features and field-4 totals) and returns one row of ``dims`` values per entry, in
    order. Rescoring calls it instead of ``score``, which such a feature may refuse."""

    def score_lists(self, lists: Sequence[SentenceList]) -> np.ndarray: ...  # (entries, dims) float64


def scores_lists(feature: Feature) -> TypeGuard[ListFeature]:
    """Whether ``feature`` asks for whole n-best lists (it has a ``score_lists`` method)."""
    return callable(getattr(feature, "score_lists", None))
