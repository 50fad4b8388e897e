"""Sentences dealt into k folds: the split of cross-validation (:mod:`rerank.tune.crossval`) and of MERT's choice
of a starting point by held-out folds (:mod:`rerank.tune.mert`)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from rerank.errors import RerankError
from rerank.tune.data import TuningData


def fold_assignment(num_sentences: int, folds: int, seed: int, what: str = "cross-validation") -> np.ndarray:
    """The fold (0..k-1) of each sentence (S,): a seeded shuffle dealt round, so sizes differ by at most one.

    :param what: what needs the folds, named in the error when there cannot be ``folds`` of them.
    """
    if not 2 <= folds <= num_sentences:
        raise RerankError(f"{what} needs 2 to {num_sentences} folds (one sentence each at least), got {folds}")
    assignment = np.empty(num_sentences, dtype=np.int64)
    assignment[np.random.default_rng(seed).permutation(num_sentences)] = np.arange(num_sentences) % folds
    return assignment


def subset(data: TuningData, sentences: np.ndarray) -> TuningData:
    """The sentences ``sentences`` (a mask (S,) or indices) of ``data``."""
    return replace(data, features=data.features[sentences], stats=data.stats[sentences],
                   counts=data.counts[sentences])
