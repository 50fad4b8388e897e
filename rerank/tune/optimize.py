"""One optimiser call on fixed n-best lists, whichever the configuration names."""

from __future__ import annotations

import logging
import math
from dataclasses import replace

import numpy as np

from rerank.tune.config import TuneConfig
from rerank.tune.data import TuningData
from rerank.tune.derived import HELD, hold
from rerank.tune.mert import l1_normalised
from rerank.tune.registry import OPTIMIZERS
from rerank.tune.stats import log_bleu

logger = logging.getLogger(__name__)


def optimize(data: TuningData, initial: np.ndarray, config: TuneConfig, rng: np.random.Generator) -> np.ndarray:
    """Weights (D,), L1-normalised, tuned on ``data`` by ``config.optimizer``, starting from ``initial`` (D,); with
    ``config.activate``, only those features move and the others keep their ratios to each other
    (:func:`~rerank.tune.derived.hold`)."""
    logger.debug("%s on %d sentences, %d distinct hypotheses; BLEU %.2f at the starting weights",
                 config.optimizer.upper(), data.num_sentences, int(data.counts.sum()), corpus_bleu(data, initial))
    optimizer = OPTIMIZERS[config.optimizer]
    if not config.activate:
        return optimizer.tune(data, initial, config, rng)
    held, start = hold(data, initial, config.activate)
    # MERT's random starting points move the tuned features alone: the held ones' scale starts at 1
    kept = held.data.layout.labels
    bounds = {**{label: pair for label, pair in config.mert.feature_bounds.items() if label in kept}, HELD: (1.0, 1.0)}
    tuned = optimizer.tune(held.data, start, replace(config, mert=replace(config.mert, feature_bounds=bounds)), rng)
    if tuned[-1] <= 0:
        logger.warning("activate: the held features' scale was tuned to %.3g, not above 0: they no longer rank as "
                       "their starting weights do", tuned[-1])
    return l1_normalised(held.weights(tuned))


def corpus_bleu(data: TuningData, weights: np.ndarray) -> float:
    """Corpus BLEU (0-100) of the hypotheses ``weights`` choose."""
    return 100.0 * math.exp(log_bleu(data.corpus_stats(l1_normalised(weights))))
