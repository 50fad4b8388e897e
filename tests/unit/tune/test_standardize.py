"""Feature standardisation in PRO and MIRA: the scales, the weights mapped back, the option off."""

from __future__ import annotations

import argparse
from dataclasses import replace

import numpy as np
import pytest

from rerank.commands import tune as tune_command
from rerank.tune.config import MiraConfig, ProConfig
from rerank.tune.data import TuningData
from rerank.tune.mert import l1_normalised
from rerank.tune.mira import mira
from rerank.tune.optimize import corpus_bleu
from rerank.tune.pro import logistic_regression, pro, sample_pairs
from rerank.tune.standardize import feature_scales, standardised

SCALED = 3      # a feature of the regression lists with a small range (sd 0.51)
FACTOR = 1000.0


@pytest.fixture(scope="module")
def scaled(nbest) -> TuningData:
    """The same lists with feature ``SCALED`` multiplied by ``FACTOR``."""
    features = nbest.features.copy()
    features[:, :, SCALED] *= FACTOR
    return replace(nbest, features=features)


def test_scales_are_deviations_over_the_hypotheses_and_1_for_constants():
    features = np.zeros((2, 3, 3))
    features[0, :2] = [[1.0, 0.1, 5.0], [3.0, 0.1, 5.0]]
    features[1, :1] = [[2.0, 0.1, 5.0]]                      # the rest is padding, left out
    data = TuningData(None, features, np.zeros((2, 3, 10), dtype=np.int64), np.array([2, 1]))  # type: ignore[arg-type]
    scales = feature_scales(data)
    assert scales == pytest.approx([np.std([1.0, 3.0, 2.0]), 1.0, 1.0])
    assert np.array_equal(standardised(data, scales).features[1, 1:], np.zeros((2, 3)))


def test_constant_features_get_no_weight_and_no_nan(nbest):
    constant = feature_scales(nbest) == 1.0
    assert constant.tolist() == [False, False, True, False, False, True] + [False] * 8
    weights = pro(nbest, ProConfig(), np.random.default_rng(11)).weights
    assert np.isfinite(weights).all() and np.all(weights[constant] == 0)
    tuned = mira(nbest, np.full(nbest.dims, 0.1), MiraConfig(epochs=3), np.random.default_rng(2))
    assert np.isfinite(tuned.weights).all()


def test_pro_off_is_the_raw_regression(nbest):
    config = ProConfig(standardize=False)
    differences, better = sample_pairs(nbest, config, np.random.default_rng(11))
    raw, _ = logistic_regression(np.vstack([differences, -differences]),
                                 np.concatenate([better, ~better]).astype(float), config.l2, config.max_iterations)
    assert np.array_equal(pro(nbest, config, np.random.default_rng(11)).weights, l1_normalised(raw))


def test_mira_off_is_unchanged(nbest):
    """The weights, best epoch and BLEU that MIRA gives on these lists without standardisation (kbmira's
    algorithm: tests/integration/test_moses_tuners.py checks it against kbmira itself)."""
    result = mira(nbest, np.full(nbest.dims, 0.1), MiraConfig(epochs=15, standardize=False), np.random.default_rng(2))
    assert (result.epoch, result.updates) == (4, 30)
    assert result.bleu == pytest.approx(33.05831006759575, rel=1e-12)
    assert result.weights[[0, 1, 7, 9, 13]] == pytest.approx(
        [0.0026207486409006273, 0.08050463851415166, 0.15332679047526995, 0.1618160702729097, 0.027606197235798744],
        rel=1e-9)


def on_raw_scale(weights: np.ndarray) -> np.ndarray:
    """Weights for the scaled lists as weights for the original ones, L1-normalised."""
    weights = weights.copy()
    weights[SCALED] *= FACTOR
    return l1_normalised(weights)


def test_pro_standardised_ignores_a_feature_scale(nbest, scaled):
    original = pro(nbest, ProConfig(), np.random.default_rng(11)).weights
    rescaled = pro(scaled, ProConfig(), np.random.default_rng(11)).weights
    assert on_raw_scale(rescaled) == pytest.approx(original, rel=1e-6, abs=1e-12)
    assert np.array_equal(scaled.best(rescaled), nbest.best(original))
    assert corpus_bleu(scaled, rescaled) == pytest.approx(corpus_bleu(nbest, original))
    # without standardisation the prior sees the new scale, and the weights differ
    raw = pro(nbest, ProConfig(standardize=False), np.random.default_rng(11)).weights
    raw_rescaled = pro(scaled, ProConfig(standardize=False), np.random.default_rng(11)).weights
    assert np.abs(on_raw_scale(raw_rescaled) - raw).max() > 1e-3


def test_mira_standardised_ignores_a_feature_scale(nbest, scaled):
    start = np.full(nbest.dims, 0.1)
    start_scaled = start.copy()
    start_scaled[SCALED] /= FACTOR                           # the same starting scores
    config = MiraConfig(epochs=10)
    original = mira(nbest, start, config, np.random.default_rng(2))
    rescaled = mira(scaled, start_scaled, config, np.random.default_rng(2))
    assert (rescaled.epoch, rescaled.updates) == (original.epoch, original.updates)
    assert rescaled.bleu == pytest.approx(original.bleu)
    assert on_raw_scale(rescaled.weights) == pytest.approx(original.weights, rel=1e-6, abs=1e-12)
    assert np.array_equal(scaled.best(rescaled.weights), nbest.best(original.weights))
    off = replace(config, standardize=False)
    raw = mira(nbest, start, off, np.random.default_rng(2)).weights
    raw_rescaled = mira(scaled, start_scaled, off, np.random.default_rng(2)).weights
    assert np.abs(on_raw_scale(raw_rescaled) - raw).max() > 1e-3


@pytest.mark.parametrize(("flags", "expected"), [([], True), (["--standardize"], True),
                                                  (["--no-standardize"], False)])
def test_the_flag_sets_pro_and_mira(flags, expected):
    parser = argparse.ArgumentParser()
    tune_command.add_arguments(parser)
    config = tune_command.resolved_config(parser.parse_args(["--nbest", "x.gz", "-r", "ref", "-o", "w.yaml", *flags]))
    assert config.pro.standardize is expected and config.mira.standardize is expected
