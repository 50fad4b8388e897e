"""MERT: the line search is exact (never worse than a grid, equal to brute force), runs are reproducible."""

from __future__ import annotations

import math

import numpy as np
import pytest

from rerank.formats.files import read_text
from rerank.formats.nbest import FeatureLayout
from rerank.tune.config import MertConfig
from rerank.tune.data import NBestPool, TuningData
from rerank.tune.envelope import LineSearch
from rerank.tune.mert import ascend, l1_normalised, mert, mert_bounds
from rerank.tune.optimize import corpus_bleu
from rerank.tune.stats import NUM_STATS, BleuStatistics, log_bleu

MOSES_WEIGHTS = np.array([0.138061, 0.15949, -0.225306, 0.105148, 0.126263, 0.0567749, 0.12818, 0.0607768])


def bleu_at(search: LineSearch, weights: np.ndarray) -> float:
    return float(log_bleu(search.best_stats(search.hypothesis_scores(weights))))


@pytest.mark.parametrize("start", ["moses", "random", "zeros"])
def test_line_search_is_never_worse_than_a_dense_grid(val_slice, start):
    """On real data: the optimum along every axis and some random directions beats every grid point."""
    rng = np.random.default_rng(7)
    weights = {"moses": MOSES_WEIGHTS, "random": rng.uniform(-1, 1, 8), "zeros": np.zeros(8)}[start]
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


def synthetic(seed: int, sentences: int = 6, size: int = 7, dims: int = 3) -> TuningData:
    """Small integer features (many equal slopes and ties) and random BLEU statistics."""
    rng = np.random.default_rng(seed)
    counts = rng.integers(1, size + 1, sentences)
    features = rng.integers(-3, 4, (sentences, size, dims)).astype(np.float64)
    stats = np.zeros((sentences, size, NUM_STATS), dtype=np.int64)
    stats[..., 0] = rng.integers(4, 12, (sentences, size))
    stats[..., 1] = 8
    for n in range(4):
        stats[..., 6 + n] = stats[..., 0] - n
        stats[..., 2 + n] = rng.integers(1, stats[..., 6 + n] + 1)
    valid = np.arange(size)[None, :] < counts[:, None]
    features[~valid], stats[~valid] = 0, 0
    return TuningData(FeatureLayout(tuple(f"F{i}" for i in range(dims)), (1,) * dims), features, stats, counts)


@pytest.mark.parametrize("seed", range(12))
def test_line_search_equals_brute_force_with_ties(seed):
    data = synthetic(seed)
    rng = np.random.default_rng(seed)
    search = LineSearch(data)
    for weights in (rng.integers(-2, 3, 3).astype(np.float64), np.zeros(3)):
        scores = search.hypothesis_scores(weights)
        for k, optimum in enumerate(search.axes(scores)):
            direction = np.eye(3)[k]
            assert optimum.log_bleu == pytest.approx(brute_force_maximum(data, weights, direction), abs=1e-12)
            assert bleu_at(search, weights + optimum.gamma * direction) == pytest.approx(optimum.log_bleu, abs=1e-12)


def test_constant_features_have_no_breakpoints():
    data = synthetic(3)
    features = data.features.copy()
    features[..., 1] = 2.0   # the same for every hypothesis: lines never cross along this axis
    data = TuningData(data.layout, features, data.stats, data.counts)
    search = LineSearch(data)
    weights = np.array([1.0, 0.5, -1.0])
    optimum = search.axes(search.hypothesis_scores(weights))[1]
    assert optimum.breakpoints == 0 and optimum.gamma == 0.0
    assert optimum.log_bleu == pytest.approx(bleu_at(search, weights))


def test_all_constant_features_do_not_crash():
    data = synthetic(4)
    constant = TuningData(data.layout, np.ones_like(data.features), data.stats, data.counts)
    result = mert(constant, np.zeros(3), MertConfig(restarts=3), np.tile([0.0, 1.0], (3, 1)), np.random.default_rng(0))
    assert np.isfinite(result.weights).all() and np.isfinite(result.bleu)


def test_mert_reaches_moses_on_its_regression_test(regression_slice):
    """Moses' mert.basic test: from its INIT weights, Moses' mert finds BLEU 0.304339 on nbest.1."""
    data_dir = regression_slice / "tests/mert.extractor-txt/data"
    pool = NBestPool(BleuStatistics([read_text(data_dir / "reference")]))
    pool.add(data_dir / "nbest.1.gz")
    data = pool.data()
    init = np.array([float(v) for v in read_text(regression_slice / "tests/mert.basic/data/INIT")[0].split()])
    result = mert(data, init, MertConfig(), mert_bounds(data.layout, MertConfig()), np.random.default_rng(1))
    assert result.bleu >= 30.4339
    assert corpus_bleu(data, result.weights) == pytest.approx(result.bleu)
    assert np.abs(result.weights).sum() == pytest.approx(1.0)


def test_mert_is_reproducible_and_improves(val_slice):
    config = MertConfig(restarts=4, random_directions=2)
    bounds = mert_bounds(val_slice.layout, config)
    first = mert(val_slice, MOSES_WEIGHTS, config, bounds, np.random.default_rng(5))
    again = mert(val_slice, MOSES_WEIGHTS, config, bounds, np.random.default_rng(5))
    assert np.array_equal(first.weights, again.weights) and first.bleu == again.bleu
    assert first.bleu >= corpus_bleu(val_slice, MOSES_WEIGHTS)
    assert first.bleu == max(run.bleu for run in first.runs)
    assert np.array_equal(first.runs[0].start, MOSES_WEIGHTS)  # the first run starts from the given weights
    assert all(((bounds[:, 0] <= run.start) & (run.start <= bounds[:, 1])).all() for run in first.runs[1:])


def test_a_run_stops_when_the_gain_is_small(val_slice):
    search = LineSearch(val_slice)
    run = ascend(search, MOSES_WEIGHTS, MertConfig(min_gain=1e9), np.random.default_rng(0))
    assert run.iterations == 1
    assert math.isclose(np.abs(run.weights).sum(), 1.0)


def test_feature_bounds_per_label():
    layout = FeatureLayout(("LM0", "TM0"), (1, 2))
    bounds = mert_bounds(layout, MertConfig(bounds=(0.0, 1.0), feature_bounds={"TM0": (-1.0, 0.5)}))
    assert bounds.tolist() == [[0.0, 1.0], [-1.0, 0.5], [-1.0, 0.5]]


def test_l1_normalised_leaves_zeros_alone():
    assert l1_normalised(np.zeros(3)).tolist() == [0, 0, 0]
    assert l1_normalised(np.array([1.0, -3.0])).tolist() == [0.25, -0.75]
