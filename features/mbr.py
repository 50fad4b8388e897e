"""Consensus (minimum Bayes risk) features: each hypothesis' expected sentence BLEU or chrF against the other
hypotheses of its n-best list, under a posterior from the list's own scores.

::

    - {kind: mbr, metric: bleu}              # MBRbleu0
    - {kind: mbr, metric: chrf, alpha: 1}    # MBRchrf0
    - {kind: mbr, include_self: true, alpha: 5, name: MBRbleu1}   # Kumar and Byrne's MBR rule

The posterior of entry r of a sentence is p(r) ∝ exp(alpha · total_r), total_r being the entry's field 4
(the model score the decoder ranked it by); ``alpha: 0`` makes it uniform. The value of hypothesis h is
Σ_{r≠h} p(r)·G(h, r) / Σ_{r≠h} p(r), in [0, 100], where G(h, r) is h's sentence score with r as the
reference:

- ``bleu``: sacrebleu's ``sentence_bleu`` on the tokens as they are (``tokenize='none'``), its defaults:
  4-grams, ``exp`` smoothing (the NIST one: the k-th order without a match gets precision 1/(2^k · total))
  and the effective order (orders a short hypothesis has no n-gram of are left out);
- ``chrf``: sacrebleu's ``sentence_chrf`` defaults: character 6-grams with spaces removed, β = 2, no
  word n-grams, precision and recall averaged over the orders both sides have.

h itself is left out of the evidence by default: G(h, h) = 100 weighted by p(h) would add a rising
function of h's own score, which the log-linear model already has, so the feature measures agreement only.
``include_self: true`` keeps it, giving the expected gain Σ_r p(r)·G(h, r) of the MBR decision rule
(Kumar and Byrne 2004), whose argmax tends to the list's 1-best as alpha grows. Entries with
the same words count separately, each with its own posterior (the string's mass is their sum). A sentence
with a single hypothesis has no other evidence: its value is G(h, h) (100, or 0 for an empty hypothesis),
the limit of a list of identical hypotheses.

All pairs of a sentence are scored at once: n-grams are counted once per hypothesis into a (hypotheses ×
distinct n-grams) matrix C, and the clipped matches Σ_g min(C[h,g], C[r,g]) of every pair are
Σ_t [C ≥ t]·[C ≥ t]ᵀ, one matrix product per count level t.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from rerank.errors import RerankError
from rerank.formats.tokens import Pair, Tokens
from rerank.rescore.feature import SentenceList

METRICS = ("bleu", "chrf")
BLEU_ORDER = 4
CHRF_ORDER = 6
CHRF_BETA = 2.0


class ConsensusScore:
    """Each hypothesis' expected sentence BLEU or chrF against the other hypotheses of its n-best list."""

    @dataclass(frozen=True)
    class Config:
        metric: str = "bleu"  # bleu or chrf
        alpha: float = 1.0  # posterior ∝ exp(alpha · field-4 total); 0: uniform
        include_self: bool = False  # h among its own evidence (the MBR decision rule's expectation)
        name: str | None = None  # default MBRbleu0 or MBRchrf0

        def __post_init__(self) -> None:
            if self.metric not in METRICS:
                raise ValueError(f"metric must be one of {', '.join(METRICS)}, got {self.metric!r}")
            if not (math.isfinite(self.alpha) and self.alpha >= 0):
                raise ValueError(f"alpha must be a finite number >= 0, got {self.alpha}")

    needs_source = False
    dims = 1

    @staticmethod
    def label(config: Config) -> str:
        return config.name if config.name is not None else f"MBR{config.metric}0"

    def __init__(self, config: Config):
        self.name = self.label(config)
        self.metric = config.metric
        self.alpha = config.alpha
        self.include_self = config.include_self

    def score(self, pairs: Sequence[Pair]) -> np.ndarray:
        raise RerankError(f"feature {self.name} scores whole n-best lists (rerank score-nbest), "
                          "each hypothesis against the others of its sentence")

    def score_lists(self, lists: Sequence[SentenceList]) -> np.ndarray:
        columns = []
        for _, entries in lists:
            totals = np.array([entry.total for entry in entries], dtype=np.float64)
            if not np.isfinite(totals).all():
                bad = entries[int(np.flatnonzero(~np.isfinite(totals))[0])]
                raise RerankError(f"n-best line {bad.lineno}: total score {bad.total} is not a finite number; "
                                  f"feature {self.name} weighs hypotheses by it")
            hypotheses = [entry.tokens for entry in entries]
            gains = pairwise_bleu(hypotheses) if self.metric == "bleu" else pairwise_chrf(hypotheses)
            columns.append(expected_gain(gains, totals, self.alpha, include_self=self.include_self))
        return np.concatenate(columns).reshape(-1, 1) if columns else np.zeros((0, 1))


def expected_gain(gains: np.ndarray, totals: np.ndarray, alpha: float, *, include_self: bool = False
                  ) -> np.ndarray:
    """Σ_{r≠h} p(r)·gains[h, r] / Σ_{r≠h} p(r) for every h, p(r) ∝ exp(alpha · totals[r]); the diagonal
    for a single hypothesis. With ``include_self``, r = h counts too."""
    n = len(totals)
    if n == 1:
        return np.diagonal(gains).astype(np.float64)
    scaled = np.tile(alpha * totals, (n, 1))
    if not include_self:
        np.fill_diagonal(scaled, -np.inf)
    weights = np.exp(scaled - scaled.max(axis=1, keepdims=True))  # each row's largest weight is 1: no underflow
    return np.asarray((weights * gains).sum(axis=1) / weights.sum(axis=1), dtype=np.float64)


