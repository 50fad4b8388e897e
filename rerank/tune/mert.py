"""Minimum error rate training (Och 2003): coordinate ascent with exact line searches.

One run starts from a point and, in every iteration, searches the line through it along each
axis (and along ``random_directions`` random unit directions, Cer et al. 2008), then moves to
the best point found on any of them; it stops when an iteration gains less than ``min_gain``
BLEU points. As Moses' ``mert``, the first run starts from the initial weights and the others from
points drawn uniformly within per-feature bounds; the best run wins and its weights are
L1-normalised (or, with ``average: N``, the mean of the best N runs' L1-normalised weights: a point
inside the region of good weights rather than at the edge one run found). Everything random comes
from one seeded generator.

The tuning set's BLEU picks the run that fits its own sentences best, not the one that carries over
best. With ``restart_folds: K`` the runs from the same starting points are ranked by held-out folds
instead (:func:`held_out_choice`): for each of K folds of the sentences, a run from every point on
the other K-1 folds chooses the held-out fold's 1-bests; the point whose 1-bests, pooled over the
folds, have the highest BLEU wins, and its run on all sentences gives the weights. That is K+1 times
the runs.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from rerank.errors import ConfigError
from rerank.formats.nbest import FeatureLayout
from rerank.tune.config import MertConfig
from rerank.tune.data import TuningData
from rerank.tune.envelope import LineOptimum, LineSearch
from rerank.tune.folds import fold_assignment, subset
from rerank.tune.stats import NUM_STATS, log_bleu

logger = logging.getLogger(__name__)

FOLDS_USE = "mert.restart_folds"  # named in the error when there cannot be that many folds


@dataclass(frozen=True)
class MertRun:
    """One run of coordinate ascent: where it started and ended, its BLEU (0-100), its work."""

    start: np.ndarray
    weights: np.ndarray
    bleu: float
    iterations: int
    line_searches: int


@dataclass(frozen=True)
class HeldOutChoice:
    """The starting point chosen by held-out folds (``restart_folds``), and every point's held-out BLEU (0-100)."""

    folds: int
    seed: int                 # of the assignment of sentences to folds, drawn after the starting points
    bleu: tuple[float, ...]   # of each starting point (as the runs): its K runs' held-out 1-bests, pooled
    chosen: int               # the run of the highest (the first of equals)


@dataclass(frozen=True)
class MertResult:
    weights: np.ndarray  # (D,) of the best run, L1-normalised
    bleu: float          # its corpus BLEU on the tuning set (0-100)
    runs: tuple[MertRun, ...]
    held_out: HeldOutChoice | None = None  # with restart_folds: how the best run was chosen


def l1_normalised(weights: np.ndarray) -> np.ndarray:
    """``weights / sum |weights|``, or the weights themselves when they are all 0."""
    total = np.abs(weights).sum()
    return weights / total if total > 0 else weights.copy()


def mert(data: TuningData, initial: np.ndarray, config: MertConfig, bounds: np.ndarray,
         rng: np.random.Generator, report: Callable[[int, MertRun], None] | None = None) -> MertResult:
    """Tune weights on ``data``: ``config.restarts`` runs, the best one wins (by the tuning set's BLEU, or with
    ``config.restart_folds`` by held-out folds, :func:`held_out_choice`).

    :param initial: the first run's starting weights: (D,).
    :param bounds: (D, 2) low and high of the random starting points of the other runs.
    :param report: called with each run on all sentences as it finishes.
    """
    check_restart_folds(data.num_sentences, config)
    search = LineSearch(data)
    runs = []
    for run in range(config.restarts):
        start = initial if run == 0 else rng.uniform(bounds[:, 0], bounds[:, 1])
        result = ascend(search, start, config, rng)
        runs.append(result)
        if report is not None:
            report(run, result)
    held_out = held_out_choice(data, [run.start for run in runs], config, rng) if config.restart_folds else None
    scores = held_out.bleu if held_out else [run.bleu for run in runs]
    ranked = sorted(range(len(runs)), key=lambda r: -scores[r])  # stable: the first of equals first, as Moses
    if held_out:
        tuning_best = max(range(len(runs)), key=lambda r: runs[r].bleu)
        logger.info("MERT: run %d chosen by %d held-out folds (held-out BLEU %.2f, tuning set %.2f); by the tuning "
                    "set's BLEU, run %d (held-out %.2f, tuning set %.2f)", held_out.chosen + 1, held_out.folds,
                    held_out.bleu[held_out.chosen], runs[held_out.chosen].bleu, tuning_best + 1,
                    held_out.bleu[tuning_best], runs[tuning_best].bleu)
    if config.average == 1:
        best = runs[ranked[0]]
        return MertResult(l1_normalised(best.weights), best.bleu, tuple(runs), held_out)
    averaged = l1_normalised(np.mean([l1_normalised(runs[r].weights) for r in ranked[: config.average]], axis=0))
    return MertResult(averaged, 100.0 * math.exp(float(log_bleu(data.corpus_stats(averaged)))), tuple(runs),
                      held_out)


