"""Minimum error rate training (Och 2003): coordinate ascent with exact line searches.

One run starts from a point and, in every iteration, searches the line through it along each
axis (and along ``random_directions`` random unit directions, Cer et al. 2008), then moves to
the best point found on any of them; it stops when an iteration gains less than ``min_gain``
BLEU points. As Moses' ``mert``, the first run starts from the initial weights and the others from
points drawn uniformly within per-feature bounds; the best run wins and its weights are
L1-normalised (or, with ``average: N``, the mean of the best N runs' L1-normalised weights: a point
inside the region of good weights rather than at the edge one run found). Everything random comes
from one seeded generator.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from rerank.errors import ConfigError
from rerank.formats.nbest import FeatureLayout
from rerank.tune.config import MertConfig
from rerank.tune.data import TuningData
from rerank.tune.envelope import LineOptimum, LineSearch
from rerank.tune.stats import log_bleu

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class MertRun:
    """One run of coordinate ascent: where it started and ended, its BLEU (0-100), its work."""

    start: np.ndarray
    weights: np.ndarray
    bleu: float
    iterations: int
    line_searches: int


@dataclass(frozen=True)
class MertResult:
    weights: np.ndarray  # (D,) of the best run, L1-normalised
    bleu: float          # its corpus BLEU on the tuning set (0-100)
    runs: tuple[MertRun, ...]


def l1_normalised(weights: np.ndarray) -> np.ndarray:
    """``weights / sum |weights|``, or the weights themselves when they are all 0."""
    total = np.abs(weights).sum()
    return weights / total if total > 0 else weights.copy()


def mert(data: TuningData, initial: np.ndarray, config: MertConfig, bounds: np.ndarray,
         rng: np.random.Generator, report: Callable[[int, MertRun], None] | None = None) -> MertResult:
    """Tune weights on ``data``: ``config.restarts`` runs, the best one wins.

    :param initial: the first run's starting weights: (D,).
    :param bounds: (D, 2) low and high of the random starting points of the other runs.
    :param report: called with each run as it finishes.
    """
    search = LineSearch(data)
    runs = []
    for run in range(config.restarts):
        start = initial if run == 0 else rng.uniform(bounds[:, 0], bounds[:, 1])
        result = ascend(search, start, config, rng)
        runs.append(result)
        if report is not None:
            report(run, result)
    best = max(runs, key=lambda r: r.bleu)  # the first of equals, as Moses
    if config.average == 1:
        return MertResult(l1_normalised(best.weights), best.bleu, tuple(runs))
    ranked = sorted(runs, key=lambda r: -r.bleu)[: config.average]  # stable: the first of equals first
    averaged = l1_normalised(np.mean([l1_normalised(r.weights) for r in ranked], axis=0))
    return MertResult(averaged, 100.0 * math.exp(float(log_bleu(data.corpus_stats(averaged)))), tuple(runs))


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