def ngram_matches(symbols: np.ndarray, lengths: np.ndarray, max_order: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """For orders 1..max_order: each sequence's number of n-grams (n,) and the clipped n-gram matches of
    every pair of sequences (n, n). ``symbols`` holds the sequences one after another (small integers),
    ``lengths`` their lengths."""
    n = len(lengths)
    size = len(symbols)
    owner = np.repeat(np.arange(n), lengths)
    room = np.repeat(np.cumsum(lengths), lengths) - np.arange(size)  # symbols left in the owner from here
    base = int(symbols.max()) + 1 if size else 1
    codes = np.zeros(size, dtype=np.int64)  # the (k-1)-gram starting at each position, as a dense id
    stats = []
    for k in range(1, max_order + 1):
        starts = np.flatnonzero(room >= k)
        if len(starts) == 0:
            stats += [(np.zeros(n), np.zeros((n, n)))] * (max_order - k + 1)
            break
        keys = codes[starts] * base + symbols[starts + k - 1]
        distinct, ids = np.unique(keys, return_inverse=True)
        codes[starts] = ids  # < size, so the next keys stay below size · base
        counts = np.bincount(owner[starts] * len(distinct) + ids, minlength=n * len(distinct))
        counts = counts.reshape(n, len(distinct))
        most = counts.max(axis=0)
        matches = np.zeros((n, n))
        for level in range(1, int(most.max()) + 1):  # min(a, b) = Σ_t [a ≥ t][b ≥ t]
            present = (counts[:, most >= level] >= level).astype(np.float32)  # exact: sums stay below 2^24
            matches += np.einsum("ik,jk->ij", present, present)  # not BLAS: its threads stall on a busy machine
        stats.append((counts.sum(axis=1).astype(np.float64), matches))
    return stats


def _word_symbols(hypotheses: Sequence[Tokens]) -> tuple[np.ndarray, np.ndarray]:
    vocab: dict[str, int] = {}
    symbols = [vocab.setdefault(word, len(vocab)) for hypothesis in hypotheses for word in hypothesis]
    return np.array(symbols, dtype=np.int64), np.array([len(h) for h in hypotheses], dtype=np.int64)


def _char_symbols(hypotheses: Sequence[Tokens]) -> tuple[np.ndarray, np.ndarray]:
    texts = ["".join(hypothesis) for hypothesis in hypotheses]  # sacrebleu's chrF drops the spaces
    points = np.frombuffer("".join(texts).encode("utf-32-le"), dtype=np.uint32)
    _, symbols = np.unique(points, return_inverse=True)
    return symbols.astype(np.int64), np.array([len(t) for t in texts], dtype=np.int64)


def pairwise_bleu(hypotheses: Sequence[Tokens]) -> np.ndarray:
    """(n, n): sentence BLEU of hypothesis h with hypothesis r as the reference, as sacrebleu's
    ``sentence_bleu(h, [r], tokenize='none')`` computes it (exp smoothing, effective order)."""
    symbols, lengths = _word_symbols(hypotheses)
    stats = ngram_matches(symbols, lengths, BLEU_ORDER)
    correct = np.stack([matches for _, matches in stats])  # (order, h, r)
    total = np.stack([counts for counts, _ in stats])[:, :, None]  # (order, h, 1)
    active = total > 0  # the orders sacrebleu reaches before it stops: a prefix
    missed = active & (correct == 0)
    halvings = np.cumsum(missed, axis=0)  # exp smoothing: the k-th order without a match gets 1/(2^k · total)
    safe_total = np.maximum(total, 1)
    precision = np.where(missed, 1.0 / (2.0 ** halvings * safe_total), correct / safe_total)
    log_precision = np.where(active, np.log(np.where(active, precision, 1.0)), 0.0).sum(axis=0)
    order = np.maximum(active.sum(axis=0), 1)
    sys_len = lengths[:, None].astype(np.float64)
    ref_len = lengths[None, :].astype(np.float64)
    brevity = np.where(sys_len < ref_len, np.exp(1 - ref_len / np.maximum(sys_len, 1)), 1.0)
    brevity = np.where(sys_len == 0, 0.0, brevity)
    bleu = 100 * brevity * np.exp(log_precision / order)
    return np.asarray(np.where(correct.sum(axis=0) > 0, bleu, 0.0), dtype=np.float64)


def pairwise_chrf(hypotheses: Sequence[Tokens]) -> np.ndarray:
    """(n, n): chrF of hypothesis h with hypothesis r as the reference, as sacrebleu's
    ``sentence_chrf(h, [r])`` computes it (character 6-grams without spaces, β = 2, effective order)."""
    symbols, lengths = _char_symbols(hypotheses)
    precision = recall = orders = np.zeros((len(lengths), len(lengths)))
    for counts, matches in ngram_matches(symbols, lengths, CHRF_ORDER):
        hyp = counts[:, None]
        ref = counts[None, :]
        both = (hyp > 0) & (ref > 0)  # orders that neither side lacks
        precision = precision + np.where(both, matches / np.maximum(hyp, 1), 0.0)
        recall = recall + np.where(both, matches / np.maximum(ref, 1), 0.0)
        orders = orders + both
    precision = precision / np.maximum(orders, 1)
    recall = recall / np.maximum(orders, 1)
    factor = CHRF_BETA ** 2
    denominator = factor * precision + recall
    chrf = 100 * (1 + factor) * precision * recall / np.where(denominator > 0, denominator, 1.0)
    return np.asarray(np.where(denominator > 0, chrf, 0.0), dtype=np.float64)
