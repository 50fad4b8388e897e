"""The line search of MERT is exact: never worse than a dense grid on real lists, equal to brute force on
small lists full of ties, and an axis along which nothing changes has no breakpoints."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import MOSES_VAL_WEIGHTS, random_tuning_data

from rerank.tune.data import TuningData
from rerank.tune.envelope import LineSearch
from rerank.tune.stats import log_bleu


def bleu_at(search: LineSearch, weights: np.ndarray) -> float:
    return float(log_bleu(search.best_stats(search.hypothesis_scores(weights))))


@pytest.mark.parametrize("start", ["moses", "random", "zeros"])
def test_line_search_is_never_worse_than_a_dense_grid(val_slice, start):
    """On real data: the optimum along every axis and some random directions beats every grid point."""
    rng = np.random.default_rng(7)
    weights = {"moses": MOSES_VAL_WEIGHTS, "random": rng.uniform(-1, 1, 8), "zeros": np.zeros(8)}[start]
    search = LineSearch(val_slice)
    scores = search.hypothesis_scores(weights)
    directions = np.vstack([np.eye(8), rng.standard_normal((3, 8))])
    optima = search.axes(scores) + search.directions(scores, directions[8:])
    grid = np.linspace(-1.0, 1.0, 201)
    for direction, optimum in zip(directions, optima, strict=True):
        reached = bleu_at(search, weights + optimum.gamma * direction)
        assert reached == pytest.approx(optimum.log_bleu, abs=1e-12)  # the promised BLEU is there
        best_on_grid = max(bleu_at(search, weights + g * direction) for g in grid)
        assert optimum.log_bleu >= best_on_grid - 1e-12


def brute_force_maximum(data: TuningData, weights: np.ndarray, direction: np.ndarray) -> float:
    """ln BLEU at the best point of the line: the starting point, or inside an interval between crossings.

    (A crossing point itself is not a candidate: the slightest rounding moves it into an interval.)
    """
    a = data.features @ weights
    b = data.features @ direction
    crossings = [0.0]
    for s, n in enumerate(data.counts):
        i, j = np.triu_indices(n, 1)
        with np.errstate(divide="ignore", invalid="ignore"):
            gamma = (a[s, i] - a[s, j]) / (b[s, j] - b[s, i])
        crossings += list(gamma[np.isfinite(gamma)])
    points = np.unique(crossings)
    trials = np.concatenate([[points[0] - 1], (points[1:] + points[:-1]) / 2, [points[-1] + 1, 0.0]])
    return max(float(log_bleu(data.corpus_stats(weights + g * direction))) for g in trials)


@pytest.mark.parametrize("seed", range(12))
def test_line_search_equals_brute_force_with_ties(seed):
    data = random_tuning_data(seed)
    rng = np.random.default_rng(seed)
    search = LineSearch(data)
    for weights in (rng.integers(-2, 3, 3).astype(np.float64), np.zeros(3)):
        scores = search.hypothesis_scores(weights)
        for k, optimum in enumerate(search.axes(scores)):
            direction = np.eye(3)[k]
            assert optimum.log_bleu == pytest.approx(brute_force_maximum(data, weights, direction), abs=1e-12)
            assert bleu_at(search, weights + optimum.gamma * direction) == pytest.approx(optimum.log_bleu, abs=1e-12)


def test_constant_features_have_no_breakpoints():
    data = random_tuning_data(3)
    features = data.features.copy()
    features[..., 1] = 2.0   # the same for every hypothesis: lines never cross along this axis
    data = TuningData(data.layout, features, data.stats, data.counts)
    search = LineSearch(data)
    weights = np.array([1.0, 0.5, -1.0])
    optimum = search.axes(search.hypothesis_scores(weights))[1]
    assert optimum.breakpoints == 0 and optimum.gamma == 0.0
    assert optimum.log_bleu == pytest.approx(bleu_at(search, weights))
