"""Batches by tokens: each batch within its budget of padded tokens, one longer than the budget alone."""

from __future__ import annotations

import numpy as np
import pytest

from rerank.models.batching import token_batches


@pytest.mark.parametrize("lengths,max_tokens,expected", [
    ([5, 5, 4, 2, 2, 1], 10, [[0, 1], [2, 3], [4, 5]]),
    ([30, 3, 3], 10, [[0], [1, 2]]),  # longer than the budget: a batch of its own
    ([1, 1, 1], 100, [[0, 1, 2]]),
])
def test_token_batches_respect_the_token_budget(lengths: list[int], max_tokens: int,
                                                 expected: list[list[int]]) -> None:
    order = np.arange(len(lengths))
    assert [b.tolist() for b in token_batches(order, np.array(lengths), max_tokens)] == expected
