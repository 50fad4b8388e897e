"""rerank_nbest: the best hypothesis of every sentence under log-linear weights, the list re-sorted with the new
totals, empty lines for sentences without hypotheses, and bad input refused before anything is written."""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import pytest
from helpers import leftovers

from rerank.errors import FormatError, NonFiniteScore, RerankError
from rerank.formats.nbest import group_by_sentence, read_nbest
from rerank.formats.weights import load_weights
from rerank.rescore.rerank import all_sentences, best_hypothesis, model_scores, rerank_nbest, reranked

LM_ONLY = {"LM0": (1.0,)}


def lines(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8").split("\n")


def test_moses_weights_choose_moses_1best_byte_for_byte(test_data: Path, tmp_path: Path) -> None:
    weights = load_weights(test_data / "weights.yaml")
    rerank_nbest(test_data / "toy.nbest", weights, tmp_path / "out.1best")
    assert (tmp_path / "out.1best").read_bytes() == (test_data / "toy.1best").read_bytes()  # one trailing space kept


def test_the_list_resorted_with_the_new_totals(test_data: Path, tmp_path: Path) -> None:
    original = (test_data / "toy.nbest").read_text(encoding="utf-8").splitlines()
    rerank_nbest(test_data / "toy.nbest", LM_ONLY, tmp_path / "out.1best", nbest_out=tmp_path / "out.nbest",
                 missing=0.0)
    assert lines(tmp_path / "out.1best") == [
        "un homme avec un chapeau orange regarde quelque chose . ",
        "un terrier boston luxuriante court sur l&apos; herbe verte devant une clôture blanche . ",
        "une fille en tenue de karaté brisant un bâton avec devant un coup de pied . ", ""]
    resorted = lines(tmp_path / "out.nbest")
    order = [1, 0, 2, 5, 3, 4, 6, 7, 8]  # by LM0, highest first
    totals = ["-21.2311", "-22.4525", "-30.0088", "-60.6031", "-61.2997", "-65.4187", "-55.5931", "-55.7748",
              "-55.8551"]
    assert resorted == [original[i].rsplit("|||", 1)[0] + f"||| {total}" for i, total in zip(order, totals,
                                                                                             strict=True)] + [""]
    assert leftovers(tmp_path) == []


def test_every_sentence_of_the_source_gets_a_line(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    nbest = tmp_path / "gaps.nbest"
    nbest.write_text("1 ||| b ||| F0= 1 ||| 0\n3 ||| d ||| F0= 1 ||| 0\n", encoding="utf-8")
    with caplog.at_level(logging.WARNING, logger="rerank.rescore.rerank"):
        rerank_nbest(nbest, {"F0": (1.0,)}, tmp_path / "out", num_sentences=5)
    assert lines(tmp_path / "out") == ["", "b", "", "d", "", ""]
    assert "3 sentences have no hypotheses in" in caplog.text


def test_an_id_beyond_the_source_is_an_error_naming_its_line(tmp_path: Path) -> None:
    nbest = tmp_path / "long.nbest"
    nbest.write_text("0 ||| a ||| F0= 1 ||| 0\n2 ||| c ||| F0= 1 ||| 0\n", encoding="utf-8")
    with pytest.raises(FormatError) as error:
        rerank_nbest(nbest, {"F0": (1.0,)}, tmp_path / "out", num_sentences=2, source_name="src.en")
    assert str(error.value) == f"{nbest}:2: expected a sentence id below 2, the number of lines of src.en, got '2'"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["long.nbest"]


def test_an_empty_list_is_refused(tmp_path: Path) -> None:
    (tmp_path / "empty.nbest").write_text("", encoding="utf-8")
    with pytest.raises(FormatError) as error:
        rerank_nbest(tmp_path / "empty.nbest", {"F0": (1.0,)}, tmp_path / "out")
    assert str(error.value) == f"{tmp_path / 'empty.nbest'}: expected at least one hypothesis, got 'an empty n-best " \
                               "list'"


def test_weights_must_fit_the_list(test_data: Path, tmp_path: Path) -> None:
    with pytest.raises(RerankError, match=r"^w\.yaml: no weight for the n-best features Distortion0, WordPenalty0, "
                                          r"PhrasePenalty0, TranslationModel0; add them"):
        rerank_nbest(test_data / "toy.nbest", LM_ONLY, tmp_path / "out", weights_name="w.yaml")
    with pytest.raises(RerankError, match=r"^w\.yaml: weights for features the n-best list does not have: LM9"):
        rerank_nbest(test_data / "toy.nbest", {"LM9": (1.0,)}, tmp_path / "out", weights_name="w.yaml", missing=0)
    assert list(tmp_path.iterdir()) == []


def test_known_picks_the_weights_from_the_lists_layout(test_data: Path, tmp_path: Path) -> None:
    weights = {"LM0": (1.0,), "UnknownWordPenalty0": (1.0,)}
    rerank_nbest(test_data / "toy.nbest", weights, tmp_path / "out", missing=0.0,
                 known=lambda layout: {k: v for k, v in weights.items() if k in layout.labels})
    assert lines(tmp_path / "out")[0] == "un homme avec un chapeau orange regarde quelque chose . "


def test_zero_weights_keep_the_first_hypothesis_with_a_warning_unless_meant(
        test_data: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="rerank.rescore.rerank"):
        rerank_nbest(test_data / "toy.nbest", {"LM0": (0.0,)}, tmp_path / "a", missing=0.0, weights_name="zero")
        assert "zero: every weight of the features of" in caplog.text
        caplog.clear()
        rerank_nbest(test_data / "toy.nbest", {"LM0": (0.0,)}, tmp_path / "b", missing=0.0, keep_first=True)
        assert caplog.text == ""
    assert (tmp_path / "a").read_bytes() == (tmp_path / "b").read_bytes() == (test_data / "toy.1best").read_bytes()


def test_an_overflowing_score_stops_the_run_and_names_the_line(tmp_path: Path) -> None:
    nbest = tmp_path / "big.nbest"
    nbest.write_text("0 ||| a ||| F0= 1 ||| 0\n0 ||| b ||| F0= 1e300 ||| 0\n", encoding="utf-8")
    for resorted in (None, tmp_path / "out.nbest"):
        with pytest.raises(NonFiniteScore) as error:
            rerank_nbest(nbest, {"F0": (1e10,)}, tmp_path / "out", nbest_out=resorted)
        assert str(error.value).startswith(f"{nbest}: line 2 (sentence 0): the total score is inf, not a finite "
                                           "number; nothing was written")
        assert sorted(p.name for p in tmp_path.iterdir()) == ["big.nbest"]


def test_sparse_features_are_left_out_with_a_warning(test_data: Path, tmp_path: Path,
                                                     caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="rerank.rescore.rerank"):
        rerank_nbest(test_data / "sparse.nbest", LM_ONLY, tmp_path / "out", missing=0.0)
    assert "1 sentence has sparse features in" in caplog.text and "only dense features are scored" in caplog.text
    assert lines(tmp_path / "out") == ["in Libyen der Sieg ", ""]  # the highest LM0, -33.451


def test_scores_ranks_and_best_of_a_group(test_data: Path) -> None:
    group = next(group_by_sentence(read_nbest(test_data / "toy.nbest")))[1]
    weights = np.array([0, 1, 0, 0, 0, 0, 0, 0.0])  # LM0
    np.testing.assert_array_equal(model_scores(group, weights), [-22.4525, -21.2311, -30.0088])
    assert [e.line().rsplit("||| ", 1)[1] for e in reranked(group, weights)] == ["-21.2311", "-22.4525", "-30.0088"]
    assert best_hypothesis(group, weights) is group[1]
    # equal scores: the first in the file, in both
    assert best_hypothesis(group, np.zeros(8)) is group[0]
    assert [e.tokens for e in reranked(group, np.zeros(8))] == [e.tokens for e in group]


def test_all_sentences_fills_the_gaps(tmp_path: Path) -> None:
    nbest = tmp_path / "gaps.nbest"
    nbest.write_text("1 ||| b ||| F0= 1 ||| 0\n3 ||| d ||| F0= 1 ||| 0\n", encoding="utf-8")
    filled = list(all_sentences(group_by_sentence(read_nbest(nbest)), num_sentences=None, nbest_name="x"))
    assert [(i, [e.hypothesis for e in group]) for i, group in filled] == [(0, []), (1, ["b"]), (2, []), (3, ["d"])]
    filled = list(all_sentences(group_by_sentence(read_nbest(nbest)), num_sentences=6, nbest_name="x"))
    assert [i for i, group in filled if not group] == [0, 2, 4, 5]
    with pytest.raises(FormatError, match=r"^x:2: expected a sentence id below 3, the number of lines of s, got '3'"):
        list(all_sentences(group_by_sentence(read_nbest(nbest)), num_sentences=3, nbest_name="x", source_name="s"))
