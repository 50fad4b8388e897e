"""n-best lists as arrays for tuning: features and BLEU statistics of every distinct hypothesis.

The tuning loop optimises over the n-best lists of all its iterations together (Och 2003,
Sec. 5; what makes ``mert-moses.pl`` converge): :class:`NBestPool` takes one file after another
and merges a hypothesis already seen for the same sentence, the same words with the same
features, as Moses' extractor does. :meth:`NBestPool.data` gives the arrays the optimisers
work on, padded to the largest number of hypotheses of any sentence; :func:`aligned_weights`
turns a weights file into a vector for their features.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from rerank.errors import FormatError, RerankError, log_once
from rerank.formats.files import display_name
from rerank.formats.nbest import FeatureLayout, NBestEntry, read_nbest
from rerank.formats.relatedness import warn_unrelated
from rerank.formats.tokenization import warn_style_mismatch
from rerank.formats.weights import Origin, WeightsFile, known_weights, weight_vector
from rerank.tune.stats import NUM_STATS, BleuStatistics

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class TuningData:
    """The distinct hypotheses of S sentences, at most K each, with D features.

    Rows past ``counts[s]`` are padding: zero features and statistics, ``valid`` False.
    """

    layout: FeatureLayout
    features: np.ndarray  # (S, K, D) float64
    stats: np.ndarray     # (S, K, NUM_STATS) int64
    counts: np.ndarray    # (S,) int64, at least 1

    @property
    def num_sentences(self) -> int:
        return self.features.shape[0]

    @property
    def dims(self) -> int:
        return self.features.shape[2]

    @property
    def valid(self) -> np.ndarray:
        """(S, K) bool: True where a row holds a hypothesis."""
        return np.arange(self.features.shape[1])[None, :] < self.counts[:, None]

    def scores(self, weights: np.ndarray) -> np.ndarray:
        """Model scores ``features · weights``, -inf at padding: (S, K)."""
        return np.where(self.valid, self.features @ weights, -np.inf)

    def best(self, weights: np.ndarray) -> np.ndarray:
        """Index of the highest-scoring hypothesis of each sentence, the first one on a tie: (S,)."""
        return np.argmax(self.scores(weights), axis=1)

    def corpus_stats(self, weights: np.ndarray) -> np.ndarray:
        """Summed BLEU statistics of the hypotheses ``weights`` choose: (NUM_STATS,)."""
        chosen = self.best(weights)
        return self.stats[np.arange(self.num_sentences), chosen].sum(axis=0)

    def select(self, labels: Sequence[str]) -> tuple[TuningData, np.ndarray]:
        """The data restricted to the features ``labels`` (in the layout's order), and the
        columns (D',) of the full feature vector they come from."""
        offsets = self.layout.offsets()
        unknown = [label for label in labels if label not in offsets]
        if unknown:
            raise RerankError(f"features to tune that the n-best list does not have: {', '.join(unknown)} "
                              f"(it has {', '.join(self.layout.labels)})")
        kept = [label for label in self.layout.labels if label in labels]
        columns = np.concatenate([np.arange(offsets[label].start, offsets[label].stop) for label in kept])
        layout = FeatureLayout(tuple(kept), tuple(offsets[label].stop - offsets[label].start for label in kept))
        return TuningData(layout, self.features[:, :, columns], self.stats, self.counts), columns


class NBestPool:
    """The distinct hypotheses of one or more n-best lists of the same tuning set.

    :param bleu: statistics against the references; its length is the number of sentences.
    :param reference_name: the reference file, named in errors about the number of sentences.
    """

    def __init__(self, bleu: BleuStatistics, reference_name: str = "the reference"):
        self.bleu = bleu
        self.reference_name = reference_name
        self.layout: FeatureLayout | None = None
        self.files: list[str] = []
        self._keys: list[dict[tuple[str, tuple[float, ...]], int]] = [{} for _ in range(len(bleu))]
        self._features: list[list[tuple[float, ...]]] = [[] for _ in range(len(bleu))]
        self._stats: list[list[np.ndarray]] = [[] for _ in range(len(bleu))]
        self._text_stats: list[dict[str, np.ndarray]] = [{} for _ in range(len(bleu))]
        self._texts: list[list[str]] = [[] for _ in range(len(bleu))]

    @property
    def num_sentences(self) -> int:
        return len(self._keys)

    @property
    def size(self) -> int:
        """The number of distinct hypotheses."""
        return sum(len(keys) for keys in self._keys)

    def add(self, path: str | os.PathLike[str]) -> np.ndarray:
        """Merge the n-best list ``path`` into the pool.

        :return: the index, in :meth:`data`, of each sentence's first hypothesis in this file
            (the decoder's 1-best): (S,).
        """
        name = display_name(path)
        first = np.zeros(self.num_sentences, dtype=np.int64)
        expected = 0
        lineno = 0
        group: list[NBestEntry] = []
        for entry in read_nbest(path):
            lineno = entry.lineno
            self._check_layout(entry, name)
            if group and entry.sentence_id != group[0].sentence_id:
                first[expected] = self._merge(expected, group)
                expected += 1
                group = []
            if not group:
                self._check_sentence(entry, expected, name)
            group.append(entry)
        if group:
            first[expected] = self._merge(expected, group)
            expected += 1
        if expected != self.num_sentences:
            raise FormatError(name, lineno or None, f"hypotheses for {self.num_sentences} sentences, one per line of "
                              f"{self.reference_name}", got=f"{expected} sentences")
        self.files.append(name)
        return first

    def _check_layout(self, entry: NBestEntry, name: str) -> None:
        if self.layout is None:
            self.layout = entry.layout
        elif entry.layout != self.layout:
            raise FormatError(name, entry.lineno, f"the same dense features as {self.files[0]}: "
                              f"{self.layout.describe()}", got=entry.layout.describe())

    def _check_sentence(self, entry: NBestEntry, expected: int, name: str) -> None:
        if entry.sentence_id >= self.num_sentences:
            raise FormatError(name, entry.lineno, f"sentence ids below {self.num_sentences}, as "
                              f"{self.reference_name} has {self.num_sentences} lines", got=str(entry.sentence_id))
        if entry.sentence_id != expected:
            raise FormatError(name, entry.lineno, f"hypotheses for sentence {expected} before sentence "
                              f"{entry.sentence_id} (every sentence needs at least one)", got=str(entry.sentence_id))

    def _merge(self, sentence: int, entries: list[NBestEntry]) -> int:
        """Add one sentence's entries; returns the index of the first one."""
        keys, features, stats = self._keys[sentence], self._features[sentence], self._stats[sentence]
        known = self._text_stats[sentence]
        texts = [" ".join(entry.tokens) for entry in entries]
        new_texts = list(dict.fromkeys(t for t in texts if t not in known))
        if new_texts:
            known.update(zip(new_texts, self.bleu.hypotheses(sentence, new_texts), strict=True))
        indices = []
        for entry, text in zip(entries, texts, strict=True):
            key = (text, entry.dense)
            index = keys.get(key)
            if index is None:
                index = keys[key] = len(features)
                features.append(entry.dense)
                stats.append(known[text])
                self._texts[sentence].append(text)
            indices.append(index)
        return indices[0]

    def text(self, sentence: int, index: int) -> str:
        """The words of hypothesis ``index`` (as in :meth:`data`) of sentence ``sentence``."""
        return self._texts[sentence][index]

    def first_hypotheses(self, first: np.ndarray) -> list[str]:
        """The words of each sentence's hypothesis ``first[s]`` (as :meth:`add` returns them: a list's 1-best)."""
        return [self._texts[s][int(k)] for s, k in enumerate(first)]

    def warn_about(self, path: str | os.PathLike[str], first: np.ndarray, references: Sequence[str],
                   lowercase: bool = False) -> None:
        """Warn where the list ``path``'s 1-best (``first``, as :meth:`add` returned it) and ``references`` (the
        lines of the first reference file) differ in tokenization or case (not case where BLEU is ``lowercase``),
        or look unrelated: from the pool, so that a list is read once (a pipe can be given)."""
        hypotheses = self.first_hypotheses(first)
        warn_style_mismatch(hypotheses, references, display_name(path), self.reference_name, logger, lowercase)
        warn_unrelated(hypotheses, references, display_name(path), self.reference_name, logger)

    def words(self) -> np.ndarray:
        """The words of each hypothesis, as in :meth:`data` (0 at padding): (S, K)."""
        size = max(len(texts) for texts in self._texts)
        counts = np.zeros((self.num_sentences, size), dtype=np.int64)
        for s, texts in enumerate(self._texts):
            counts[s, : len(texts)] = [len(text.split()) for text in texts]
        return counts

    def data(self) -> TuningData:
        """The pool as padded arrays."""
        if self.layout is None:
            raise ValueError("no n-best list was added")
        counts = np.array([len(f) for f in self._features], dtype=np.int64)
        size, dims = int(counts.max()), self.layout.dims
        features = np.zeros((self.num_sentences, size, dims))
        stats = np.zeros((self.num_sentences, size, NUM_STATS), dtype=np.int64)
        for s, (rows, sentence_stats) in enumerate(zip(self._features, self._stats, strict=True)):
            features[s, : len(rows)] = rows
            stats[s, : len(rows)] = sentence_stats
        return TuningData(self.layout, features, stats, counts)


def aligned_weights(weights: Mapping[str, Sequence[float]], layout: FeatureLayout, origin: Origin) -> np.ndarray:
    """Starting weights as a vector for ``layout`` (D,).

    A ``moses.ini`` also weights features that Moses does not print in n-best lists (such as
    ``UnknownWordPenalty0``): those are left out. A YAML weights file must name only features of
    the n-best list. A feature without a weight starts at 0. ``origin``: the file the weights came from (as read,
    or its path).
    """
    known = known_weights(weights, dict.fromkeys(weights, origin), layout.labels, "the n-best list")
    path = origin.name if isinstance(origin, WeightsFile) else str(origin)
    missing = [label for label in layout.labels if label not in known]
    if missing:
        log_once(logger, logging.WARNING, "%s: no weight for %s; starting from 0", path, ", ".join(missing))
    return weight_vector(known, layout, source=str(path), missing=0.0)


