"""BLEU sufficient statistics: one integer row per hypothesis, so that corpus BLEU is a sum.

A row is sacrebleu's ``[hyp_len, ref_len] + correct[1..4] + total[1..4]``
(``metrics/bleu.py::_compute_segment_statistics``): the corpus BLEU of any choice of one
hypothesis per sentence is the sum of the chosen rows, given to the public
``sacrebleu.BLEU.compute_bleu``. With several references, n-gram counts are clipped by their
largest count in any reference and ``ref_len`` is the reference length closest to the
hypothesis length, the shorter one on a tie, as Moses' ``mert`` and sacrebleu both do.

:func:`log_bleu` is the same formula vectorised over many rows at once, for the MERT sweep;
:func:`sentence_bleu_plus_one` is the smoothed sentence BLEU of PRO (Lin & Och 2004, as Moses
computes it: add 1 to the matches and counts of every n-gram order).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from sacrebleu.metrics.bleu import BLEU, BLEUScore

MAX_ORDER = 4
NUM_STATS = 2 + 2 * MAX_ORDER
HYP_LEN, REF_LEN = 0, 1
CORRECT = slice(2, 2 + MAX_ORDER)
TOTAL = slice(2 + MAX_ORDER, 2 + 2 * MAX_ORDER)


def check_tokenizer(tokenize: str) -> str:
    """``tokenize`` if sacrebleu's BLEU has that tokenizer, else a ValueError listing those it has."""
    if tokenize not in BLEU.TOKENIZERS:
        raise ValueError(f"unknown BLEU tokenizer {tokenize!r}: expected one of {', '.join(BLEU.TOKENIZERS)}")
    return tokenize


class BleuStatistics:
    """Reference n-gram counts of a tuning set, and the statistics of hypotheses against them.

    Each sentence's reference words get small integer ids, and an n-gram is coded as an integer
    in base ``vocabulary size``; a hypothesis word that no reference of its sentence has gets id
    0, and an n-gram containing it can never match. The statistics of all hypotheses of one
    sentence are then counted together with numpy.

    :param references: one sequence per reference set, each with one line per sentence.
    :param tokenize: a sacrebleu tokenizer; ``"none"`` splits on whitespace only, which is what
        Moses' ``mert`` does with tokenized text.
    """

    def __init__(self, references: Sequence[Sequence[str]], tokenize: str = "none", lowercase: bool = False):
        check_tokenizer(tokenize)
        if not references:
            raise ValueError("at least one reference set is needed")
        sizes = {len(refs) for refs in references}
        if len(sizes) != 1:
            raise ValueError(f"reference sets of different sizes: {sorted(sizes)}")
        # given the references, sacrebleu knows their number for its signature
        self.metric = BLEU(tokenize=tokenize, lowercase=lowercase, force=True, references=references)
        self._sentences = [_ReferenceCounts([self.tokens(line) for line in lines])
                           for lines in zip(*references, strict=True)]

    def __len__(self) -> int:
        return len(self._sentences)

    def tokens(self, text: str) -> list[str]:
        """``text`` preprocessed as sacrebleu's BLEU does (lowercase, tokenizer), split into words."""
        if self.metric.lowercase:
            text = text.lower()
        return self.metric.tokenizer(text.rstrip()).split()

    def hypotheses(self, sentence: int, texts: Sequence[str]) -> np.ndarray:
        """The statistics of hypotheses of sentence ``sentence`` (0-based): ``(len(texts), NUM_STATS)`` int64."""
        return self._sentences[sentence].statistics([self.tokens(text) for text in texts])

    def hypothesis(self, sentence: int, text: str) -> np.ndarray:
        """The statistics of one hypothesis: ``(NUM_STATS,)`` int64."""
        return self.hypotheses(sentence, [text])[0]

    def score(self, stats: np.ndarray) -> BLEUScore:
        """Corpus BLEU of summed statistics, from sacrebleu's public ``compute_bleu``."""
        stats = np.asarray(stats, dtype=np.int64)
        return BLEU.compute_bleu([int(v) for v in stats[CORRECT]], [int(v) for v in stats[TOTAL]],
                                 int(stats[HYP_LEN]), int(stats[REF_LEN]),
                                 smooth_method=self.metric.smooth_method, smooth_value=self.metric.smooth_value)

    def signature(self) -> str:
        """sacrebleu's signature of this BLEU (``nrefs:1|case:mixed|eff:no|tok:none|smooth:exp|version:...``)."""
        return str(self.metric.get_signature())


