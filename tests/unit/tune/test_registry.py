"""The registry of optimisers: every name has settings in TuneConfig and tunes; unknown names are refused."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from rerank.config import with_overrides
from rerank.errors import ConfigError
from rerank.formats.nbest import FeatureLayout
from rerank.tune.config import TuneConfig
from rerank.tune.data import TuningData
from rerank.tune.registry import OPTIMIZERS, check_optimizer
from rerank.tune.stats import NUM_STATS
from rerank.tune.tuning import Tuning


def test_every_optimizer_has_its_settings_and_tunes_towards_the_better_hypothesis():
    """One sentence, two hypotheses: the second has every match; each optimiser's weights choose it."""
    features = np.array([[[1.0, 0.0], [0.0, 1.0]]])
    stats = np.zeros((1, 2, NUM_STATS), dtype=np.int64)
    stats[0, :, :2] = 4
    stats[0, 1, 2:6] = [4, 3, 2, 1]
    stats[0, :, 6:] = [4, 3, 2, 1]
    stats[0, 0, 2:6] = [1, 0, 0, 0]
    data = TuningData(FeatureLayout(("A", "B"), (1, 1)), features, stats, np.array([2]))
    for name, kind in OPTIMIZERS.items():
        config = TuneConfig(optimizer=name)
        assert dataclasses.is_dataclass(getattr(config, name))  # its settings: the section of its name
        weights = kind.tune(data, np.array([1.0, 0.0]), config, np.random.default_rng(1))
        assert data.best(weights)[0] == 1, name


def test_unknown_optimizers_are_refused_with_the_known_ones(tmp_path):
    with pytest.raises(ValueError, match="optimizer: expected one of mert, pro, mira, got 'sgd'"):
        check_optimizer("sgd")
    with pytest.raises(ConfigError, match="tune.yaml: optimizer: expected one of mert, pro, mira, got 'sgd'"):
        check_optimizer("sgd", "tune.yaml")
    reference = tmp_path / "ref"
    reference.write_text("a b\n")
    with pytest.raises(ConfigError, match="the tuning config: optimizer: expected one of"):
        Tuning([reference], with_overrides(TuneConfig(), {"optimizer": "sgd"}))
