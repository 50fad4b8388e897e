"""The epoch plan of a prepared corpus: batches by tokens fill each batch up to a budget of padded tokens, cover
every pair once an epoch and are found again after a restart; without a budget, batches of ``batch_size`` pairs."""

from __future__ import annotations

import numpy as np
import pytest

from rerank.training.prepared import EpochPlan, PreparedCorpus


def padded_tokens(corpus: PreparedCorpus, batch: np.ndarray) -> int:
    src, trg = corpus.lengths(batch)
    return len(batch) * int(np.maximum(src, trg).max() + 1)


@pytest.mark.parametrize("pool_pairs", [10_000, 120])  # one pool; pools of 3 blocks of 40 pairs
def test_token_batches_cover_the_epoch_within_budget_and_are_found_again(token_corpus: PreparedCorpus,
                                                                          pool_pairs: int) -> None:
    plan = EpochPlan(token_corpus, 8, 5, pool_pairs, seed=3, epoch=1, batch_tokens=200)
    batches = [plan[b] for b in range(len(plan))]
    assert np.array_equal(np.sort(np.concatenate(batches)), np.arange(len(token_corpus)))
    assert all(padded_tokens(token_corpus, b) <= 200 for b in batches)
    sizes = [len(b) for b in batches]
    assert max(sizes) > 8 and min(sizes) < max(sizes)  # more pairs than batch_size where they are short
    # full: one more pair of the batch's sort window would not have fitted
    assert np.mean([padded_tokens(token_corpus, b) for b in batches]) > 150
    again = EpochPlan(token_corpus, 8, 5, pool_pairs, seed=3, epoch=1, batch_tokens=200)
    for b in (len(plan) - 1, 0, len(plan) // 2):  # in any order, as a resumed run asks
        assert np.array_equal(again[b], batches[b])
    other = EpochPlan(token_corpus, 8, 5, pool_pairs, seed=4, epoch=1, batch_tokens=200)
    assert not all(np.array_equal(other[b], batches[b]) for b in range(5))


def test_without_a_budget_the_batches_are_those_of_batch_size(token_corpus: PreparedCorpus) -> None:
    plan = EpochPlan(token_corpus, 8, 5, 120, seed=3, epoch=1)
    assert {len(plan[b]) for b in range(len(plan))} == {8}  # 40-pair blocks: no short batch
