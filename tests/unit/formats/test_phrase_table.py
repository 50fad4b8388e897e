"""Moses phrase tables: byte-identical round trips of real 3-, 5- and 7-field tables, appending a score, bad lines."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest
from helpers import content

from rerank.errors import FormatError
from rerank.formats.phrase_table import read_phrase_table, write_phrase_table

# (table, lines, fields): the slices in tests/data have the first lines of each table
REGRESSION_TABLES = [
    ("models/ptable-with-alignment/phrase-table", 100, 5),
    ("tests/misc.binarize-compress-pt/phrase-table.0-0.1.1.gz", 200, 5),
    ("models/lexicalized-reordering/phrase-table.0-0.gz", 200, 3),
    ("models/lexicalized-reordering/reordering-table.msd-bidirectional-fe.0.5.0-0.gz", 200, 3),
    ("tests/misc.binarize-compress-pt/reordering-table.0-0.wbe-msd-bidirectional-fe.gz", 200, 3),
]
WHOLE_TABLE_LINES = {"models/ptable-with-alignment/phrase-table": 4813,
                     "tests/misc.binarize-compress-pt/phrase-table.0-0.1.1.gz": 1391,
                     "models/lexicalized-reordering/phrase-table.0-0.gz": 41915,
                     "models/lexicalized-reordering/reordering-table.msd-bidirectional-fe.0.5.0-0.gz": 41915,
                     "tests/misc.binarize-compress-pt/reordering-table.0-0.wbe-msd-bidirectional-fe.gz": 1391}
LATIN1_TABLE = "models/basic-surface-only/phrase-table.gz"


@pytest.mark.parametrize("name, lines, fields", REGRESSION_TABLES)
def test_round_trip_regression_tables(regression_slice: Path, tmp_path: Path, name: str, lines: int,
                                      fields: int) -> None:
    path = regression_slice / name
    out = tmp_path / Path(name).name
    entries = list(read_phrase_table(path))
    assert len(entries) == lines
    assert {len(e.fields) for e in entries} == {fields}
    assert write_phrase_table(entries, out) == lines
    assert content(out) == content(path)


def test_latin1_table_round_trips_with_its_encoding(regression_slice: Path, tmp_path: Path) -> None:
    """The German Europarl table of basic-surface-only is ISO-8859-1, not UTF-8 (the slice: its lines
    2,001-2,100, the first with an umlaut the 19th)."""
    path = regression_slice / LATIN1_TABLE
    with pytest.raises(FormatError, match=r"phrase-table.gz:19: expected UTF-8 text, got .*0xfc"):
        list(read_phrase_table(path))
    out = tmp_path / "phrase-table.gz"
    assert write_phrase_table(read_phrase_table(path, encoding="latin-1"), out, encoding="latin-1") == 100
    assert content(out) == content(path)


def test_round_trip_whole_regression_tables(regression: Path, tmp_path: Path) -> None:
    """The whole tables the slices above are cut from, the Latin-1 one included."""
    for name, lines in WHOLE_TABLE_LINES.items():
        out = tmp_path / Path(name).name
        assert write_phrase_table(read_phrase_table(regression / name), out) == lines, name
        assert content(out) == content(regression / name), name
    path = regression / LATIN1_TABLE
    with pytest.raises(FormatError, match=r"phrase-table.gz:2019: expected UTF-8 text, got .*0xfc"):
        list(read_phrase_table(path))
    out = tmp_path / "latin1.gz"
    assert write_phrase_table(read_phrase_table(path, encoding="latin-1"), out, encoding="latin-1") == 52567
    assert content(out) == content(path)


def test_round_trip_modern_seven_fields(multi30k_slice: dict[str, Path], tmp_path: Path) -> None:
    """The first 300 lines of the Multi30k table: 5 fields plus empty sparse and properties fields."""
    path = multi30k_slice["phrase_table"]
    entries = list(read_phrase_table(path))
    assert len(entries) == 300
    assert {len(e.fields) for e in entries} == {7}
    assert len(entries[0].scores) == 4
    write_phrase_table(entries, tmp_path / "out.gz")
    assert content(tmp_path / "out.gz") == content(path)


def test_fields_and_scores(regression_slice: Path) -> None:
    table = regression_slice / "models/ptable-with-alignment/phrase-table"
    _, entry = itertools.islice(read_phrase_table(table), 2)
    assert entry.scores == (1, 0.384615, 1, 0.121753, 2.718)
    assert entry.source == '" Krieg gegen'
    assert entry.target == '" war on'
    assert entry.lineno == 2


def test_with_score_appends_only(regression_slice: Path) -> None:
    entry = next(read_phrase_table(regression_slice / "models/ptable-with-alignment/phrase-table"))
    added = entry.with_score(0.25)
    assert added.line() == entry.line().replace("2.718 |||", "2.718 0.25 |||")
    assert added.scores == entry.scores + (0.25,)


GOOD = "das Haus ||| the house ||| 0.5 0.4 ||| 0-0 1-1 ||| 2 2 1\n"
BAD_LINES = [
    ("das ||| the\n", r"3 to 7 fields separated by '\|\|\|'.*found 2"),
    ("das ||| the ||| 0.5 abc\n", r"numbers in the scores field \(field 3\)"),
    ("das ||| the ||| 0.5\n", "2 scores, as on the first line"),
    (" ||| the ||| 0.5 0.4\n", "a non-empty source and target phrase"),
]


@pytest.mark.parametrize("bad, message", BAD_LINES)
def test_bad_lines(tmp_path: Path, bad: str, message: str) -> None:
    path = tmp_path / "pt"
    path.write_text(GOOD + bad)
    with pytest.raises(FormatError, match=rf"pt:2: expected {message}"):
        list(read_phrase_table(path))
