"""The study's results table: the cross-validated BLEU beside dev's, mean ± sd over seeds, with the folds' spread;
the row it chooses."""

from __future__ import annotations

from rerank.study.report import Score, choice_line, chosen_rows, table_row


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


def scored(dev: float, cv: float | None, test: float) -> Score:
    score = Score(dev=[dev], test=[test])
    if cv is not None:
        score.add_cv({"bleu": cv, "fold_sd": 0.5})
    return score


def test_the_cv_bleu_chooses_the_row_and_names_the_one_dev_would_have_chosen():
    scores = {"Moses features": scored(60.0, 59.0, 61.0), "all": scored(62.5, 59.4, 62.0),
              "union": scored(61.0, 59.8, 61.5), "RNNsearch alone": scored(70.0, None, 70.0)}
    assert chosen_rows(scores) == ("union", "all")  # RNNsearch alone, without CV figures, is no candidate
    assert choice_line(scores, 5, "mert") == ("Chosen by the 5-fold CV BLEU (MERT): union (CV 59.80, test 61.50); "
                                              "dev alone would have chosen all (CV 59.40).")


def test_a_tie_goes_to_the_earlier_row_and_an_agreeing_dev_is_not_named():
    scores = {"first": scored(61.0, 59.4, 60.0), "second": scored(61.0, 59.4, 63.0), "third": scored(60.0, 59.0, 64.0)}
    assert chosen_rows(scores) == ("first", "first")
    assert choice_line(scores, 3, "pro") == "Chosen by the 3-fold CV BLEU (PRO): first (CV 59.40, test 60.00)."


def test_means_over_seeds_choose_and_rows_without_cv_choose_nothing():
    steady, lucky = Score(dev=[61.0, 61.0], test=[62.0, 62.0]), Score(dev=[60.0, 63.0], test=[62.0, 62.0])
    steady.add_cv({"bleu": 60.0, "fold_sd": 1.0})
    steady.add_cv({"bleu": 60.0, "fold_sd": 1.0})
    lucky.add_cv({"bleu": 61.5, "fold_sd": 1.0})
    lucky.add_cv({"bleu": 58.0, "fold_sd": 1.0})
    assert chosen_rows({"lucky": lucky, "steady": steady}) == ("steady", "lucky")
    no_cv = {"Moses": scored(59.0, None, 61.0), "all": scored(61.0, None, 62.0)}
    assert chosen_rows(no_cv) is None
    assert choice_line(no_cv, 0, "mert") is None
