"""Moses n-best lists: byte-identical round trips of real files, parsing, appending features, bad lines."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest
from helpers import content

from rerank.errors import FormatError
from rerank.formats.nbest import (
    FeatureLayout,
    NBestEntry,
    check_label,
    format_value,
    group_by_sentence,
    read_nbest,
    write_nbest,
)

REGRESSION_NBEST = [f"tests/mert.extractor-txt/data/nbest.{i}.gz" for i in range(1, 6)] + \
    ["tests/misc.binarize-compress-pt/truth/results.txt"]


@pytest.mark.parametrize("name", REGRESSION_NBEST)
def test_round_trip_regression_files(regression_slice: Path, tmp_path: Path, name: str) -> None:
    path = regression_slice / name
    out = tmp_path / Path(name).name
    assert write_nbest(read_nbest(path), out) == content(path).count(b"\n")
    assert content(out) == content(path)


def test_round_trip_multi30k_slice(multi30k_slice: dict[str, Path], tmp_path: Path) -> None:
    path = multi30k_slice["nbest"]
    out = tmp_path / "test.100best.gz"
    assert write_nbest(read_nbest(path), out) == 1310
    assert content(out) == content(path)


def test_round_trip_multi30k_test_100best(multi30k_moses: Path, tmp_path: Path) -> None:
    """The whole list, 1,000 sentences."""
    path = multi30k_moses / "nbest" / "test_2016_flickr.100best.gz"
    out = tmp_path / "test.100best.gz"
    assert write_nbest(read_nbest(path), out) == 64736
    assert content(out) == content(path)


def test_round_trip_segmentation_and_alignment_fields(regression_slice: Path, tmp_path: Path) -> None:
    """Moses' 6-field lines (segmentation, word alignment), unwrapped from the regression test's output."""
    wrapped = (regression_slice / "tests/phrase.nbest-with-alignment/truth/results.txt").read_text(encoding="utf-8")
    lines = ["0 ||| " + line.split("=", 1)[1] for line in wrapped.splitlines()
             if line.startswith("TRANSLATION_0_NBEST")]
    path = tmp_path / "aligned.nbest"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    entries = list(read_nbest(path))
    assert [len(e.fields) for e in entries] == [6] * 5
    assert entries[0].layout.labels == ("IRSTLM0", "Distortion0", "WordPenalty0", "PhraseDictionaryMemory0")
    assert entries[0].total == -549.862
    assert entries[0].fields[5] == " 0-0 1-1 2-2 3-3 4-4 5-5 6-6 7-7 8-8 "
    write_nbest(entries, tmp_path / "out.nbest")
    assert (tmp_path / "out.nbest").read_bytes() == path.read_bytes()


def test_old_short_labels_without_space_after_id(regression_slice: Path) -> None:
    entry = next(read_nbest(regression_slice / "tests/mert.extractor-txt/data/nbest.1.gz"))
    assert entry.fields[0] == "0"
    assert entry.layout == FeatureLayout(("d", "lm", "tm", "w"), (7, 1, 5, 1))
    assert entry.dense[7:9] == (-47.2982, -36.7163)
    assert entry.hypothesis == "mr president , we shall be in biarritz , look a little further . "
    assert entry.tokens[:2] == ["mr", "president"]


def test_modern_labels(test_data: Path) -> None:
    entries = list(read_nbest(test_data / "toy.nbest"))
    first = entries[0]
    assert first.layout.labels == ("Distortion0", "LM0", "WordPenalty0", "PhrasePenalty0", "TranslationModel0")
    assert first.layout.sizes == (1, 1, 1, 1, 4)
    assert first.layout.offsets()["TranslationModel0"] == slice(4, 8)
    assert first.layout.columns()[-1] == "TranslationModel0_3"
    assert first.dense == (0, -22.4525, -11, 6, -9.04917, -13.0221, -4.22629, -12.8201)
    assert first.total == -3.67449
    assert first.lineno == 1
    assert all(e.layout is first.layout for e in entries)  # one layout object for the whole file


def test_hypothesis_is_moses_one_best_text(test_data: Path) -> None:
    firsts = [group[0].hypothesis for _, group in group_by_sentence(read_nbest(test_data / "toy.nbest"))]
    assert [line + "\n" for line in firsts] == (test_data / "toy.1best").read_text().splitlines(keepends=True)


def test_sparse_features(test_data: Path) -> None:
    entries = list(read_nbest(test_data / "sparse.nbest"))
    assert entries[0].layout.labels == ("Distortion0", "LM0", "LexicalReordering0", "TranslationModel0",
                                        "WordPenalty0")
    assert entries[0].layout.sizes == (1, 1, 6, 12, 1)
    assert entries[0].sparse == {"TranslationModel0_dom_nc-5k": 3, "pl_1,1": 3, "pl_s1": 3, "pl_t1": 3}
    assert entries[3].sparse["pl_1,2"] == 1  # sparse features may differ from line to line


def test_group_by_sentence(test_data: Path) -> None:
    groups = list(group_by_sentence(read_nbest(test_data / "toy.nbest")))
    assert [(sid, len(g)) for sid, g in groups] == [(0, 3), (1, 3), (2, 3)]


def test_with_features_appends_and_keeps_every_other_byte(test_data: Path) -> None:
    entry = next(read_nbest(test_data / "toy.nbest"))
    layout = entry.layout.extended(["LM1", "WP1"], [2, 1])
    added = entry.with_features([("LM1", [-22.45251234, 1.0]), ("WP1", [-11.0])], layout)
    assert added.line() == entry.line().replace("-12.8201 |||", "-12.8201 LM1= -22.4525 1 WP1= -11 |||")
    assert added.dense == entry.dense + (-22.45251234, 1.0, -11.0)
    assert added.layout is layout
    assert added.total == entry.total and added.lineno == entry.lineno


@pytest.mark.parametrize("line, added", [
    ("0||| a b  ||| w= -2 ||| -1", "0||| a b  ||| w= -2 WP1= -2 ||| -1"),
    ("1 ||| c |||||| 0", "1 ||| c ||| WP1= -2 ||| 0"),
    ("1 ||| c ||| ||| 0", "1 ||| c ||| WP1= -2 ||| 0"),
])
def test_with_features_on_old_and_empty_feature_fields(tmp_path: Path, line: str, added: str) -> None:
    path = tmp_path / "n"
    path.write_text(line + "\n")
    entry = next(read_nbest(path))
    layout = entry.layout.extended(["WP1"], [1])
    assert entry.with_features([("WP1", [-2])], layout).line() == added


def test_with_total(tmp_path: Path, test_data: Path) -> None:
    entry = next(read_nbest(test_data / "toy.nbest"))
    assert entry.with_total(-1.5).line().endswith("-12.8201 ||| -1.5")
    path = tmp_path / "six"
    path.write_text("0 ||| a  ||| w= -1 ||| -3 ||| 0=0 ||| 0-0 \n")
    six = next(read_nbest(path))
    assert six.with_total(2.0).line() == "0 ||| a  ||| w= -1 ||| 2 ||| 0=0 ||| 0-0 "
    assert six.with_total(2.0).total == 2.0


@pytest.mark.parametrize("value, text", [(-22.45251234, "-22.4525"), (-11.0, "-11"), (-0.0, "0"), (0.0, "0"),
                                         (1234567.0, "1.23457e+06"), (2.5e-5, "2.5e-05")])
def test_format_value_as_moses(value: float, text: str) -> None:
    assert format_value(value) == text


@pytest.mark.parametrize("label", ["LM1", "RNNsearch0", "WP1", "a"])
def test_check_label_accepts(label: str) -> None:
    assert check_label(label) == label


@pytest.mark.parametrize("label", ["RNN_score", "1LM", "LM-1", "", "LM 1"])
def test_check_label_rejects(label: str) -> None:
    with pytest.raises(ValueError, match="letter followed by letters and digits"):
        check_label(label)


GOOD = "0 ||| a b  ||| LM0= -3.5 TM0= -1 -2 ||| -4\n"
BAD_LINES = [
    ("0 ||| a b  ||| LM0= -3.5 TM0= -1 -2\n", r"4 to 6 fields separated by '\|\|\|'.*found 3"),
    ("0 ||| a ||| LM0= -3 TM0= -1 -2 ||| -4 ||| x ||| y ||| z\n", "found 7"),
    ("0 ||| a b  ||| LM0= -3.5 TM0= -1 x ||| -4\n", r"a number after 'TM0='.*got 'x'"),
    ("0 ||| a b  ||| LM0= -3.5 TM0= -1 -2 ||| best\n", r"a number \(the total score\) in field 4"),
    ("0 ||| a b  ||| LM0= -3.5 TM0= -1 -2 -3 ||| -4\n", "2 values after 'TM0=', as on the first line, got '3 values'"),
    ("0 ||| a b  ||| TM0= -1 -2 LM0= -3.5 ||| -4\n", "the dense feature 'LM0=' in position 1, as on the first line, "
                                                    "got 'TM0='"),
    ("0 ||| a b  ||| LM0= -3.5 ||| -4\n", "the dense feature 'TM0=' after 'LM0=', as on the first line, "
                                          "got 'no more dense features'"),
    ("0 ||| a b  ||| ||| -4\n", "the dense feature 'LM0=' first, as on the first line"),
    ("0 ||| a b  ||| LM0= -3.5 TM0= -1 -2 LM1= 0 ||| -4\n", "no dense feature after 'TM0=', as on the first line, "
                                                            "got 'LM1='"),
    ("0 ||| a b  ||| LM0= -3.5 TM0= -1 -2 x_y= 1 ||| -4\n", None),  # sparse features may come and go
    ("1 ||| a ||| LM0= -3 TM0= -1 -2 ||| 0\n0 ||| a ||| LM0= -3 TM0= -1 -2 ||| 0\n",
     r"sentence ids in increasing order \(after 1\)"),
    ("x ||| a ||| LM0= -3 TM0= -1 -2 ||| 0\n", r"a sentence id \(a non-negative integer\)"),
    ("-1 ||| a ||| LM0= -3 TM0= -1 -2 ||| 0\n", "a sentence id"),
    ("² ||| a ||| LM0= -3 TM0= -1 -2 ||| 0\n", "a sentence id"),
    ("0 ||| a ||| -3 LM0= TM0= -1 -2 ||| 0\n", r"a feature label \('Name='\) before the first value"),
    ("0 ||| a ||| LM0= TM0= -1 -2 ||| 0\n", "at least one value after 'LM0='"),
    ("0 ||| a ||| LM0= -3 TM0= -1 -2 x_y= 1 2 ||| 0\n", "one value for the sparse feature 'x_y='"),
    ("0 ||| a ||| LM0= -3 TM0= -1 -2 x_y= ||| 0\n", "a value after the sparse feature 'x_y='"),
]


@pytest.mark.parametrize("bad, message", BAD_LINES)
def test_bad_lines(tmp_path: Path, bad: str, message: str | None) -> None:
    path = tmp_path / "bad.nbest"
    path.write_text(GOOD + bad, encoding="utf-8")
    if message is None:
        assert len(list(read_nbest(path))) == 2
        return
    with pytest.raises(FormatError, match=message) as error:
        list(read_nbest(path))
    assert error.value.path == str(path)
    assert error.value.lineno == 2 + bad.count("\n") - 1


def test_bad_line_in_gzip_and_crlf(tmp_path: Path) -> None:
    path = tmp_path / "bad.nbest.gz"
    path.write_bytes(gzip.compress((GOOD + GOOD.replace("\n", "\r\n")).encode()))
    with pytest.raises(FormatError, match=r"bad.nbest.gz:2: expected Unix line ends"):
        list(read_nbest(path))


def test_reads_lazily(tmp_path: Path) -> None:
    """The reader is a stream: a bad last line is not seen before the first entries are used."""
    path = tmp_path / "late.nbest"
    path.write_text(GOOD * 3 + "broken\n")
    entries = read_nbest(path)
    assert next(entries).lineno == 1
    with pytest.raises(FormatError, match="late.nbest:4"):
        list(entries)


def test_a_built_nbest_entry_is_a_moses_line_that_reads_back(tmp_path: Path) -> None:
    entries = [NBestEntry.build(0, ["un", "chat"], [("RNNsearch0", [-1.23456789])], -1.23456789),
               NBestEntry.build(0, [], [("RNNsearch0", [-0.5])], -0.5),
               NBestEntry.build(1, ["x"], [("RNNsearch0", [-10.0])], -10.0)]
    assert entries[0].line() == "0 ||| un chat ||| RNNsearch0= -1.23457 ||| -1.23457"
    path = tmp_path / "out.nbest"
    path.write_text("".join(e.line() + "\n" for e in entries))
    back = list(read_nbest(path))
    assert [e.hypothesis for e in back] == ["un chat", "", "x"]
    assert [e.dense for e in back] == [(-1.23457,), (-0.5,), (-10.0,)]
    assert [e.total for e in back] == [-1.23457, -0.5, -10.0]
