"""The feature protocol as rescoring sees it: a label known from the config alone, one row of ``dims`` values
per pair, and the consensus features told apart by their ``score_lists``."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from rerank.features.registry import read_spec
from rerank.formats.nbest import read_nbest
from rerank.rescore.feature import scores_lists

PAIRS = [(("un", "chat"), ["a", "cat"]), (("un", "chat"), ["the", "cat", "sat"])]


def test_a_pair_feature_has_its_label_before_it_is_built_and_a_row_per_pair() -> None:
    spec = read_spec({"kind": "word-penalty"})
    feature = spec.build()
    assert feature.name == type(feature).label(spec.config) == "WP1" and feature.name.isalnum()
    values = feature.score(PAIRS)
    assert values.shape == (len(PAIRS), feature.dims) and values.dtype == np.float64
    assert values[:, 0].tolist() == [-2.0, -3.0]
    assert not scores_lists(feature)


def test_a_consensus_feature_scores_whole_lists(test_data: Path) -> None:
    feature = read_spec({"kind": "mbr"}).build()
    assert scores_lists(feature)
    entries = [entry for entry in read_nbest(test_data / "toy.nbest") if entry.sentence_id == 0]
    values = feature.score_lists([((), entries)])
    assert values.shape == (len(entries), feature.dims) and np.isfinite(values).all()
