"""Cross-validation of tuning: folds by sentence, held-out 1-bests chosen by weights tuned without them, pooled BLEU;
choices by cross-validation; weights averaged over seeds and MERT runs."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import yaml

from rerank.config import InvalidValue, load_config
from rerank.errors import ConfigError
from rerank.tune.config import CrossValidationConfig, MertConfig, TuneConfig
from rerank.tune.crossval import (
    bleu_of,
    candidates,
    choose,
    chosen_stats,
    cross_validate,
    seed_averaged,
    tuner,
)
from rerank.tune.data import TuningData
from rerank.tune.folds import fold_assignment, subset
from rerank.tune.mert import l1_normalised, mert, mert_bounds
from rerank.tune.optimize import corpus_bleu

FAST = TuneConfig(mert=MertConfig(restarts=2))


def test_held_out_sentences_are_chosen_by_weights_not_tuned_on_them(val_slice):
    """Each fold's 1-bests are those of the weights tuned on the other folds; the estimate pools them."""
    seen: list[set[int]] = []

    def recording(data: TuningData, initial: np.ndarray) -> np.ndarray:
        seen.append({int(n) for n in data.counts})  # a fingerprint of the sentences given
        return tuner(FAST)(data, initial)

    result = cross_validate(val_slice, np.zeros(val_slice.dims), recording, folds=4, seed=1)
    assert result.folds == 4 and sum(result.fold_sizes) == 20 and len(seen) == 4
    folds = fold_assignment(20, 4, seed=1)
    held_out = np.zeros((20, val_slice.stats.shape[2]), dtype=np.int64)
    for fold in range(4):
        weights = tuner(FAST)(subset(val_slice, folds != fold), np.zeros(val_slice.dims))
        held_out[folds == fold] = chosen_stats(subset(val_slice, folds == fold), weights)
        assert result.fold_bleu[fold] == pytest.approx(bleu_of(held_out[folds == fold].sum(axis=0)))
    assert result.bleu == pytest.approx(bleu_of(held_out.sum(axis=0)))
    # tuned on 15 sentences of 100 hypotheses each, the weights fit their own folds better than the held-out one
    assert np.mean(result.fitted_bleu) > result.bleu
    assert result.summary()["fold_sd"] == pytest.approx(np.std(result.fold_bleu, ddof=1))


def test_the_same_seeds_give_the_same_figures(val_slice):
    first, second = (cross_validate(val_slice, np.zeros(val_slice.dims), tuner(FAST), 3, seed=2) for _ in range(2))
    assert first == second


def test_choose_keeps_the_candidate_of_the_highest_held_out_bleu(val_slice):
    settings = {"two": tuner(FAST), "first hypothesis": lambda data, initial: np.zeros(data.dims)}
    choice = choose(val_slice, np.zeros(val_slice.dims), settings, folds=3, seed=1)
    assert set(choice.scores) == set(settings)
    assert choice.chosen == max(choice.scores, key=lambda name: choice.scores[name].bleu)


def test_candidates_are_every_combination_with_the_settings_types():
    config = dataclasses.replace(FAST, cv=CrossValidationConfig(folds=3, choose={"pro.l2": (0.1, 10.0),
                                                                                  "mert.average": (1, 3)}))
    found = candidates(config)
    assert list(found) == ["pro.l2=0.1 mert.average=1", "pro.l2=0.1 mert.average=3", "pro.l2=10 mert.average=1",
                           "pro.l2=10 mert.average=3"]
    assert found["pro.l2=10 mert.average=3"].pro.l2 == 10.0
    assert found["pro.l2=10 mert.average=3"].mert.average == 3
    assert isinstance(found["pro.l2=10 mert.average=3"].mert.average, int)
    with pytest.raises(InvalidValue, match="cv.choose.mert.restarts: expected whole numbers"):
        dataclasses.replace(config, cv=CrossValidationConfig(folds=3, choose={"mert.restarts": (1.5,)}))
    with pytest.raises(InvalidValue, match="cv.choose.pro.nothing: expected a setting of the tuning config"):
        dataclasses.replace(config, cv=CrossValidationConfig(folds=3, choose={"pro.nothing": (1,)}))


def test_seed_averaged_weights_are_the_mean_of_each_seeds_weights(val_slice):
    start = np.zeros(val_slice.dims)
    runs = [l1_normalised(tuner(dataclasses.replace(FAST, seed=seed))(val_slice, start)) for seed in (4, 5)]
    averaged = seed_averaged(FAST, [4, 5])(val_slice, start)
    assert np.allclose(averaged, l1_normalised(np.mean(runs, axis=0)))
    assert np.allclose(tuner(dataclasses.replace(FAST, seed=4, average_seeds=2))(val_slice, start), averaged)


def test_mert_average_is_the_mean_of_the_best_runs(val_slice):
    start = np.zeros(val_slice.dims)
    bounds = mert_bounds(val_slice.layout, MertConfig())
    single = mert(val_slice, start, MertConfig(restarts=4), bounds, np.random.default_rng(1))
    averaged = mert(val_slice, start, MertConfig(restarts=4, average=2), bounds, np.random.default_rng(1))
    best = sorted(single.runs, key=lambda r: -r.bleu)[:2]
    assert np.allclose(averaged.weights, l1_normalised(np.mean([l1_normalised(r.weights) for r in best], axis=0)))
    assert averaged.bleu == pytest.approx(corpus_bleu(val_slice, averaged.weights))


@pytest.mark.parametrize("settings, message", [
    ({"folds": 1}, "folds: expected 0 \\(none\\) or at least 2"),
    ({"choose": {"pro.l2": [1.0]}}, "choose: expected folds of at least 2"),
])
def test_bad_cross_validation_settings_name_the_key(tmp_path, settings, message):
    path = tmp_path / "tune.yaml"
    path.write_text(yaml.safe_dump({"cv": settings}))
    with pytest.raises(ConfigError, match=message):
        load_config(TuneConfig, path)
