"""Pairwise ranking optimisation (Hopkins & May 2011, Sec. 4) as Moses' ``pro`` and MegaM.

For each sentence, ``samples`` pairs of hypotheses are drawn uniformly (Γ = 5000); of the pairs
whose smoothed sentence BLEU differs by at least ``min_diff`` (α = 0.05), the ``keep`` with the
largest difference are kept (Ξ = 50), ties with the last of them (common: sentence BLEU takes few
values) resolved as Moses' ``pro`` does, in the order drawn. Each kept pair gives two training examples, the feature
difference labelled by which hypothesis is better, and its negation with the other label. A
logistic regression without bias on them (a Gaussian prior of precision ``l2``; Newton's
method) gives the weights, L1-normalised.

With ``standardize`` (the default) each feature is divided by its standard deviation over the
tuning set's hypotheses before the regression, so that the prior treats every feature alike, and
the weights are mapped back to the raw features (see :mod:`rerank.tune.standardize`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from rerank.tune.config import ProConfig
from rerank.tune.data import TuningData
from rerank.tune.mert import l1_normalised
from rerank.tune.standardize import feature_scales
from rerank.tune.stats import sentence_bleu_plus_one

CHUNK = 64  # sentences sampled at once: (CHUNK, samples) arrays
TIE = 1e-5  # pairs this close below the keep-th largest difference count as tied with it (Moses' pro)


@dataclass(frozen=True)
class ProResult:
    weights: np.ndarray  # (D,) L1-normalised
    pairs: int           # training pairs kept (each used with both signs)
    iterations: int      # Newton steps


def pro(data: TuningData, config: ProConfig, rng: np.random.Generator) -> ProResult:
    differences, better = sample_pairs(data, config, rng)
    scales = feature_scales(data) if config.standardize else None     # (D,)
    if scales is not None:
        differences = differences / scales
    features = np.vstack([differences, -differences])                # (2P, D)
    labels = np.concatenate([better, ~better]).astype(np.float64)   # (2P,)
    weights, iterations = logistic_regression(features, labels, config.l2, config.max_iterations)
    if scales is not None:
        weights = weights / scales  # w'·(x/s) = (w'/s)·x: the same scores for the raw features
    return ProResult(l1_normalised(weights), len(differences), iterations)


def sample_pairs(data: TuningData, config: ProConfig, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Feature differences of the kept pairs (P, D), and whether the first of each pair is better (P,)."""
    bleu = sentence_bleu_plus_one(data.stats)                        # (S, K)
    differences, better = [], []
    for begin in range(0, data.num_sentences, CHUNK):
        sentences = np.arange(begin, min(begin + CHUNK, data.num_sentences))
        counts = data.counts[sentences, None]                        # (c, 1)
        first = (rng.random((len(sentences), config.samples)) * counts).astype(np.int64)   # (c, Γ)
        second = (rng.random((len(sentences), config.samples)) * counts).astype(np.int64)
        rows = sentences[:, None]
        gain = bleu[rows, first] - bleu[rows, second]                # (c, Γ)
        size = np.where(np.abs(gain) >= config.min_diff, np.abs(gain), -1.0)
        keep = min(config.keep, config.samples)
        # as Moses' pro: the first Ξ pairs, in the order drawn, of those at most 1e-5 below the Ξ-th largest
        # difference (pairs tied with it come in the order drawn, before later, larger ones)
        threshold = -np.partition(-size, keep - 1, axis=1)[:, keep - 1:keep] - TIE   # (c, 1)
        eligible = (size >= 0) & (size >= threshold)
        chosen = eligible & (np.cumsum(eligible, axis=1) <= keep)    # (c, Γ)
        row, column = np.nonzero(chosen)
        s, i, j = sentences[row], first[row, column], second[row, column]
        differences.append(data.features[s, i] - data.features[s, j])
        better.append(gain[row, column] > 0)
    return np.concatenate(differences), np.concatenate(better)


def logistic_regression(features: np.ndarray, labels: np.ndarray, l2: float, max_iterations: int,
                        tolerance: float = 1e-10) -> tuple[np.ndarray, int]:
    """Weights maximising ``sum log p(label | x) - l2/2 |w|^2`` with ``p(1|x) = σ(w·x)``, by Newton's method.

    :param features: (N, D); ``labels``: (N,) of 0 and 1.
    :return: the weights (D,) and the number of Newton steps.
    """
    dims = features.shape[1]
    weights = np.zeros(dims)
    for step in range(1, max_iterations + 1):
        p = _sigmoid(features @ weights)                             # (N,)
        gradient = features.T @ (p - labels) + l2 * weights          # of the negative log-likelihood
        hessian = (features * (p * (1.0 - p))[:, None]).T @ features + l2 * np.eye(dims)
        update = np.linalg.solve(hessian, gradient)
        weights -= update
        if np.abs(update).max() <= tolerance * max(1.0, np.abs(weights).max()):
            return weights, step
    return weights, max_iterations


def _sigmoid(z: np.ndarray) -> np.ndarray:
    return 0.5 * (1.0 + np.tanh(0.5 * z))  # no overflow for large |z|
