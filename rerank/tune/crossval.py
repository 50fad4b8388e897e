"""k-fold cross-validation of tuning on fixed n-best lists: from the tuning set alone, an estimate of the BLEU that
tuned weights carry over to sentences they were not tuned on.

The sentences are dealt at random (seeded) into k folds of near-equal size. For each fold the weights are tuned on
the other k-1 folds and choose the held-out fold's hypotheses, so that every sentence's 1-best is chosen by weights
not tuned on it. The cross-validated BLEU is one corpus BLEU over all those held-out 1-bests (the folds' statistics
pooled, so it compares with the tuning set's BLEU directly); each fold's own BLEU gives the spread.

A tuner is any function ``(data, initial) -> weights``: one optimiser run (:func:`tuner`), the mean of several seeds'
weights (:func:`seed_averaged`); :func:`choose` keeps the candidate of the highest cross-validated BLEU.
"""

from __future__ import annotations

import itertools
import logging
import math
import statistics
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from typing import Any

import numpy as np

from rerank.tune.config import TuneConfig, with_choice
from rerank.tune.data import TuningData
from rerank.tune.folds import fold_assignment, subset
from rerank.tune.mert import l1_normalised
from rerank.tune.optimize import optimize
from rerank.tune.stats import NUM_STATS, log_bleu

logger = logging.getLogger(__name__)

Tuner = Callable[[TuningData, np.ndarray], np.ndarray]  # (data, initial weights) -> tuned weights (D,)


@dataclass(frozen=True)
class CrossValidated:
    """The held-out figures of one cross-validation (BLEU 0-100)."""

    folds: int
    seed: int            # of the assignment of sentences to folds
    bleu: float          # corpus BLEU of every sentence's held-out 1-best: the estimate
    fold_bleu: tuple[float, ...]   # each fold's BLEU on its own held-out sentences
    fold_sizes: tuple[int, ...]
    fitted_bleu: tuple[float, ...]  # each fold's BLEU on the k-1 folds it was tuned on

    @property
    def fold_mean(self) -> float:
        return statistics.mean(self.fold_bleu)

    @property
    def fold_sd(self) -> float:
        return statistics.stdev(self.fold_bleu) if len(self.fold_bleu) > 1 else 0.0

    def summary(self) -> dict[str, Any]:
        """The figures as JSON-ready values, with the folds' mean and standard deviation."""
        return {**asdict(self), "fold_mean": self.fold_mean, "fold_sd": self.fold_sd}

    def describe(self) -> str:
        return (f"{self.folds}-fold cross-validated BLEU {self.bleu:.2f} (held-out folds: {self.fold_mean:.2f} ± "
                f"{self.fold_sd:.2f}; tuned folds: {statistics.mean(self.fitted_bleu):.2f})")


def bleu_of(stats: np.ndarray) -> float:
    """Corpus BLEU (0-100) of summed statistics."""
    return 100.0 * math.exp(float(log_bleu(stats)))


def chosen_stats(data: TuningData, weights: np.ndarray) -> np.ndarray:
    """The statistics of the hypothesis ``weights`` choose for each sentence: (S, NUM_STATS)."""
    return data.stats[np.arange(data.num_sentences), data.best(weights)]


def cross_validate(data: TuningData, initial: np.ndarray, tune: Tuner, folds: int, seed: int = 1
                   ) -> CrossValidated:
    """Tune on k-1 folds and choose the held-out fold's 1-bests, for each fold (see the module docstring)."""
    assignment = fold_assignment(data.num_sentences, folds, seed)
    held_out = np.zeros((data.num_sentences, NUM_STATS), dtype=np.int64)
    fold_bleu, fitted = [], []
    for fold in range(folds):
        tuned_on = subset(data, assignment != fold)
        weights = tune(tuned_on, initial)
        chosen = chosen_stats(subset(data, assignment == fold), weights)
        held_out[assignment == fold] = chosen
        fold_bleu.append(bleu_of(chosen.sum(axis=0)))
        fitted.append(bleu_of(chosen_stats(tuned_on, weights).sum(axis=0)))
        logger.debug("fold %d/%d: BLEU %.2f held out, %.2f tuned on", fold + 1, folds, fold_bleu[-1], fitted[-1])
    sizes = tuple(int(n) for n in np.bincount(assignment, minlength=folds))
    return CrossValidated(folds, seed, bleu_of(held_out.sum(axis=0)), tuple(fold_bleu), sizes, tuple(fitted))


def tuner(config: TuneConfig) -> Tuner:
    """``config``'s optimiser with its seed, or the mean of ``average_seeds`` runs (:func:`seed_averaged`)."""
    if config.average_seeds > 1:
        return seed_averaged(replace(config, average_seeds=1), range(config.seed, config.seed + config.average_seeds))
    return lambda data, initial: optimize(data, initial, config, np.random.default_rng(config.seed))


def candidates(config: TuneConfig) -> dict[str, TuneConfig]:
    """Every combination of the values of ``cv.choose``, by a name such as ``pro.l2=0.1`` (each value checked
    with the config: :func:`~rerank.tune.config.with_choice`)."""
    keys = list(config.cv.choose)
    result = {}
    for values in itertools.product(*(config.cv.choose[key] for key in keys)):
        candidate = config
        for key, value in zip(keys, values, strict=True):
            candidate = with_choice(candidate, key, value)
        result[" ".join(f"{key}={value:g}" for key, value in zip(keys, values, strict=True))] = candidate
    return result


def seed_averaged(config: TuneConfig, seeds: Sequence[int]) -> Tuner:
    """The mean of the L1-normalised weights of one run per seed (the mean of several runs' weights lies inside
    the region of good weights, where one run's may sit at an edge that fits the tuning set alone)."""
    runs = [tuner(replace(config, seed=seed)) for seed in seeds]
    return lambda data, initial: l1_normalised(np.mean([l1_normalised(run(data, initial)) for run in runs], axis=0))


@dataclass(frozen=True)
class Choice:
    """The setting that cross-validation chose, and the cross-validated BLEU of every candidate."""

    chosen: str
    scores: dict[str, CrossValidated]


def choose(data: TuningData, initial: np.ndarray, candidates: Mapping[str, Tuner], folds: int, seed: int = 1
           ) -> Choice:
    """The candidate with the highest cross-validated BLEU (the first of equals), each on the same folds."""
    scores = {name: cross_validate(data, initial, tune, folds, seed) for name, tune in candidates.items()}
    for name, score in scores.items():
        logger.info("%s: %s", name, score.describe())
    best = max(scores, key=lambda name: scores[name].bleu)
    return Choice(best, scores)
