"""MERT: runs are reproducible and reach Moses' on its regression test, and with restart_folds the run kept is that
of the starting point best on held-out folds."""

from __future__ import annotations

import logging
import math
from dataclasses import replace

import numpy as np
import pytest
import yaml
from helpers import MOSES_VAL_WEIGHTS, random_tuning_data

from rerank.config import load_config
from rerank.errors import ConfigError, RerankError
from rerank.formats.files import read_text
from rerank.formats.nbest import FeatureLayout
from rerank.tune.config import MertConfig, TuneConfig
from rerank.tune.data import NBestPool, TuningData
from rerank.tune.envelope import LineSearch
from rerank.tune.folds import fold_assignment, subset
from rerank.tune.mert import ascend, l1_normalised, mert, mert_bounds
from rerank.tune.optimize import corpus_bleu
from rerank.tune.stats import NUM_STATS, BleuStatistics, log_bleu


def test_all_constant_features_do_not_crash():
    data = random_tuning_data(4)
    constant = TuningData(data.layout, np.ones_like(data.features), data.stats, data.counts)
    result = mert(constant, np.zeros(3), MertConfig(restarts=3), np.tile([0.0, 1.0], (3, 1)), np.random.default_rng(0))
    assert np.isfinite(result.weights).all() and np.isfinite(result.bleu)
    folded = mert(constant, np.zeros(3), MertConfig(restarts=3, restart_folds=2), np.tile([0.0, 1.0], (3, 1)),
                  np.random.default_rng(0))
    assert folded.held_out is not None and len(set(folded.held_out.bleu)) == 1
    assert folded.held_out.chosen == 0  # every point as good: the first


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
    first = mert(val_slice, MOSES_VAL_WEIGHTS, config, bounds, np.random.default_rng(5))
    again = mert(val_slice, MOSES_VAL_WEIGHTS, config, bounds, np.random.default_rng(5))
    assert np.array_equal(first.weights, again.weights) and first.bleu == again.bleu
    assert first.bleu >= corpus_bleu(val_slice, MOSES_VAL_WEIGHTS)
    assert first.bleu == max(run.bleu for run in first.runs)
    assert np.array_equal(first.runs[0].start, MOSES_VAL_WEIGHTS)  # the first run starts from the given weights
    assert all(((bounds[:, 0] <= run.start) & (run.start <= bounds[:, 1])).all() for run in first.runs[1:])


def test_a_run_stops_when_the_gain_is_small(val_slice):
    search = LineSearch(val_slice)
    run = ascend(search, MOSES_VAL_WEIGHTS, MertConfig(min_gain=1e9), np.random.default_rng(0))
    assert run.iterations == 1
    assert math.isclose(np.abs(run.weights).sum(), 1.0)


def test_feature_bounds_per_label():
    layout = FeatureLayout(("LM0", "TM0"), (1, 2))
    bounds = mert_bounds(layout, MertConfig(bounds=(0.0, 1.0), feature_bounds={"TM0": (-1.0, 0.5)}))
    assert bounds.tolist() == [[0.0, 1.0], [-1.0, 0.5], [-1.0, 0.5]]


def test_l1_normalised_leaves_zeros_alone():
    assert l1_normalised(np.zeros(3)).tolist() == [0, 0, 0]
    assert l1_normalised(np.array([1.0, -3.0])).tolist() == [0.25, -0.75]


def held_out_by_hand(data: TuningData, starts: list[np.ndarray], config: MertConfig, seed: int) -> list[float]:
    """Each starting point's BLEU over the held-out folds' 1-bests, chosen by a run from it on the other folds."""
    folds = fold_assignment(data.num_sentences, config.restart_folds, seed)
    pooled = np.zeros((len(starts), NUM_STATS), dtype=np.int64)
    for fold in range(config.restart_folds):
        search = LineSearch(subset(data, folds != fold))
        for point, start in enumerate(starts):
            weights = ascend(search, start, config, np.random.default_rng(0)).weights
            pooled[point] += subset(data, folds == fold).corpus_stats(weights)
    return [100.0 * math.exp(float(log_bleu(stats))) for stats in pooled]


