"""One optimiser call on fixed n-best lists, whichever the configuration names."""

from __future__ import annotations

import logging
import math

import numpy as np

from rerank.errors import ConfigError
from rerank.formats.nbest import FeatureLayout
from rerank.tune.config import MertConfig, TuneConfig
from rerank.tune.data import TuningData
from rerank.tune.mert import MertRun, l1_normalised, mert
from rerank.tune.mira import mira
from rerank.tune.pro import pro
from rerank.tune.stats import log_bleu

logger = logging.getLogger(__name__)


def optimize(data: TuningData, initial: np.ndarray, config: TuneConfig, rng: np.random.Generator) -> np.ndarray:
    """Weights (D,), L1-normalised, tuned on ``data`` by ``config.optimizer``, starting from ``initial`` (D,)."""
    start_bleu = corpus_bleu(data, initial)
    logger.debug("%s on %d sentences, %d distinct hypotheses; BLEU %.2f at the starting weights",
                 config.optimizer.upper(), data.num_sentences, int(data.counts.sum()), start_bleu)
    if config.optimizer == "mert":
        def report(run: int, result: MertRun) -> None:
            logger.debug("MERT run %d/%d: BLEU %.2f after %d iterations (%s start)", run + 1, config.mert.restarts,
                         result.bleu, result.iterations, "initial" if run == 0 else "random")
        bounds = mert_bounds(data.layout, config.mert)
        return mert(data, initial, config.mert, bounds, rng, report).weights
    if config.optimizer == "pro":
        trained = pro(data, config.pro, rng)
        logger.debug("PRO: %d pairs, logistic regression converged in %d Newton steps", trained.pairs,
                     trained.iterations)
        return trained.weights
    if config.optimizer == "mira":
        result = mira(data, initial, config.mira, rng,
                      lambda epoch, bleu: logger.debug("MIRA epoch %d/%d: BLEU %.2f", epoch, config.mira.epochs, bleu))
        logger.debug("MIRA: the weights of epoch %d win", result.epoch)
        return result.weights
    raise ConfigError(f"unknown optimizer {config.optimizer!r}")


def corpus_bleu(data: TuningData, weights: np.ndarray) -> float:
    """Corpus BLEU (0-100) of the hypotheses ``weights`` choose."""
    return 100.0 * math.exp(log_bleu(data.corpus_stats(l1_normalised(weights))))


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
