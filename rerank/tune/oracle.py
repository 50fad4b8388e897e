"""Oracle BLEU of an n-best list: how far reranking it could go.

The oracle picks one hypothesis per sentence to maximise corpus BLEU. Finding the best choice
exactly is a search over K^S combinations; the standard approximation, used here, starts from
each sentence's best smoothed sentence BLEU (Moses' BLEU+1) and then sweeps the sentences, giving
each the hypothesis that maximises corpus BLEU with every other choice fixed, until a sweep
changes nothing (a local maximum, and a lower bound on the true oracle). Each step scores all of a
sentence's hypotheses at once from the BLEU statistics of :mod:`rerank.tune.stats`.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from rerank.tune.data import NBestPool, TuningData
from rerank.tune.stats import BleuStatistics, log_bleu, sentence_bleu_plus_one

logger = logging.getLogger(__name__)

MAX_SWEEPS = 20


def oracle_choice(data: TuningData, max_sweeps: int = MAX_SWEEPS) -> np.ndarray:
    """The oracle's hypothesis of each sentence (S,), as the module docstring says."""
    valid = data.valid
    sentences = np.arange(data.num_sentences)
    choice = np.where(valid, sentence_bleu_plus_one(data.stats), -np.inf).argmax(axis=1)
    total = data.stats[sentences, choice].sum(axis=0)
    for _ in range(max_sweeps):
        changed = False
        for s in sentences:
            candidates = total - data.stats[s, choice[s]] + data.stats[s]  # (K, NUM_STATS) corpus statistics
            gains = np.where(valid[s], log_bleu(candidates), -np.inf)
            best = int(gains.argmax())
            if gains[best] > gains[choice[s]] + 1e-12:
                choice[s], total, changed = best, candidates[best], True
        if not changed:
            break
    return choice


def corpus_statistics(data: TuningData, choice: np.ndarray) -> np.ndarray:
    """The summed BLEU statistics of one hypothesis per sentence (NUM_STATS,)."""
    return data.stats[np.arange(data.num_sentences), choice].sum(axis=0)


@dataclass(frozen=True)
class ListOracle:
    """An n-best list's BLEU with each sentence's first hypothesis and with the oracle's."""

    first: float
    oracle: float
    hypotheses_per_sentence: float  # distinct (words, features)
    choice: list[str]  # the oracle's hypothesis of each sentence


def list_oracle(path: str | os.PathLike[str], bleu: BleuStatistics, reference_name: str = "the reference",
                references: Sequence[str] = ()) -> ListOracle:
    """The first hypotheses' and the oracle's corpus BLEU of the n-best list ``path``; a warning where the
    ``references`` (the lines of the first reference file) differ in style or look unrelated to the first
    hypotheses (:meth:`~rerank.tune.data.NBestPool.warn_about`)."""
    pool = NBestPool(bleu, reference_name=reference_name)
    first = pool.add(path)
    if references:
        pool.warn_about(path, first, references)
    data = pool.data()
    choice = oracle_choice(data)
    first_bleu, oracle_bleu = (bleu.score(corpus_statistics(data, c)).score for c in (first, choice))
    return ListOracle(first_bleu, oracle_bleu, float(data.counts.mean()),
                      [pool.text(s, int(k)) for s, k in enumerate(choice)])
