"""rerank merge-nbest: the union of several systems' n-best lists, with indicator features."""

from __future__ import annotations

from pathlib import Path

import pytest

from rerank.cli import main
from rerank.formats.nbest import read_nbest

MOSES = """\
0 ||| a man sleeps  ||| d= 0 lm= -3.5 ||| -1.2
0 ||| a man sleeping  ||| d= -1 lm= -4.5 ||| -1.9
2 ||| dogs run  ||| d= 0 lm= -2.5 ||| -0.7
"""
NMT = """\
0 ||| a man is sleeping ||| RNNsearch0= -1.1 ||| -1.1
0 ||| a  man sleeps ||| RNNsearch0= -1.3 ||| -1.3
1 ||| a cat ||| RNNsearch0= -0.5 ||| -0.5
"""


@pytest.fixture
def systems(tmp_path: Path) -> tuple[Path, Path]:
    (tmp_path / "moses.nbest").write_text(MOSES, encoding="utf-8")
    (tmp_path / "nmt.nbest").write_text(NMT, encoding="utf-8")
    return tmp_path / "moses.nbest", tmp_path / "nmt.nbest"


def test_union_marks_which_system_proposed_each_hypothesis(systems: tuple[Path, Path], tmp_path: Path) -> None:
    moses, nmt = systems
    out = tmp_path / "union.nbest.gz"
    assert main(["-q", "merge-nbest", f"Moses={moses}", f"RNNsearch={nmt}", "-o", str(out)]) == 0
    entries = list(read_nbest(out))
    assert [(e.sentence_id, " ".join(e.tokens), e.dense) for e in entries] == [
        (0, "a man sleeps", (1.0, 1.0)),  # the same words, whatever the spacing: one hypothesis
        (0, "a man sleeping", (1.0, 0.0)),
        (0, "a man is sleeping", (0.0, 1.0)),
        (1, "a cat", (0.0, 1.0)),
        (2, "dogs run", (1.0, 0.0)),
    ]
    assert entries[0].layout.labels == ("InMoses", "InRNNsearch")
    assert entries[0].line() == "0 ||| a man sleeps ||| InMoses= 1 InRNNsearch= 1 ||| 0"


def test_ids_beyond_the_source_are_an_error(systems: tuple[Path, Path], tmp_path: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    moses, nmt = systems
    out = tmp_path / "union.nbest"
    assert main(["merge-nbest", f"Moses={moses}", f"RNNsearch={nmt}", "--num-sentences", "2", "-o", str(out)]) == 2
    assert f"{moses}:3: expected a sentence id below 2" in capsys.readouterr().err
    assert set(tmp_path.iterdir()) == set(systems)  # no output, no temporary file


@pytest.mark.parametrize("spec", ["Mo_ses={}", "={}", "Moses="])
def test_system_names_must_be_labels(systems: tuple[Path, Path], spec: str,
                                     capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["merge-nbest", spec.format(systems[0]), "-o", "-"]) == 2
    assert "merge-nbest:" in capsys.readouterr().err


def test_an_empty_list_is_an_error_unless_allowed(systems: tuple[Path, Path], tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    moses, _ = systems
    empty = tmp_path / "empty.nbest"
    empty.write_text("")
    out = tmp_path / "union.nbest"
    assert main(["merge-nbest", f"Moses={moses}", f"RNNsearch={empty}", "-o", str(out)]) == 2
    assert "the n-best list of RNNsearch is empty; give --allow-partial" in capsys.readouterr().err
    assert not out.exists()
    assert main(["merge-nbest", f"Moses={moses}", f"RNNsearch={empty}", "-o", str(out), "--allow-partial"]) == 0
    assert "has hypotheses for 0 of the 2 sentences" in capsys.readouterr().err


def test_a_list_covering_part_of_the_sentences_is_a_warning(systems: tuple[Path, Path], tmp_path: Path,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    moses, nmt = systems
    out = tmp_path / "union.nbest"
    assert main(["merge-nbest", f"Moses={moses}", f"RNNsearch={nmt}", "--num-sentences", "4", "-o", str(out)]) == 0
    err = capsys.readouterr().err
    assert f"{moses}: the n-best list of Moses has hypotheses for 2 of the 4 sentences" in err
    assert f"{nmt}: the n-best list of RNNsearch has hypotheses for 2 of the 4 sentences" in err
