"""Left-to-right and right-to-left models together in the search: the left-to-right search's n-best list of
each sentence reranked by right-to-left models (Liu et al. 2016; Sennrich et al. 2016's WMT systems).

Each hypothesis gets the right-to-left models' ln p of its words read backwards (``</s>`` included; an
ensemble's is the mean of its models', as :class:`~rerank.features.nmt.NeuralTranslationModel` scores it),
and the hypotheses are ranked by

    (1 - w) · ln p_L2R / lp(|Y|) + w · ln p_R2L / lp(|Y|)

with the length penalty lp of the search (1 for ``none``, |Y| for ``average``: ln p per word) and |Y| the
hypothesis' words and ``</s>``; ties keep the search's order. The weight w is chosen on held-out data (0: the
search's own ranking; 1: the right-to-left models' alone).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from rerank.errors import RerankError
from rerank.formats.tokens import Pair, Tokens
from rerank.models.config import read_model_config
from rerank.search.beam import Hypothesis, LengthPenalty

DEFAULT_WEIGHT = 0.5  # the right-to-left models' weight where none is given


class PairScorer(Protocol):
    """ln p of each (source, hypothesis) pair, one row each (a feature's values, the first one used)."""

    def score(self, pairs: Sequence[Pair]) -> np.ndarray: ...


@dataclass(frozen=True)
class RightToLeft:
    """The right-to-left models (``models``, named ``label`` in n-best lists) and their weight ``weight``."""

    models: PairScorer
    label: str
    weight: float

    def __post_init__(self) -> None:
        check_weight(self.weight)


def check_weight(weight: float) -> None:
    """A ``ValueError`` unless the right-to-left models' weight is from 0 to 1."""
    if not (math.isfinite(weight) and 0 <= weight <= 1):
        raise ValueError(f"the right-to-left weight must be between 0 and 1, got {weight}")


def check_directions(left_to_right: Sequence[str], right_to_left: Sequence[str], option: str = "--model") -> None:
    """A :class:`~rerank.errors.RerankError` unless every model directory of ``left_to_right`` (given with
    ``option``) reads targets left to right and every one of ``right_to_left`` (--r2l-model) right to left; read
    from their configs, before any model is loaded."""
    for name, directories, reverse in ((option, left_to_right, False), ("--r2l-model", right_to_left, True)):
        for directory in directories:
            if read_model_config(directory).reverse_target != reverse:
                raise RerankError(f"{name} {directory}: expected a model that reads targets "
                                  f"{'right to left' if reverse else 'left to right'} with --r2l-model, got one "
                                  f"that reads them {'left to right' if reverse else 'right to left'}")


@dataclass(frozen=True)
class Reranked:
    """A hypothesis, its words, the right-to-left models' ln p of them and the score it is ranked by."""

    hypothesis: Hypothesis
    words: list[str]
    right_to_left: float
    total: float


def combined_score(left_to_right: float, right_to_left: float, length: int, weight: float,
                   penalty: LengthPenalty) -> float:
    """(1 - w) · ln p_L2R / lp(|Y|) + w · ln p_R2L / lp(|Y|), ``length`` = |Y| (words and ``</s>``)."""
    lp = float(penalty(length))
    return (1 - weight) * left_to_right / lp + weight * right_to_left / lp


def rerank_both_ways(sources: Sequence[Tokens], nbests: Sequence[Sequence[Hypothesis]],
                     words: Sequence[Sequence[list[str]]], right_to_left: RightToLeft,
                     penalty: LengthPenalty) -> list[list[Reranked]]:
    """Each sentence's hypotheses (``nbests``, spelled ``words``) best first by the combined score; the
    right-to-left models score all the sentences' hypotheses together."""
    pairs = [(source, hypothesis_words) for source, sentence in zip(sources, words, strict=True)
             for hypothesis_words in sentence]
    values = iter(right_to_left.models.score(pairs)[:, 0].tolist() if pairs else [])
    reranked = []
    for hypotheses, sentence in zip(nbests, words, strict=True):
        scored = [Reranked(h, list(w), r2l, combined_score(h.score, r2l, len(h.tokens) + 1, right_to_left.weight,
                                                            penalty))
                  for h, w, r2l in zip(hypotheses, sentence, values, strict=False)]
        reranked.append(sorted(scored, key=lambda r: -r.total))
    return reranked
