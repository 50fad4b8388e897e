"""BLEU sufficient statistics: identical to sacrebleu's and to Moses' extractor on real data."""

from __future__ import annotations

import math

import numpy as np
import pytest
import sacrebleu
from sacrebleu.metrics.bleu import BLEU

from rerank.formats.files import read_text
from rerank.formats.nbest import group_by_sentence, read_nbest
from rerank.tune.stats import (
    CORRECT,
    HYP_LEN,
    NUM_STATS,
    REF_LEN,
    TOTAL,
    BleuStatistics,
    log_bleu,
    sentence_bleu_plus_one,
)


def corpus(bleu: BleuStatistics, hypotheses: list[str]) -> np.ndarray:
    return sum(bleu.hypothesis(i, h) for i, h in enumerate(hypotheses))


def assert_same_as_sacrebleu(stats: np.ndarray, expected: sacrebleu.BLEUScore, ours: sacrebleu.BLEUScore) -> None:
    assert list(stats[CORRECT]) == expected.counts
    assert list(stats[TOTAL]) == expected.totals
    assert (stats[HYP_LEN], stats[REF_LEN]) == (expected.sys_len, expected.ref_len)
    assert ours.score == expected.score


def test_moses_1best_on_val_is_55_63_as_sacrebleu(shared_data):
    """The tuning-set BLEU of Moses' own output (the whole of val): tokenize none, as Moses' mert."""
    refs = read_text(shared_data / "multi30k/tok/val.lc.norm.tok.fr")
    hyps = read_text(shared_data / "moses-multi30k/nbest/val.1best")
    bleu = BleuStatistics([refs])
    stats = corpus(bleu, hyps)
    expected = sacrebleu.corpus_bleu(hyps, [refs], tokenize="none")
    assert_same_as_sacrebleu(stats, expected, bleu.score(stats))
    assert round(expected.score, 2) == 55.63
    assert bleu.signature() == f"nrefs:1|case:mixed|eff:no|tok:none|smooth:exp|version:{sacrebleu.__version__}"


def test_several_references_and_every_hypothesis_of_a_real_nbest(multi30k_slice):
    """Two reference sets (the real reference and Moses' 1-best), 3rd hypothesis of each sentence."""
    refs = read_text(multi30k_slice["reference"])
    other = read_text(multi30k_slice["onebest"])
    entries = read_nbest(multi30k_slice["nbest"])
    hyps = [group[min(2, len(group) - 1)].hypothesis for _, group in group_by_sentence(entries)]
    assert len(hyps) == len(refs) == len(other) == 20
    bleu = BleuStatistics([refs, other])
    stats = corpus(bleu, hyps)
    expected = sacrebleu.corpus_bleu(hyps, [refs, other], tokenize="none")
    assert_same_as_sacrebleu(stats, expected, bleu.score(stats))
    assert bleu.signature().startswith("nrefs:2|")


@pytest.mark.parametrize("hyp, refs", [
    ("a b c d e", ["a b c", "a b c d e f g"]),   # closest: 7 (distance 2) vs 3 (distance 2): the shorter, 3
    ("a a a a", ["a a", "a b a"]),               # clipping by the largest count in any reference
    ("", ["a b"]),                               # an empty hypothesis
    ("x y", ["a b c d"]),                        # no match at all
])
def test_segment_statistics_match_sacrebleu(hyp, refs):
    bleu = BleuStatistics([[r] for r in refs])
    row = bleu.hypothesis(0, hyp)
    expected = BLEU(tokenize="none").corpus_score([hyp], [[r] for r in refs])
    assert list(row) == [expected.sys_len, expected.ref_len, *expected.counts, *expected.totals]


def test_tokenizer_and_lowercase_follow_sacrebleu():
    hyps, refs = ["The cat, sat.", "A Dog!"], ["the cat , sat .", "a dog !"]
    bleu = BleuStatistics([refs], tokenize="13a", lowercase=True)
    stats = corpus(bleu, hyps)
    expected = sacrebleu.corpus_bleu(hyps, [refs], tokenize="13a", lowercase=True)
    assert_same_as_sacrebleu(stats, expected, bleu.score(stats))
    assert "case:lc" in bleu.signature() and "tok:13a" in bleu.signature()


def test_matches_moses_extractor_on_its_regression_data(regression_slice):
    """nbest.1 against Moses' own SCORESTAT (m1 t1 ... m4 t4 reflen for every hypothesis)."""
    data = regression_slice / "tests/mert.extractor-txt/data"
    bleu = BleuStatistics([read_text(data / "reference")])
    ours = [bleu.hypothesis(e.sentence_id, e.hypothesis) for e in read_nbest(data / "nbest.1.gz")]
    scorestat = read_text(regression_slice / "tests/mert.basic/data/SCORESTAT.txt")
    moses = [[int(v) for v in line.split()] for line in scorestat if not line.startswith("SCORES_TXT_")]
    assert len(ours) == len(moses) == 1000
    for row, (m1, t1, m2, t2, m3, t3, m4, t4, reflen) in zip(ours, moses, strict=True):
        assert list(row) == [t1, reflen, m1, m2, m3, m4, t1, t2, t3, t4]


def random_stats(rng: np.random.Generator, rows: int) -> np.ndarray:
    stats = np.zeros((rows, NUM_STATS), dtype=np.int64)
    stats[:, HYP_LEN] = rng.integers(0, 30, rows)
    stats[:, REF_LEN] = rng.integers(1, 30, rows)
    for n in range(4):
        stats[:, TOTAL.start + n] = np.maximum(stats[:, HYP_LEN] - n, 0)
        stats[:, CORRECT.start + n] = rng.integers(0, stats[:, TOTAL.start + n] + 1)
    return stats


def test_vectorised_bleu_is_compute_bleu():
    """Including the 'exp' smoothing of orders without a match, and degenerate rows."""
    stats = random_stats(np.random.default_rng(0), 500)
    for row, value in zip(stats, np.exp(log_bleu(stats)) * 100, strict=True):
        expected = BLEU.compute_bleu(list(row[CORRECT]), list(row[TOTAL]), int(row[HYP_LEN]), int(row[REF_LEN]),
                                     smooth_method="exp").score
        assert value == pytest.approx(expected, rel=1e-12, abs=1e-12)
    summed = stats.sum(axis=0)
    assert math.exp(log_bleu(summed)) * 100 == pytest.approx(BleuStatistics([["a"]]).score(summed).score, rel=1e-12)


def test_sentence_bleu_plus_one_is_moses_formula():
    stats = random_stats(np.random.default_rng(1), 200)
    for row, value in zip(stats, sentence_bleu_plus_one(stats), strict=True):
        if row[HYP_LEN] == 0:
            assert value == 0
            continue
        log = sum(math.log(row[CORRECT][n] + 1) - math.log(row[TOTAL][n] + 1) for n in range(4)) / 4
        log += min(0.0, 1 - row[REF_LEN] / row[HYP_LEN])
        assert value == pytest.approx(math.exp(log), rel=1e-12)
