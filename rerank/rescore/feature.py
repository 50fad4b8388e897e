"""What every feature function provides to n-best rescoring: a Moses label, a number of values, and a
batch scorer. The kinds of features live in the top-level ``features`` folder (installed as
``rerank.features``), which implements this protocol."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar, Protocol

import numpy as np

from rerank.formats.tokens import Pair


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