def test_restart_folds_keep_the_run_of_the_starting_point_best_on_held_out_folds(caplog):
    """On lists where the tuning set's best run is not the held-out best one: every point's held-out BLEU is that
    of its runs on the other folds, pooled; the weights are the run from the chosen point on all sentences."""
    data = random_tuning_data(2, sentences=12, size=8)
    config = MertConfig(restarts=5, restart_folds=3, bounds=(-1.0, 1.0))
    bounds = mert_bounds(data.layout, config)
    with caplog.at_level(logging.INFO, logger="rerank.tune.mert"):
        result = mert(data, np.zeros(3), config, bounds, np.random.default_rng(2))
    choice = result.held_out
    assert choice is not None and choice.folds == 3
    starts = [run.start for run in result.runs]
    assert choice.bleu == pytest.approx(held_out_by_hand(data, starts, config, choice.seed), abs=1e-12)
    assert choice.chosen == int(np.argmax(choice.bleu))
    by_tuning = int(np.argmax([run.bleu for run in result.runs]))
    assert choice.chosen != by_tuning and choice.bleu[choice.chosen] > choice.bleu[by_tuning]
    alone = ascend(LineSearch(data), starts[choice.chosen], config, np.random.default_rng(0))
    assert np.array_equal(result.weights, l1_normalised(alone.weights)) and result.bleu == alone.bleu
    assert (f"run {choice.chosen + 1} chosen by 3 held-out folds (held-out BLEU {choice.bleu[choice.chosen]:.2f}"
            in caplog.text and f"by the tuning set's BLEU, run {by_tuning + 1}" in caplog.text)
    # the same starting points and runs on all sentences as without folds, which keep the tuning set's best run
    plain = mert(data, np.zeros(3), replace(config, restart_folds=0), bounds, np.random.default_rng(2))
    assert plain.held_out is None and len(plain.runs) == len(result.runs)
    assert all(np.array_equal(a.start, b.start) and np.array_equal(a.weights, b.weights)
               for a, b in zip(plain.runs, result.runs, strict=True))
    assert np.array_equal(plain.weights, l1_normalised(result.runs[by_tuning].weights))


def test_restart_folds_with_average_take_the_best_held_out_points():
    data = random_tuning_data(2, sentences=12, size=8)
    config = MertConfig(restarts=5, restart_folds=3, bounds=(-1.0, 1.0), average=2)
    result = mert(data, np.zeros(3), config, mert_bounds(data.layout, config), np.random.default_rng(2))
    assert result.held_out is not None
    best_two = np.argsort([-bleu for bleu in result.held_out.bleu], kind="stable")[:2]
    expected = l1_normalised(np.mean([l1_normalised(result.runs[r].weights) for r in best_two], axis=0))
    assert np.array_equal(result.weights, expected)


def test_restart_folds_follow_the_seed(val_slice):
    config = MertConfig(restarts=3, restart_folds=3, random_directions=1)
    bounds = mert_bounds(val_slice.layout, config)
    first, again, other = (mert(val_slice, MOSES_VAL_WEIGHTS, config, bounds, np.random.default_rng(seed))
                           for seed in (5, 5, 6))
    assert np.array_equal(first.weights, again.weights) and first.held_out == again.held_out
    assert first.held_out is not None and other.held_out is not None and first.held_out.seed != other.held_out.seed


def test_too_many_restart_folds_are_refused_before_any_run():
    data = random_tuning_data(1, sentences=6)
    runs: list[int] = []
    with pytest.raises(RerankError, match=r"^mert.restart_folds needs 2 to 6 folds \(one sentence each at least\), "
                                          r"got 7"):
        mert(data, np.zeros(3), MertConfig(restarts=2, restart_folds=7), np.tile([0.0, 1.0], (3, 1)),
             np.random.default_rng(0), lambda run, result: runs.append(run))
    assert not runs


@pytest.mark.parametrize("folds", [1, -2])
def test_restart_folds_are_0_or_at_least_2(tmp_path, folds):
    with pytest.raises(ValueError, match=rf"restart_folds: expected 0 \(the tuning set's best run\) or at least 2, "
                                         rf"got {folds}"):
        MertConfig(restart_folds=folds)
    path = tmp_path / "tune.yaml"
    path.write_text(yaml.safe_dump({"mert": {"restart_folds": folds}}))
    with pytest.raises(ConfigError, match=rf"tune.yaml: mert.restart_folds: expected 0 .* or at least 2, got {folds}"):
        load_config(TuneConfig, path)
