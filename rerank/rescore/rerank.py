"""Reranking an n-best list with log-linear weights: the best hypothesis of every sentence, or all re-sorted."""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence

import numpy as np

from rerank.errors import FormatError, NonFiniteScore, counted
from rerank.formats.files import atomic_output, committed_together, display_name
from rerank.formats.nbest import FeatureLayout, NBestEntry, NBestGroup, beyond_source, group_by_sentence, read_nbest
from rerank.formats.streams import peek
from rerank.formats.weights import weight_vector

logger = logging.getLogger(__name__)


def rerank_nbest(nbest: str | os.PathLike[str], weights: Mapping[str, Sequence[float]],
                 output: str | os.PathLike[str], *,
                 nbest_out: str | os.PathLike[str] | None = None, num_sentences: int | None = None,
                 source_name: str = "the source", weights_name: str = "the weights",
                 missing: float | None = None,
                 known: Callable[[FeatureLayout], Mapping[str, Sequence[float]]] | None = None,
                 keep_first: bool = False) -> None:
    """Write the best hypothesis of every sentence of ``nbest`` to ``output`` (and, with ``nbest_out``, the
    whole list re-sorted by the new score, which goes into field 4), both atomically.

    ``weights`` must name features of the list only (``known`` may first pick them, given the list's
    layout); a feature without a weight gets ``missing``, or is an error. With ``num_sentences``, every
    sentence id below it gets a line, an empty one when the list has no hypotheses for it (as Moses
    writes for a sentence it failed to translate). With ``keep_first``, weights of 0 are meant (each sentence's
    first hypothesis, the decoder's best) and not warned of.
    """
    nbest_name = display_name(nbest)
    first, entries = peek(read_nbest(nbest))
    if first is None:  # as `rerank tune` refuses one: an empty list is a failed decoding run, not a translation
        raise FormatError(nbest_name, None, "at least one hypothesis", got="an empty n-best list")
    chosen = known(first.layout) if known is not None else weights
    vector = weight_vector(chosen, first.layout, source=weights_name, missing=missing)
    if not vector.any() and not keep_first:
        logger.warning("%s: every weight of the features of %s is 0: each sentence keeps its first hypothesis",
                       weights_name, nbest_name)
    sentences = all_sentences(group_by_sentence(entries), num_sentences=num_sentences, nbest_name=nbest_name,
                              source_name=source_name)
    empty = sparse = 0
    with committed_together(), contextlib.ExitStack() as stack:
        out = stack.enter_context(atomic_output(output))
        resorted = stack.enter_context(atomic_output(nbest_out)) if nbest_out is not None else None
        for _, group in sentences:
            if not group:
                empty += 1
                out.write("\n")
                continue
            sparse += any(entry.sparse for entry in group)
            try:
                if resorted is None:
                    out.write(best_hypothesis(group, vector).hypothesis + "\n")
                    continue
                ranked = reranked(group, vector)  # ranked[0] is the best hypothesis
            except NonFiniteScore as e:
                raise e.in_file(nbest_name) from None
            out.write(ranked[0].hypothesis + "\n")
            resorted.writelines(entry.line() + "\n" for entry in ranked)
    if empty:
        logger.warning("%s no hypotheses in %s: wrote an empty line for each",
                       counted(empty, "sentence has", "sentences have"), nbest_name)
    if sparse:
        logger.warning("%s sparse features in %s; only dense features are scored",
                       counted(sparse, "sentence has", "sentences have"), nbest_name)


def all_sentences(sentences: Iterable[NBestGroup], *, num_sentences: int | None, nbest_name: str,
                  source_name: str = "the source") -> Iterator[NBestGroup]:
    """Every sentence id from 0 on, in order, with an empty list where the n-best list has no line.

    With ``num_sentences``, the ids run up to ``num_sentences - 1`` and a larger id is an error;
    without it, they stop at the last id of the n-best list.
    """
    expected = 0
    for sentence_id, group in sentences:
        if num_sentences is not None and sentence_id >= num_sentences:
            raise beyond_source(nbest_name, group[0], num_sentences, source_name)
        for missing in range(expected, sentence_id):
            yield missing, []
        yield sentence_id, group
        expected = sentence_id + 1
    for missing in range(expected, num_sentences or 0):
        yield missing, []


def model_scores(group: Sequence[NBestEntry], weights: np.ndarray) -> np.ndarray:
    """The log-linear score (dense features · weights) of each hypothesis; one that overflows, or whose
    features are not finite, is a :class:`~rerank.errors.NonFiniteScore`: no choice is made on it."""
    with np.errstate(over="ignore", invalid="ignore"):
        scores = np.array([entry.dense for entry in group], dtype=np.float64).reshape(len(group), -1) @ weights
    if not np.isfinite(scores).all():
        bad = int(np.flatnonzero(~np.isfinite(scores))[0])
        raise NonFiniteScore(group[bad].where(), "the total score", float(scores[bad]))
    return scores


def reranked(group: Sequence[NBestEntry], weights: np.ndarray) -> list[NBestEntry]:
    """The hypotheses best first, each with its new total in field 4.

    The sort is stable: of hypotheses with equal scores, the one earlier in the file comes first, so
    the first is the first maximum, as Moses picks it.
    """
    scores = model_scores(group, weights)
    order = np.argsort(-scores, kind="stable")
    return [group[i].with_total(float(scores[i])) for i in order]


def best_hypothesis(group: Sequence[NBestEntry], weights: np.ndarray) -> NBestEntry:
    """The hypothesis with the highest score; of equal ones, the first in the file."""
    return group[int(np.argmax(model_scores(group, weights)))]
