"""rerank cut-nbest: each sentence's first N lines, byte for byte, and a scored list's record; bad input stops with exit
status 2."""

from __future__ import annotations

import gzip
import hashlib
from pathlib import Path

import pytest

from rerank.cli import main
from rerank.formats.scored import describing_record, record_path, write_record

REPO = Path(__file__).resolve().parents[3]
SAMPLE = REPO / "examples" / "data" / "val.100best.gz"


def test_the_first_lines_of_each_sentence_come_out_unchanged(tmp_path: Path) -> None:
    assert main(["-q", "cut-nbest", str(SAMPLE), "-n", "7", "-o", str(tmp_path / "cut.gz")]) == 0
    with gzip.open(SAMPLE, "rt", encoding="utf-8") as f:
        lines = f.read().splitlines()
    expected, seen = [], {}
    for line in lines:
        sentence = line.split(" ||| ")[0]
        seen[sentence] = seen.get(sentence, 0) + 1
        if seen[sentence] <= 7:
            expected.append(line)
    with gzip.open(tmp_path / "cut.gz", "rt", encoding="utf-8") as f:
        assert f.read().splitlines() == expected
    assert len(expected) < len(lines) and len(seen) == 250


def test_a_size_beyond_the_list_keeps_it_whole(tmp_path: Path) -> None:
    assert main(["-q", "cut-nbest", str(SAMPLE), "-n", "100000", "-o", str(tmp_path / "cut.gz")]) == 0
    with gzip.open(SAMPLE, "rb") as a, gzip.open(tmp_path / "cut.gz", "rb") as b:
        assert a.read() == b.read()


def test_sentences_out_of_order_are_an_error_and_nothing_is_written(tmp_path: Path,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    nbest = tmp_path / "bad.nbest"
    nbest.write_text("0 ||| a ||| F0= 1 ||| 0\n1 ||| b ||| F0= 1 ||| 0\n0 ||| c ||| F0= 1 ||| 0\n")
    assert main(["cut-nbest", str(nbest), "-n", "1", "-o", str(tmp_path / "out")]) == 2
    assert "bad.nbest:3: expected sentence ids in increasing order" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_a_scored_list_keeps_its_record(tmp_path: Path) -> None:
    """What score-nbest recorded of each feature stays with the cut list, so that --reuse takes its values."""
    scored = tmp_path / "scored.gz"
    text = gzip.decompress(SAMPLE.read_bytes())
    scored.write_bytes(gzip.compress(text))
    features = {"WP1": {"kind": "word-penalty"}}
    write_record(scored, hashlib.sha256(text).hexdigest(), features)
    assert main(["-q", "cut-nbest", str(scored), "-n", "3", "-o", str(tmp_path / "cut.gz")]) == 0
    record = describing_record(tmp_path / "cut.gz")
    assert record is not None and record.features == features
    assert main(["-q", "cut-nbest", str(SAMPLE), "-n", "3", "-o", str(tmp_path / "plain.gz")]) == 0
    assert not record_path(tmp_path / "plain.gz").exists()
