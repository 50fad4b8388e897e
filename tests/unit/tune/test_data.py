"""n-best lists as tuning arrays: merging across files, and clear errors for bad input."""

from __future__ import annotations

import gzip

import numpy as np
import pytest

from rerank.errors import FormatError
from rerank.formats.files import read_text
from rerank.formats.nbest import FeatureLayout, read_nbest
from rerank.tune.data import NBestPool, aligned_weights
from rerank.tune.stats import BleuStatistics

LINES = [
    "0 ||| a b c ||| LM0= -1 TM0= -2 -3 ||| -6",
    "0 ||| a b ||| LM0= -2 TM0= -1 -1 ||| -4",
    "1 ||| d e ||| LM0= -1 TM0= -1 -4 ||| -6",
]


def write(path, lines):
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return path


def pool(references=("a b c", "d e f")) -> NBestPool:
    return NBestPool(BleuStatistics([list(references)]), reference_name="ref.txt")


@pytest.fixture
def regression_nbest(regression_slice):
    data = regression_slice / "tests/mert.extractor-txt/data"
    return data, read_text(data / "reference")


def test_arrays_hold_features_and_statistics(tmp_path):
    p = pool()
    first = p.add(write(tmp_path / "a.nbest", LINES))
    data = p.data()
    assert data.features.shape == (2, 2, 3) and list(data.counts) == [2, 1]
    assert list(first) == [0, 0]
    assert data.features[0, 1].tolist() == [-2, -1, -1]
    assert data.features[1, 1].tolist() == [0, 0, 0] and not data.valid[1, 1]  # padding
    assert data.stats[0, 0, 2] == 3  # a b c: 3 unigram matches


def test_the_same_hypothesis_in_several_files_is_merged(regression_nbest):
    data, refs = regression_nbest
    p = NBestPool(BleuStatistics([refs]))
    p.add(data / "nbest.1.gz")
    size = p.size
    p.add(data / "nbest.1.gz")
    assert p.size == size  # nothing new
    p.add(data / "nbest.2.gz")
    distinct = {(e.sentence_id, " ".join(e.tokens), e.dense)
                for name in ("nbest.1.gz", "nbest.2.gz") for e in read_nbest(data / name)}
    assert p.size == len(distinct) < 2000
    assert p.data().counts.sum() == len(distinct)


def test_first_hypothesis_of_each_file_is_reported(tmp_path):
    p = pool()
    p.add(write(tmp_path / "a", LINES))
    first = p.add(write(tmp_path / "b", ["0 ||| x ||| LM0= 0 TM0= 0 0 ||| 0", LINES[0], LINES[2]]))
    assert list(first) == [2, 0]  # the new hypothesis of sentence 0 is its third; sentence 1's is known


def test_best_is_the_first_of_equal_scores(tmp_path):
    p = pool()
    p.add(write(tmp_path / "a", LINES))
    data = p.data()
    assert list(data.best(np.zeros(3))) == [0, 0]
    assert list(data.best(np.array([1.0, 0, 0]))) == [0, 0]


def test_feature_count_differing_from_the_first_line(tmp_path):
    path = write(tmp_path / "bad.nbest", [LINES[0], "0 ||| a ||| LM0= -1 TM0= -2 ||| -3", LINES[2]])
    with pytest.raises(FormatError, match=r"bad.nbest:2: expected .*TM0=.*first line"):
        pool().add(path)


def test_more_sentences_than_reference_lines(tmp_path):
    path = write(tmp_path / "n", [*LINES, "2 ||| g ||| LM0= 0 TM0= 0 0 ||| 0"])
    with pytest.raises(FormatError, match=r"n:4: expected sentence ids below 2, as ref.txt has 2 lines"):
        pool().add(path)


def test_fewer_sentences_than_reference_lines(tmp_path):
    path = write(tmp_path / "n", LINES)
    with pytest.raises(FormatError, match=r"n:3: expected hypotheses for 3 sentences, one per line of ref.txt, "
                                          r"got '2 sentences'"):
        pool(("a", "b", "c")).add(path)


def test_a_sentence_without_hypotheses(tmp_path):
    path = write(tmp_path / "n", [LINES[0], "2 ||| g ||| LM0= 0 TM0= 0 0 ||| 0"])
    with pytest.raises(FormatError, match=r"n:2: expected hypotheses for sentence 1 before sentence 2"):
        pool(("a", "b", "c")).add(path)


def test_an_empty_nbest_list(tmp_path):
    with pytest.raises(FormatError, match=r"empty: expected hypotheses for 2 sentences"):
        pool().add(write(tmp_path / "empty", []))


def test_other_features_than_the_first_file(tmp_path):
    p = pool()
    p.add(write(tmp_path / "a", LINES))
    other = [line.replace("TM0=", "TM1=") for line in LINES]
    with pytest.raises(FormatError, match=r"b:1: expected the same dense features as .*a: LM0=\(1\) TM0=\(2\)"):
        p.add(write(tmp_path / "b", other))


def test_gzipped_lists_are_read(tmp_path):
    path = tmp_path / "a.gz"
    path.write_bytes(gzip.compress("".join(line + "\n" for line in LINES).encode()))
    assert pool().add(path).shape == (2,)


LAYOUT = FeatureLayout(("LM0", "TM0"), (1, 2))


def test_weights_file_naming_features_the_nbest_does_not_have(tmp_path):
    path = tmp_path / "w.yaml"
    path.write_text("LM0: 0.5\nTM0: [0.1, 0.2]\nRNN0: 0.3\n")
    with pytest.raises(FormatError, match=r"w.yaml:3: expected weights for features of the n-best list "
                                          r"\(LM0, TM0\), got 'RNN0'"):
        aligned_weights({"LM0": (0.5,), "TM0": (0.1, 0.2), "RNN0": (0.3,)}, LAYOUT, path)


def test_moses_ini_may_weight_features_moses_does_not_print(tmp_path):
    ini = tmp_path / "moses.ini"
    ini.write_text("[weight]\nLM0= 0.5\nTM0= 0.1 0.2\nUnknownWordPenalty0= 1\n")
    vector = aligned_weights({"LM0": (0.5,), "TM0": (0.1, 0.2), "UnknownWordPenalty0": (1.0,)}, LAYOUT, ini)
    assert vector.tolist() == [0.5, 0.1, 0.2]


def test_a_feature_without_weight_starts_at_zero(tmp_path):
    assert aligned_weights({"LM0": (0.5,)}, LAYOUT, tmp_path / "w.yaml").tolist() == [0.5, 0, 0]
