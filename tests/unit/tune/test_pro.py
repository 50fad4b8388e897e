"""PRO on Moses' regression n-best lists and on hand-made ones: the sampling, the classifier, reproducibility."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import HALF, NOTHING, PERFECT, hand_made

from rerank.formats.files import read_text
from rerank.tune.config import ProConfig
from rerank.tune.optimize import corpus_bleu
from rerank.tune.pro import logistic_regression, pro, sample_pairs
from rerank.tune.stats import sentence_bleu_plus_one


def test_pairs_are_the_largest_differences_of_at_least_min_diff(nbest):
    config = ProConfig(samples=500, keep=20, min_diff=0.05)
    differences, better = sample_pairs(nbest, config, np.random.default_rng(0))
    assert differences.shape[1] == nbest.dims and len(differences) == len(better)
    assert 0 < len(differences) <= config.keep * nbest.num_sentences
    # every kept pair's feature difference is that of two hypotheses of one sentence, BLEU apart by >= 0.05
    bleu = sentence_bleu_plus_one(nbest.stats)
    found = 0
    for difference, first_better in zip(differences[:40], better[:40], strict=True):
        for s in range(nbest.num_sentences):
            n = nbest.counts[s]
            match = np.argwhere((np.abs(nbest.features[s, :n, None] - nbest.features[s, None, :n] - difference)
                                 < 1e-9).all(axis=-1))
            gaps = [bleu[s, i] - bleu[s, j] for i, j in match]
            if gaps:
                assert any(abs(g) >= 0.05 and (g > 0) == first_better for g in gaps)
                found += 1
                break
    assert found == 40


def test_logistic_regression_converges_to_a_stationary_point():
    rng = np.random.default_rng(3)
    features = rng.standard_normal((400, 5))
    labels = (features @ np.array([1.0, -2.0, 0.5, 0.0, 3.0]) + rng.standard_normal(400) > 0).astype(float)
    weights, steps = logistic_regression(features, labels, l2=1.0, max_iterations=50)
    p = 1 / (1 + np.exp(-features @ weights))
    assert np.abs(features.T @ (p - labels) + weights).max() < 1e-8
    assert steps < 20
    assert np.sign(weights[[0, 1, 4]]).tolist() == [1, -1, 1]


def test_pro_is_reproducible_and_better_than_no_tuning(nbest, regression_slice):
    first = pro(nbest, ProConfig(), np.random.default_rng(11))
    again = pro(nbest, ProConfig(), np.random.default_rng(11))
    assert np.array_equal(first.weights, again.weights)
    assert np.abs(first.weights).sum() == pytest.approx(1.0)
    untuned = np.array([float(v) for v in read_text(regression_slice / "tests/mert.basic/data/INIT")[0].split()])
    assert corpus_bleu(nbest, first.weights) > corpus_bleu(nbest, untuned) + 5


def test_pro_on_a_hand_made_list_learns_the_better_hypothesis_direction():
    """Two hypotheses: every pair is (better - worse) = (2, -1) or its negation, so the classifier with an
    isotropic prior lies along (2, -1): L1-normalised (2/3, -1/3). Its length a solves
    a = (2P / l2) * sigmoid(-a * 5) for P kept pairs (the gradient of the objective is 0)."""
    data = hand_made([[3.0, 0.0], [1.0, 1.0]], [PERFECT, NOTHING])
    config = ProConfig(standardize=False)
    result = pro(data, config, np.random.default_rng(4))
    assert result.pairs == config.keep
    assert result.weights == pytest.approx([2 / 3, -1 / 3], rel=1e-9)
    differences, better = sample_pairs(data, config, np.random.default_rng(4))
    features = np.vstack([differences, -differences])
    labels = np.concatenate([better, ~better]).astype(float)
    weights, _ = logistic_regression(features, labels, config.l2, config.max_iterations)
    low, high = 0.0, 10.0
    for _ in range(200):   # bisection on a - (2P / l2) sigmoid(-5a), increasing in a
        middle = (low + high) / 2
        if middle - 2 * config.keep / config.l2 / (1 + np.exp(5 * middle)) > 0:
            high = middle
        else:
            low = middle
    assert weights == pytest.approx(low * np.array([2.0, -1.0]), rel=1e-9)


def test_pro_keeps_the_pairs_furthest_apart_and_none_closer_than_min_diff():
    """Sentence BLEU+1: perfect 1, half 0.05^(1/4) = 0.47, nothing 0.30: the pair (perfect, nothing) is the
    furthest apart; with a minimum difference above every gap nothing is kept."""
    features = [[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]]
    data = hand_made(features, [PERFECT, NOTHING, HALF])
    differences, better = sample_pairs(data, ProConfig(keep=1), np.random.default_rng(0))
    assert len(differences) == 1
    assert (np.where(better[0], differences[0], -differences[0])).tolist() == [1.0, -1.0, 0.0]
    differences, better = sample_pairs(data, ProConfig(min_diff=0.75), np.random.default_rng(0))
    assert len(differences) == 0
