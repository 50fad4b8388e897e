"""Batch k-best MIRA (Cherry & Foster 2012, Alg. 1) as Moses' ``kbmira``.

Each epoch visits the sentences in a random order (or in order: ``shuffle: false``, kbmira's
``--no-shuffle``). For a sentence, BLEU is measured against a background corpus of decayed
statistics (every statistic 1 at the start), scaled by its reference length (Chiang et al. 2008):
the hope hypothesis maximises model score + BLEU, the fear hypothesis model score - BLEU, the
first on a tie. Where they differ and the hope has the higher BLEU: if the model does not prefer
the hope by at least their BLEU difference, the weights move towards the hope by the smallest
step that would fix it, capped at C; the background decays and takes in the hope's statistics.
After each epoch the averaged weights are scored on the tuning set; the best epoch's weights win,
L1-normalised. The average is kbmira's: the starting weights plus the weights after each update,
divided by the number of updates.

With ``standardize`` (the default) MIRA runs on the features divided by their standard deviations
over the tuning set's hypotheses, starting from the same scores (each starting weight times its
feature's deviation), so that its capped steps move every feature's weight on one scale; the
weights are mapped back to the raw features (see :mod:`rerank.tune.standardize`).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, replace

import numpy as np

from rerank.tune.config import MiraConfig
from rerank.tune.data import TuningData
from rerank.tune.mert import l1_normalised
from rerank.tune.standardize import feature_scales, standardised
from rerank.tune.stats import CORRECT, HYP_LEN, MAX_ORDER, NUM_STATS, REF_LEN, TOTAL, log_bleu


@dataclass(frozen=True)
class MiraResult:
    weights: np.ndarray  # (D,) averaged weights of the best epoch, L1-normalised
    bleu: float          # their corpus BLEU on the tuning set (0-100)
    epoch: int           # the best epoch (1-based)
    updates: int


def initial_background() -> np.ndarray:
    """kbmira's starting background: every statistic 1."""
    return np.ones(NUM_STATS)


# ln of BLEU times the reference length, from ln of the statistics: the mean of ln(matches / n-grams) over the
# orders, plus ln(reference length); the brevity penalty is added apart
_LOG_BLEU_TIMES_LENGTH = np.zeros(NUM_STATS)
_LOG_BLEU_TIMES_LENGTH[CORRECT] = 1.0 / MAX_ORDER
_LOG_BLEU_TIMES_LENGTH[TOTAL] = -1.0 / MAX_ORDER
_LOG_BLEU_TIMES_LENGTH[REF_LEN] = 1.0


def background_bleu(stats: np.ndarray, background: np.ndarray) -> np.ndarray:
    """BLEU of each row of ``stats`` (n, NUM_STATS) added to the background, times the reference length: (n,).

    Written for speed (MIRA calls it once per sentence and epoch): one logarithm of the whole array and one
    product give ln(BLEU × reference length) before the brevity penalty."""
    total = stats + background
    ratio = total[:, REF_LEN] / total[:, HYP_LEN]
    return np.exp(np.log(total) @ _LOG_BLEU_TIMES_LENGTH + np.minimum(0.0, 1.0 - ratio))


def mira(data: TuningData, initial: np.ndarray, config: MiraConfig, rng: np.random.Generator,
         report: Callable[[int, float], None] | None = None) -> MiraResult:
    """Tune weights on ``data`` starting from ``initial`` (D,); ``report(epoch, bleu)`` after each epoch."""
    if not config.standardize:
        return _mira(data, np.asarray(initial, dtype=np.float64), config, rng, report)
    scales = feature_scales(data)
    result = _mira(standardised(data, scales), np.asarray(initial, dtype=np.float64) * scales, config, rng, report)
    return replace(result, weights=l1_normalised(result.weights / scales))


def _mira(data: TuningData, initial: np.ndarray, config: MiraConfig, rng: np.random.Generator,
          report: Callable[[int, float], None] | None) -> MiraResult:
    """The algorithm on ``data`` as given."""
    features = [data.features[s, :n] for s, n in enumerate(data.counts)]                     # (n_s, D) each
    stats = [data.stats[s, :n].astype(np.float64) for s, n in enumerate(data.counts)]       # (n_s, NS) each
    weights = np.asarray(initial, dtype=np.float64).copy()
    total, updates = weights.copy(), 0   # kbmira's running sum starts with the starting weights
    background = initial_background()
    best = MiraResult(l1_normalised(weights), -math.inf, 0, 0)
    order = np.arange(data.num_sentences)
    c, decay = config.c, config.decay
    for epoch in range(1, config.epochs + 1):
        for s in rng.permutation(order) if config.shuffle else order:
            sentence_features, sentence_stats = features[s], stats[s]
            score = sentence_features @ weights
            bleu = background_bleu(sentence_stats, background)
            hope = (score + bleu).argmax()
            fear = (score - bleu).argmax()
            gap = bleu[hope].item() - bleu[fear].item()
            if hope == fear or gap <= 0:
                continue
            difference = sentence_features[hope] - sentence_features[fear]
            loss = gap - (difference @ weights).item()
            if loss > 0:
                norm = (difference @ difference).item()
                weights = weights + (min(c, loss / norm) if norm > 0 else c) * difference
                total += weights
                updates += 1
            background *= decay
            background += sentence_stats[hope]
        average = total / updates if updates else weights
        average_bleu = 100.0 * math.exp(float(log_bleu(data.corpus_stats(average))))
        if report is not None:
            report(epoch, average_bleu)
        if average_bleu > best.bleu:
            best = MiraResult(l1_normalised(average), average_bleu, epoch, updates)
    return best
