"""Reading parallel data: token cuts that fill their budget and keep every item."""

from __future__ import annotations

import numpy as np

from rerank.training.data import token_cuts


def test_cuts_fill_the_budget_and_keep_every_item() -> None:
    sizes = np.array([3, 3, 4, 9, 2, 30, 5, 5, 5, 5])
    cuts = token_cuts(sizes, 12)
    assert [sizes[c].tolist() for c in cuts] == [[3, 3, 4], [9], [2], [30], [5, 5], [5, 5]]
    assert cuts[0].start == 0 and all(a.stop == b.start for a, b in zip(cuts, cuts[1:], strict=False))
