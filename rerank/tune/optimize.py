"""One optimiser call on fixed n-best lists, whichever the configuration names."""

from __future__ import annotations

import logging
import math

import numpy as np

from rerank.tune.config import TuneConfig
from rerank.tune.data import TuningData
from rerank.tune.mert import l1_normalised
from rerank.tune.registry import OPTIMIZERS
from rerank.tune.stats import log_bleu

logger = logging.getLogger(__name__)


def optimize(data: TuningData, initial: np.ndarray, config: TuneConfig, rng: np.random.Generator) -> np.ndarray:
    """Weights (D,), L1-normalised, tuned on ``data`` by ``config.optimizer``, starting from ``initial`` (D,)."""
    logger.debug("%s on %d sentences, %d distinct hypotheses; BLEU %.2f at the starting weights",
                 config.optimizer.upper(), data.num_sentences, int(data.counts.sum()), corpus_bleu(data, initial))
    return OPTIMIZERS[config.optimizer].tune(data, initial, config, rng)


def corpus_bleu(data: TuningData, weights: np.ndarray) -> float:
    """Corpus BLEU (0-100) of the hypotheses ``weights`` choose."""
    return 100.0 * math.exp(log_bleu(data.corpus_stats(l1_normalised(weights))))
