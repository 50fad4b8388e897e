"""The settings of rerank tune: Moses' defaults, and each value out of its range refused with the file and
the key it is under."""

from __future__ import annotations

import pytest

from rerank.config import from_dict
from rerank.errors import ConfigError
from rerank.tune.config import TuneConfig


def test_the_defaults_are_moses() -> None:
    config = TuneConfig()
    assert (config.optimizer, config.mert.restarts, config.mert.bounds, config.mert.min_gain) == ("mert", 20,
                                                                                                  (0.0, 1.0), 1e-4)
    assert (config.pro.samples, config.pro.keep, config.pro.min_diff) == (5000, 50, 0.05)
    assert (config.mira.c, config.mira.decay, config.loop.nbest_size, config.bleu.tokenize) == (0.01, 0.999, 100,
                                                                                                "none")


def test_nested_values_are_read_as_their_types() -> None:
    config = from_dict(TuneConfig, {"mert": {"feature_bounds": {"LM0": [-1, 1]}},
                                    "cv": {"folds": 3, "choose": {"pro.l2": [0.1, 1]}}}, "tune.yaml")
    assert config.mert.feature_bounds == {"LM0": (-1.0, 1.0)} and config.cv.choose == {"pro.l2": (0.1, 1.0)}


@pytest.mark.parametrize(("data", "message"), [
    ({"mert": {"restarts": 0}}, r"mert.restarts: expected an integer of at least 1, got 0"),
    ({"mert": {"bounds": [1, 0]}}, r"mert: bounds for bounds: low 1.0 is above high 0.0"),
    ({"mert": {"feature_bounds": {"LM0": [1, 2, 3]}}}, r"mert: bounds for LM0: expected \[low, high\]"),
    ({"mert": {"random_directions": -1}}, r"mert.random_directions: expected an integer of at least 0, got -1"),
    ({"mert": {"average": 0}}, r"mert.average: expected an integer of at least 1, got 0"),
    ({"mert": {"restart_folds": 1}}, r"mert.restart_folds: expected 0 \(the tuning set's best run\) or at least 2"),
    ({"pro": {"keep": 0}}, r"pro.keep: expected an integer of at least 1, got 0"),
    ({"mira": {"decay": 0}}, r"mira.decay: expected a number above 0, got 0"),
    ({"loop": {"nbest_size": 0}}, r"loop.nbest_size: expected an integer of at least 1, got 0"),
    ({"cv": {"folds": 1}}, r"cv.folds: expected 0 \(none\) or at least 2, got 1"),
    ({"cv": {"choose": {"pro.l2": [1]}}}, r"cv.choose: expected folds of at least 2 to choose by"),
    ({"cv": {"folds": 3, "choose": {"pro.l2": []}}}, r"cv.choose.pro.l2: expected at least one value, got \[\]"),
    ({"average_seeds": 0}, r"average_seeds: expected an integer of at least 1, got 0"),
    ({"seed": -1}, r"seed: expected an integer of at least 0, got -1"),
    ({"cv": {"seed": -1}}, r"cv.seed: expected an integer of at least 0, got -1"),
    ({"pro": {"l2": -1}}, r"pro.l2: expected a number of at least 0, got -1"),
    ({"cv": {"folds": 3, "choose": {"seed": [-1, 1]}}}, r"cv.choose.seed: expected an integer of at least 0, got -1"),
    ({"cv": {"folds": 3, "choose": {"cv.folds": [3, 4]}}},
     r"cv.choose: expected settings of the tuning, not of the cross-validation that chooses them, got 'cv.folds'"),
    ({"cv": {"folds": 3, "choose": {"mert.restarts": [1.5]}}}, r"cv.choose.mert.restarts: expected whole numbers"),
    ({"cv": {"folds": 3, "choose": {"pro.nothing": [1]}}}, r"cv.choose.pro.nothing: expected a setting of the "),
    ({"cv": {"folds": 3, "choose": {"optimizer": [1]}}}, r"cv.choose.optimizer: expected a number setting"),
    ({"bleu": {"tokenize": "13b"}}, r"bleu: unknown BLEU tokenizer '13b': expected one of none, zh, 13a"),
])
def test_a_value_out_of_range_is_refused_under_its_key(data: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError, match=rf"^tune.yaml: {message}"):
        from_dict(TuneConfig, data, "tune.yaml")


def test_a_flag_out_of_range_is_refused_under_its_whole_key() -> None:
    from rerank.config import with_overrides

    with pytest.raises(ConfigError, match=r"^the command line: cv.choose.pro.l2: expected a number of at least 0, "
                                          r"got -1"):
        with_overrides(TuneConfig(), {"cv.folds": 3, "cv.choose": {"pro.l2": (-1.0, 1.0)}})