class _ReferenceCounts:
    """The references of one sentence: word ids, lengths, and sorted n-gram codes with clipping counts."""

    MAX_VOCABULARY = 2 ** 15  # codes of 4-grams stay below 2^60

    def __init__(self, references: Sequence[Sequence[str]]):
        self.ids: dict[str, int] = {}
        for tokens in references:
            for token in tokens:
                self.ids.setdefault(token, len(self.ids) + 1)  # 0: a word no reference has
        if len(self.ids) >= self.MAX_VOCABULARY:
            raise ValueError(f"references with {len(self.ids)} distinct words in one sentence")
        self.base = len(self.ids) + 1
        self.lengths = np.array([len(tokens) for tokens in references], dtype=np.int64)
        self.codes: list[np.ndarray] = []   # per order: sorted distinct n-gram codes
        self.counts: list[np.ndarray] = []  # per order: their largest count in any reference
        ids, starts, lengths = self._encode(references)
        owner = np.repeat(np.arange(len(references)), lengths)
        for n in range(1, MAX_ORDER + 1):
            codes, _, counts = self._ngrams(ids, starts, lengths, n, owner)
            order = np.argsort(codes, kind="stable")
            codes, counts = codes[order], counts[order]
            first = np.flatnonzero(np.append(True, codes[1:] != codes[:-1])) if len(codes) else codes
            self.codes.append(codes[first])
            self.counts.append(np.maximum.reduceat(counts, first) if len(codes) else counts)

    def _encode(self, hypotheses: Sequence[Sequence[str]]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Word ids of all hypotheses, concatenated: ``(T,)``; the start and length of each: ``(H,)``."""
        get = self.ids.get
        ids = np.array([get(token, 0) for tokens in hypotheses for token in tokens], dtype=np.int64)
        lengths = np.array([len(tokens) for tokens in hypotheses], dtype=np.int64)
        starts = np.cumsum(lengths) - lengths
        return ids, starts, lengths

    def _ngrams(self, ids: np.ndarray, starts: np.ndarray, lengths: np.ndarray, n: int, owner: np.ndarray
                ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Distinct (hypothesis, n-gram) pairs of the known words: codes, hypothesis, count."""
        ends = np.repeat(starts + lengths, lengths)                      # (T,) end of each word's hypothesis
        first = np.flatnonzero(np.arange(len(ids)) + n <= ends)          # n-grams that fit in their hypothesis
        codes = np.zeros(len(first), dtype=np.int64)
        known = np.ones(len(first), dtype=bool)
        for i in range(n):
            word = ids[first + i]
            codes = codes * self.base + word
            known &= word > 0
        first, codes = first[known], codes[known]
        hyp = owner[first]
        order = np.lexsort((codes, hyp))
        codes, hyp = codes[order], hyp[order]
        new = np.ones(len(codes), dtype=bool)
        new[1:] = (codes[1:] != codes[:-1]) | (hyp[1:] != hyp[:-1])
        at = np.flatnonzero(new)
        counts = np.diff(np.append(at, len(codes)))
        return codes[at], hyp[at], counts

    def statistics(self, hypotheses: Sequence[Sequence[str]]) -> np.ndarray:
        ids, starts, lengths = self._encode(hypotheses)
        owner = np.repeat(np.arange(len(hypotheses)), lengths)           # (T,) hypothesis of each word
        rows = np.zeros((len(hypotheses), NUM_STATS), dtype=np.int64)
        rows[:, HYP_LEN] = lengths
        # closest reference length, the shorter one on a tie: (H, R) -> (H,)
        distance = np.abs(self.lengths[None, :] - lengths[:, None]) * (self.lengths.max() + 1) + self.lengths
        rows[:, REF_LEN] = self.lengths[np.argmin(distance, axis=1)]
        for n in range(1, MAX_ORDER + 1):
            rows[:, TOTAL.start + n - 1] = np.maximum(lengths - n + 1, 0)
            codes, hyp, counts = self._ngrams(ids, starts, lengths, n, owner)
            ref_codes, ref_counts = self.codes[n - 1], self.counts[n - 1]
            matched = np.zeros(len(codes), dtype=np.int64)
            if len(ref_codes):
                at = np.minimum(np.searchsorted(ref_codes, codes), len(ref_codes) - 1)
                matched = np.where(ref_codes[at] == codes, np.minimum(counts, ref_counts[at]), 0)
            rows[:, CORRECT.start + n - 1] = np.bincount(hyp, weights=matched, minlength=len(hypotheses))
        return rows


def log_bleu(stats: np.ndarray) -> np.ndarray:
    """ln of corpus BLEU (on a 0-1 scale) for each row of ``stats`` (..., NUM_STATS): (...).

    This is ``BLEU.compute_bleu`` with ``smooth_method="exp"`` (sacrebleu's default), vectorised:
    brevity penalty ``min(0, 1 - ref_len / hyp_len)``; an order with no match counts
    ``1 / (2^k * total)`` for its k-th such order; no match at all, or an empty order, gives
    -inf (BLEU 0).
    """
    stats = np.asarray(stats, dtype=np.float64)
    correct = stats[..., CORRECT]
    total = stats[..., TOTAL]
    hyp_len = stats[..., HYP_LEN]
    ref_len = stats[..., REF_LEN]
    if (correct > 0).all():  # every order matched: no smoothing, no special case
        return np.log(correct / total).mean(axis=-1) + np.minimum(0.0, 1.0 - ref_len / hyp_len)
    zero = correct == 0
    halvings = np.cumsum(zero, axis=-1)  # exp smoothing: the k-th zero order counts 1 / (2^k total)
    with np.errstate(divide="ignore", invalid="ignore"):
        numerator = np.where(zero, np.exp2(-halvings.astype(np.float64)), correct)
        log_precision = np.log(numerator) - np.log(total)
        brevity = np.minimum(0.0, 1.0 - ref_len / hyp_len)
        result = log_precision.mean(axis=-1) + brevity
    degenerate = zero.all(axis=-1) | (total == 0).any(axis=-1) | (hyp_len == 0)
    return np.where(degenerate, -np.inf, result)


def sentence_bleu_plus_one(stats: np.ndarray) -> np.ndarray:
    """Smoothed sentence BLEU (0-1) of each row (..., NUM_STATS), as Moses' PRO computes it.

    ``exp(mean_n ln((correct_n + 1) / (total_n + 1)) + min(0, 1 - ref_len / hyp_len))``.
    """
    stats = np.asarray(stats, dtype=np.float64)
    log_precision = np.log(stats[..., CORRECT] + 1.0) - np.log(stats[..., TOTAL] + 1.0)
    hyp_len = stats[..., HYP_LEN]
    with np.errstate(divide="ignore", invalid="ignore"):
        brevity = np.minimum(0.0, 1.0 - stats[..., REF_LEN] / hyp_len)
    return np.where(hyp_len > 0, np.exp(log_precision.mean(axis=-1) + brevity), 0.0)
