"""Consensus (MBR) features: pairwise sentence BLEU and chrF equal sacrebleu's, the posterior-weighted
expectation over the other hypotheses, and the feature inside score-nbest."""

from __future__ import annotations

import dataclasses
import gzip
import itertools
import math
import random
from pathlib import Path

import numpy as np
import pytest
from sacrebleu import sentence_bleu, sentence_chrf

from rerank.errors import ConfigError, RerankError
from rerank.features.mbr import expected_gain, pairwise_bleu, pairwise_chrf
from rerank.features.registry import build_feature, build_features
from rerank.formats.nbest import NBestEntry, format_value, group_by_sentence, read_nbest
from rerank.rescore.append import score_nbest
from rerank.rescore.feature import scores_lists

WORDS = "un chien noir court , le chat la rue . é".split()


def entries(hypotheses: list[str], totals: list[float], sentence_id: int = 0) -> list[NBestEntry]:
    return [NBestEntry.build(sentence_id, h.split(), [("LM0", [0.0])], total)
            for h, total in zip(hypotheses, totals, strict=True)]


def random_lists(seed: int, count: int) -> list[list[list[str]]]:
    rng = random.Random(seed)
    return [[[rng.choice(WORDS) for _ in range(rng.randint(0, 9))] for _ in range(rng.randint(1, 6))]
            for _ in range(count)]


@pytest.mark.parametrize("metric", ["bleu", "chrf"])
def test_pairwise_scores_equal_sacrebleu(metric: str) -> None:
    """Every pair, empty and short hypotheses included (exp smoothing, effective order; chrF without spaces)."""
    pairwise = pairwise_bleu if metric == "bleu" else pairwise_chrf
    lists = random_lists(0, 60) + [[["le", "chat"], ["le", "chat", "noir"], []], [["le"] * 5, ["le"] * 2]]
    for hypotheses in lists:
        got = pairwise(hypotheses)
        for (i, h), (j, r) in itertools.product(enumerate(hypotheses), repeat=2):
            hyp, ref = " ".join(h), " ".join(r)
            want = (sentence_bleu(hyp, [ref], tokenize="none") if metric == "bleu" else sentence_chrf(hyp, [ref]))
            assert got[i, j] == pytest.approx(want.score, abs=1e-9), (hyp, ref)


def test_identical_hypotheses_have_equal_features() -> None:
    for metric in ("bleu", "chrf"):
        feature = build_feature({"kind": "mbr", "metric": metric})
        assert scores_lists(feature)
        lists = [((), entries(["un chien noir court"] * 4, [-1.0, -3.0, -7.5, -40.0]))]
        values = feature.score_lists(lists)[:, 0]
        assert values == pytest.approx([100.0] * 4, abs=1e-12)
        with_self = build_feature({"kind": "mbr", "metric": metric, "include_self": True}).score_lists(lists)
        assert with_self[:, 0] == pytest.approx([100.0] * 4, abs=1e-12)  # equal up to the rounding of the weighted mean
        assert {format_value(v) for v in values} == {"100"}  # and equal as the n-best list writes them
    # different words, different values: the test above could fail
    different = build_feature({"kind": "mbr"}).score_lists([((), entries(["un chien", "un chat", "le chat"],
                                                                       [0.0, 0.0, 0.0]))])[:, 0]
    assert len(set(different.tolist())) > 1


def test_single_hypothesis_gets_its_score_against_itself() -> None:
    for metric in ("bleu", "chrf"):
        feature = build_feature({"kind": "mbr", "metric": metric})
        values = feature.score_lists([((), entries(["un chien"], [-2.0])), ((), entries([""], [-1.0], 1))])
        assert values[:, 0].tolist() == [100.0, 0.0]


