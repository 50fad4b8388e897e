"""Fixtures shared by the tuning tests: real n-best lists as tuning arrays."""

from __future__ import annotations

import pytest

from rerank.formats.files import read_text
from rerank.tune.data import NBestPool, TuningData
from rerank.tune.stats import BleuStatistics


@pytest.fixture(scope="module")
def nbest(regression_slice) -> TuningData:
    """Moses' regression n-best lists of two tuning iterations: 10 sentences, 14 features, two constant."""
    data = regression_slice / "tests/mert.extractor-txt/data"
    pool = NBestPool(BleuStatistics([read_text(data / "reference")]))
    pool.add(data / "nbest.1.gz")
    pool.add(data / "nbest.2.gz")
    return pool.data()


@pytest.fixture(scope="module")
def val_slice(multi30k_slice) -> TuningData:
    """Moses' 100-best list of the first 20 sentences of Multi30k val."""
    pool = NBestPool(BleuStatistics([read_text(multi30k_slice["val_reference"])]))
    pool.add(multi30k_slice["val_nbest"])
    return pool.data()
