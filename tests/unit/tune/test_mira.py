"""Batch MIRA on Moses' regression n-best lists and on hand-made ones: kbmira's background BLEU, the update
step, reproducibility."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import HALF, NOTHING, PERFECT, hand_made

from rerank.tune.config import MiraConfig
from rerank.tune.mira import background_bleu, initial_background, mira
from rerank.tune.optimize import corpus_bleu


def test_background_bleu_is_kbmira_formula():
    background = initial_background()
    assert background.tolist() == [1.0] * 10  # kbmira: every statistic 1 at the start
    stats = np.array([[10, 12, 7, 4, 2, 1, 10, 9, 8, 7]], dtype=float)  # hyp_len, ref_len, matches, n-grams
    total = stats[0] + background
    expected = np.exp(np.mean(np.log(total[2:6] / total[6:10])) + min(0.0, 1 - total[1] / total[0])) * total[1]
    assert background_bleu(stats, background)[0] == pytest.approx(expected)


@pytest.mark.parametrize("c", [0.01, 10.0])
def test_mira_update_on_a_hand_made_list(c):
    """Two hypotheses, the better one (all n-grams right) preferred less by the starting weights.

    With every background statistic 1, BLEU times the reference length is 5 for the perfect
    hypothesis and 5 * (1/5 * 1/4 * 1/3 * 1/2)^(1/4) for the one without a match. The hope is the
    perfect one, the fear the other; the step along their difference (1, -1) is the loss over
    |difference|^2 = 2, capped at C; the average after one update is the start plus the new
    weights (kbmira's running sum starts with the starting weights)."""
    data = hand_made([[1.0, 0.0], [0.0, 1.0]], [PERFECT, NOTHING])
    start = np.array([0.0, 0.5])
    gap = 5.0 - 5.0 * (1 / 5 * 1 / 4 * 1 / 3 * 1 / 2) ** 0.25
    loss = gap - (0.0 - 0.5)
    step = min(c, loss / 2.0)
    after = start + step * np.array([1.0, -1.0])
    result = mira(data, start, MiraConfig(epochs=1, c=c, standardize=False), np.random.default_rng(0))
    assert result.updates == 1
    expected = start + after
    assert result.weights == pytest.approx(expected / np.abs(expected).sum(), rel=1e-12)
    if c == 10.0:   # the uncapped step makes the margin exactly the BLEU difference
        assert after @ np.array([1.0, -1.0]) == pytest.approx(gap, rel=1e-12)


def test_mira_leaves_a_list_of_equal_bleu_alone():
    data = hand_made([[1.0, 0.0], [0.0, 1.0]], [HALF, HALF])
    result = mira(data, np.array([0.25, 0.75]), MiraConfig(epochs=3, standardize=False), np.random.default_rng(0))
    assert result.updates == 0 and result.weights.tolist() == [0.25, 0.75]


def test_mira_is_reproducible_and_returns_its_best_epoch(nbest):
    start = np.full(nbest.dims, 0.1)
    config = MiraConfig(epochs=15)
    first = mira(nbest, start, config, np.random.default_rng(2))
    again = mira(nbest, start, config, np.random.default_rng(2))
    assert np.array_equal(first.weights, again.weights) and first.epoch == again.epoch
    assert 1 <= first.epoch <= 15 and first.updates > 0
    assert corpus_bleu(nbest, first.weights) == pytest.approx(first.bleu)
    assert first.bleu > corpus_bleu(nbest, start)
