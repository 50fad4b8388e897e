"""Length buckets for BLEU by sentence length, and corpus scores against sacrebleu itself."""

from __future__ import annotations

from pathlib import Path

import pytest
from sacrebleu.metrics import BLEU, CHRF

from rerank.evaluation.metrics import check_bucket_scheme, evaluate, format_evaluation, length_buckets


@pytest.mark.parametrize("lengths, scheme, expected", [
    ([1, 5, 10, 11, 25], "10", [("1-10", (0, 1, 2)), ("11-20", (3,)), ("21-30", (4,))]),
    ([0, 3], "10", [("0-10", (0, 1))]),
    ([12, 3, 30], "5", [("1-5", (1,)), ("11-15", (0,)), ("26-30", (2,))]),  # empty buckets left out
    (list(range(1, 11)), "quintiles", [("1-2", (0, 1)), ("3-4", (2, 3)), ("5-6", (4, 5)), ("7-8", (6, 7)),
                                       ("9-10", (8, 9))]),
    ([3, 3, 3, 3, 9], "quintiles", [("3", (0, 1, 2, 3)), ("4-9", (4,))]),  # equal lengths share a bucket
    ([], "quartiles", []),
])
def test_length_buckets(lengths: list[int], scheme: str, expected: list) -> None:
    assert [(b.label, b.indices) for b in length_buckets(lengths, scheme)] == expected


def test_every_sentence_in_exactly_one_bucket() -> None:
    lengths = [(i * 7919) % 37 for i in range(500)]
    for scheme in ("1", "7", "quartiles", "quintiles", "deciles"):
        indices = [i for bucket in length_buckets(lengths, scheme) for i in bucket.indices]
        assert sorted(indices) == list(range(500))
        for bucket in length_buckets(lengths, scheme):
            assert all(bucket.low <= lengths[i] <= bucket.high for i in bucket.indices)


@pytest.mark.parametrize("scheme", ["0", "-3", "halves", "10.5"])
def test_bad_bucket_scheme(scheme: str) -> None:
    with pytest.raises(ValueError, match="expected a bucket width in words"):
        check_bucket_scheme(scheme)


def test_scores_are_sacrebleus(multi30k_slice: dict[str, Path]) -> None:
    hyps = multi30k_slice["onebest"].read_text().splitlines()
    refs = multi30k_slice["reference"].read_text().splitlines()
    result = evaluate([("moses", str(multi30k_slice["onebest"]))], [str(multi30k_slice["reference"])],
                      source=str(multi30k_slice["source"]), buckets="quintiles", tokenize="13a", lowercase=True)
    system = result.systems[0]
    assert system.bleu == BLEU(lowercase=True).corpus_score(hyps, [refs]).score
    assert system.chrf == CHRF(lowercase=True).corpus_score(hyps, [refs]).score
    first = result.buckets[0]
    assert system.bucket_bleu[0] == BLEU(lowercase=True).corpus_score([hyps[i] for i in first.indices],
                                                                      [[refs[i] for i in first.indices]]).score
    assert "case:lc" in result.bleu_signature
    text = format_evaluation(result)
    assert f"moses   {system.bleu:6.2f}  {system.chrf:6.2f}" in text  # the name padded to "system"
    assert "BLEU by source length" in text
