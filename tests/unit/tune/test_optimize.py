"""One optimiser call: the optimiser the config names, weights L1-normalised, and corpus BLEU of the
hypotheses the weights choose, whatever their scale."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import HALF, NOTHING, PERFECT, hand_made, random_tuning_data

from rerank.tune.config import TuneConfig
from rerank.tune.optimize import corpus_bleu, optimize

# one sentence: the first hypothesis matches nothing, the second half, the third every n-gram
DATA = hand_made([[1.0, 0.0], [0.5, 0.5], [0.0, 1.0]], [NOTHING, HALF, PERFECT])


def test_corpus_bleu_is_that_of_the_hypothesis_the_weights_choose() -> None:
    assert corpus_bleu(DATA, np.array([0.0, 1.0])) == pytest.approx(100.0)
    assert corpus_bleu(DATA, np.array([0.0, 5.0])) == pytest.approx(100.0)  # the scale does not matter
    assert corpus_bleu(DATA, np.array([1.0, 0.0])) == pytest.approx(0.0)
    assert corpus_bleu(DATA, np.array([-1.0, -1e-3])) == pytest.approx(100.0)  # the highest score, not the lowest


@pytest.mark.parametrize("optimizer", ["mert", "pro", "mira"])
def test_optimize_runs_the_named_optimizer_to_l1_normalised_weights(optimizer: str) -> None:
    weights = optimize(DATA, np.array([3.0, 1.0]), TuneConfig(optimizer=optimizer), np.random.default_rng(0))
    assert weights.shape == (2,) and np.abs(weights).sum() == pytest.approx(1.0)
    assert DATA.best(weights)[0] == 2 and corpus_bleu(DATA, weights) == pytest.approx(100.0)


@pytest.mark.parametrize("optimizer", ["mert", "pro", "mira"])
def test_activate_tunes_only_those_features_and_the_others_keep_their_ratios(optimizer: str) -> None:
    data = random_tuning_data(3, sentences=20, size=8, dims=4)
    initial = np.array([0.4, -0.2, 0.1, 0.3])
    config = TuneConfig(optimizer=optimizer, activate=("F2",))
    weights = optimize(data, initial, config, np.random.default_rng(0))
    assert np.abs(weights).sum() == pytest.approx(1.0)
    held = [0, 1, 3]
    assert weights[held] / weights[0] == pytest.approx(initial[held] / initial[0])
    free = optimize(data, initial, TuneConfig(optimizer=optimizer), np.random.default_rng(0))
    assert not np.allclose(free[held] / free[0], initial[held] / initial[0])  # tuned alone, they move
    assert corpus_bleu(data, weights) >= corpus_bleu(data, initial) - 1e-9 or optimizer != "mert"
