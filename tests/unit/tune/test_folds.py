"""Folds by sentence: every sentence in one fold, near-equal sizes, the seed's shuffle; a subset keeps its rows."""

from __future__ import annotations

import numpy as np
import pytest

from rerank.errors import RerankError
from rerank.tune.folds import fold_assignment, subset


def test_folds_cover_every_sentence_once_in_near_equal_sizes_and_follow_the_seed():
    folds = fold_assignment(23, 5, seed=3)
    assert sorted(np.bincount(folds)) == [4, 4, 5, 5, 5]
    assert np.array_equal(folds, fold_assignment(23, 5, seed=3))
    assert not np.array_equal(folds, fold_assignment(23, 5, seed=4))
    with pytest.raises(RerankError, match="^cross-validation needs 2 to 3 folds"):
        fold_assignment(3, 4, seed=1)
    with pytest.raises(RerankError, match="^mert.restart_folds needs 2 to 3 folds"):
        fold_assignment(3, 1, seed=1, what="mert.restart_folds")


def test_a_subset_keeps_the_rows_of_its_sentences(val_slice):
    part = subset(val_slice, np.array([3, 0]))
    assert part.num_sentences == 2 and part.layout == val_slice.layout
    assert np.array_equal(part.features[1], val_slice.features[0]) and part.counts[0] == val_slice.counts[3]
    assert np.array_equal(subset(val_slice, fold_assignment(20, 4, 1) == 2).stats,
                          val_slice.stats[fold_assignment(20, 4, 1) == 2])
