"""PRO and batch MIRA on Moses' regression n-best lists: the sampling, the classifier, reproducibility."""

from __future__ import annotations

import numpy as np
import pytest

from rerank.formats.files import read_text
from rerank.tune.config import MiraConfig, ProConfig
from rerank.tune.data import NBestPool, TuningData
from rerank.tune.mira import background_bleu, initial_background, mira
from rerank.tune.optimize import corpus_bleu
from rerank.tune.pro import logistic_regression, pro, sample_pairs
from rerank.tune.stats import BleuStatistics, sentence_bleu_plus_one


@pytest.fixture(scope="module")
def nbest(regression_slice) -> TuningData:
    """Moses' regression n-best lists of two tuning iterations: 10 sentences, 14 features."""
    data = regression_slice / "tests/mert.extractor-txt/data"
    pool = NBestPool(BleuStatistics([read_text(data / "reference")]))
    pool.add(data / "nbest.1.gz")
    pool.add(data / "nbest.2.gz")
    return pool.data()


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


def test_background_bleu_is_moses_formula():
    background = initial_background()
    assert background.tolist() == [4, 4, 4, 3, 2, 1, 4, 3, 2, 1]  # hyp_len, ref_len, matches, n-grams
    stats = np.array([[10, 12, 7, 4, 2, 1, 10, 9, 8, 7]], dtype=float)
    total = stats[0] + background
    expected = np.exp(np.mean(np.log(total[2:6] / total[6:10])) + min(0.0, 1 - total[1] / total[0])) * total[1]
    assert background_bleu(stats, background)[0] == pytest.approx(expected)


def test_mira_is_reproducible_and_returns_its_best_epoch(nbest):
    start = np.full(nbest.dims, 0.1)
    config = MiraConfig(epochs=15)
    first = mira(nbest, start, config, np.random.default_rng(2))
    again = mira(nbest, start, config, np.random.default_rng(2))
    assert np.array_equal(first.weights, again.weights) and first.epoch == again.epoch
    assert 1 <= first.epoch <= 15 and first.updates > 0
    assert corpus_bleu(nbest, first.weights) == pytest.approx(first.bleu)
    assert first.bleu > corpus_bleu(nbest, start)
