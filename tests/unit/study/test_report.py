"""The study's results table: the cross-validated BLEU beside dev's, mean ± sd over seeds, with the folds' spread."""

from __future__ import annotations

from rerank.study.report import Score, table_row


def test_the_cv_column_follows_dev_with_the_spread_over_seeds_and_folds():
    score = Score(dev=[61.0, 61.2], test=[62.0, 62.4])
    score.add_cv({"bleu": 60.1, "fold_sd": 1.0})
    score.add_cv({"bleu": 60.3, "fold_sd": 1.4})
    row = table_row("all", {"mert": score}, ["mert"], {"dev": 70.0, "test": 71.0}, cv=True)
    assert row == "| all | 61.10 ± 0.14 | 60.20 ± 0.14 (folds ± 1.20) | 62.20 ± 0.28 | 70.00 / 71.00 |"
    assert table_row("all", {"mert": score}, ["mert"]) == "| all | 61.10 ± 0.14 | 62.20 ± 0.28 |  |"


def test_a_row_without_cross_validation_leaves_the_cell_blank():
    row = table_row("Moses", {"mert": Score([59.0], [61.0])}, ["mert", "pro"], cv=True)
    assert row == "| Moses | 59.00 |  | 61.00 |  |  |"