def test_expectation_over_the_others_under_the_softmax_of_the_totals() -> None:
    hypotheses = [h for h in random_lists(3, 5) if len(h) >= 3][0]
    totals = np.array([-2.0, -1.0, -4.5, -0.5, -3.0, -2.2][: len(hypotheses)])
    gains = pairwise_bleu(hypotheses)
    for alpha in (0.0, 0.7, 1.0):
        got = expected_gain(gains, totals, alpha)
        for h in range(len(hypotheses)):
            weights = [math.exp(alpha * totals[r]) if r != h else 0.0 for r in range(len(hypotheses))]
            assert got[h] == pytest.approx(np.dot(weights, gains[h]) / sum(weights))
        with_self = expected_gain(gains, totals, alpha, include_self=True)
        posterior = np.exp(alpha * totals) / np.exp(alpha * totals).sum()
        np.testing.assert_allclose(with_self, gains @ posterior)
    # uniform: the mean over the others
    assert expected_gain(gains, totals, 0.0)[0] == pytest.approx(gains[0, 1:].mean())
    # far apart totals with a large alpha: no underflow, the best other hypothesis takes all the weight
    far = expected_gain(gains, np.array([0.0, -1e4, -2e4, -3e4, -4e4, -5e4][: len(hypotheses)]), 1.0)
    assert np.isfinite(far).all()
    assert far[0] == pytest.approx(gains[0, 1]) and far[1] == pytest.approx(gains[1, 0])


def test_sentences_stay_apart() -> None:
    """Two sentences scored together: each hypothesis is compared with its own sentence's only."""
    feature = build_feature({"kind": "mbr", "metric": "chrf"})
    first = entries(["un chien noir", "un chien"], [-1.0, -2.0], 0)
    second = entries(["le chat", "la rue .", "le chat ."], [-1.0, -2.0, -3.0], 1)
    together = feature.score_lists([((), first), ((), second)])
    apart = np.vstack([feature.score_lists([((), first)]), feature.score_lists([((), second)])])
    np.testing.assert_array_equal(together, apart)


def test_config() -> None:
    features = build_features([{"kind": "mbr"}, {"kind": "mbr", "metric": "chrf", "alpha": 0}])
    assert [f.name for f in features] == ["MBRbleu0", "MBRchrf0"]
    assert build_feature({"kind": "mbr", "name": "Cons1"}).name == "Cons1"
    with pytest.raises(ConfigError, match="metric must be one of bleu, chrf"):
        build_feature({"kind": "mbr", "metric": "ter"})
    with pytest.raises(ConfigError, match="alpha must be a finite number >= 0"):
        build_feature({"kind": "mbr", "alpha": -1})
    with pytest.raises(RerankError, match="scores whole n-best lists"):
        build_feature({"kind": "mbr"}).score([((), ["un"])])


def test_in_score_nbest(multi30k_slice: dict[str, Path], tmp_path: Path) -> None:
    """Appended like any feature; blocks of sentences give the values of sentences one at a time, and the
    feature beside a pair feature leaves that one's values as they were."""
    output = tmp_path / "mbr.nbest.gz"
    features = build_features([{"kind": "word-penalty"}, {"kind": "mbr"}, {"kind": "mbr", "metric": "chrf"}])
    groups = list(itertools.islice(group_by_sentence(read_nbest(multi30k_slice["nbest"])), 5))
    flat = [e for _, g in groups for e in g]
    score_nbest(flat, output, features, nbest_name="slice", batch_sentences=3)
    scored = list(read_nbest(output))
    assert scored[0].layout.labels[-3:] == ("WP1", "MBRbleu0", "MBRchrf0")
    bleu_feature = features[1]
    assert scores_lists(bleu_feature)
    alone = np.concatenate([bleu_feature.score_lists([((), g)])[:, 0] for _, g in groups])
    np.testing.assert_allclose([e.dense[-2] for e in scored], alone, rtol=1e-5)  # written with 6 digits
    assert [e.dense[-3] for e in scored] == [-len(e.tokens) for e in flat]
    assert with_gzip_lines(output) == len(flat)


def with_gzip_lines(path: Path) -> int:
    with gzip.open(path, "rt", encoding="utf-8") as f:
        return sum(1 for _ in f)


def test_a_total_that_is_not_a_number_is_named() -> None:
    feature = build_feature({"kind": "mbr"})
    read = entries(["un chien", "un chat"], [-1.0, 0.0])
    read[1] = dataclasses.replace(read[1], total=float("nan"))  # as read from a list whose field 4 is nan
    with pytest.raises(RerankError, match="total score nan is not a finite number"):
        feature.score_lists([((), read)])