def check_restart_folds(num_sentences: int, config: MertConfig, of: str = "") -> None:
    """A RerankError, before any run, where ``num_sentences`` (``of``: which ones, for the message) cannot be dealt
    into ``config.restart_folds`` folds."""
    if config.restart_folds:
        fold_assignment(num_sentences, config.restart_folds, 0, FOLDS_USE + (f" ({of})" if of else ""))


def held_out_choice(data: TuningData, starts: Sequence[np.ndarray], config: MertConfig, rng: np.random.Generator
                    ) -> HeldOutChoice:
    """The starting point whose runs carry over best: the sentences dealt into ``config.restart_folds`` folds (by a
    seed drawn from ``rng``), for each fold a run from every point on the other folds, each run's 1-bests of the
    held-out fold pooled over the folds into one corpus BLEU per point."""
    folds = config.restart_folds
    seed = int(rng.integers(2**31))
    assignment = fold_assignment(data.num_sentences, folds, seed, FOLDS_USE)
    pooled = np.zeros((len(starts), NUM_STATS), dtype=np.int64)
    for fold in range(folds):
        search = LineSearch(subset(data, assignment != fold))
        held = subset(data, assignment == fold)
        for point, start in enumerate(starts):
            pooled[point] += held.corpus_stats(ascend(search, start, config, rng).weights)
        logger.debug("MERT fold %d/%d: a run from each of %d starting points on the other %d sentences", fold + 1,
                     folds, len(starts), data.num_sentences - held.num_sentences)
    bleu = tuple(100.0 * math.exp(float(log_bleu(stats))) for stats in pooled)
    return HeldOutChoice(folds, seed, bleu, max(range(len(bleu)), key=lambda point: bleu[point]))


def ascend(search: LineSearch, start: np.ndarray, config: MertConfig, rng: np.random.Generator) -> MertRun:
    """One run of coordinate ascent from ``start``."""
    dims = len(start)
    weights = l1_normalised(np.asarray(start, dtype=np.float64))
    scores = search.hypothesis_scores(weights)
    current = float(log_bleu(search.best_stats(scores)))
    searches = iterations = 0
    while iterations < config.max_iterations:
        iterations += 1
        best: LineOptimum | None = None
        best_direction = np.zeros(dims)
        for k, optimum in enumerate(search.axes(scores, current)):
            if best is None or optimum.log_bleu > best.log_bleu:
                best, best_direction = optimum, np.eye(dims)[k]
        if config.random_directions:
            directions = rng.standard_normal((config.random_directions, dims))
            directions /= np.linalg.norm(directions, axis=1, keepdims=True)
            for direction, optimum in zip(directions, search.directions(scores, directions, current), strict=True):
                if best is None or optimum.log_bleu > best.log_bleu:
                    best, best_direction = optimum, direction
        searches += dims + config.random_directions
        if best is None or best.gamma == 0.0 or best.log_bleu <= current:
            break
        moved = l1_normalised(weights + best.gamma * best_direction)
        moved_scores = search.hypothesis_scores(moved)
        reached = float(log_bleu(search.best_stats(moved_scores)))
        if not math.isclose(reached, best.log_bleu, rel_tol=0, abs_tol=1e-9):
            logger.debug("line search promised ln BLEU %.9f, the point has %.9f", best.log_bleu, reached)
        if reached <= current:  # only rounding at a breakpoint can do this
            break
        gain = 100.0 * (math.exp(reached) - math.exp(current))
        weights, scores, current = moved, moved_scores, reached
        if gain < config.min_gain:
            break
    return MertRun(np.asarray(start, dtype=np.float64), weights, 100.0 * math.exp(current), iterations, searches)


def mert_bounds(layout: FeatureLayout, config: MertConfig) -> np.ndarray:
    """(D, 2) low and high of the random starting points: ``config.bounds``, or a label's own."""
    unknown = sorted(set(config.feature_bounds) - set(layout.labels))
    if unknown:
        raise ConfigError(f"mert.feature_bounds: features the n-best list does not have: {', '.join(unknown)} "
                          f"(it has {', '.join(layout.labels)})")
    bounds = np.tile(np.asarray(config.bounds, dtype=np.float64), (layout.dims, 1))
    for label, span in layout.offsets().items():
        if label in config.feature_bounds:
            bounds[span] = config.feature_bounds[label]
    return bounds
