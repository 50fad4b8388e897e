"""Each sentence's first N hypotheses: the lines as they were, in order, whatever the ids' gaps."""

from __future__ import annotations

from pathlib import Path

import pytest

from rerank.formats.nbest import read_nbest
from rerank.rescore.cut import first_hypotheses

LIST = """\
0 ||| a  ||| F0= 1 ||| 0.5
0 ||| b ||| F0= 2 ||| 0.25
0 ||| c ||| F0= 3 ||| 0
2 ||| d ||| F0= 4 ||| 1
5 ||| e ||| F0= 5 ||| 2
5 ||| f ||| F0= 6 ||| 3
"""


@pytest.fixture
def nbest(tmp_path: Path) -> Path:
    path = tmp_path / "list.nbest"
    path.write_text(LIST, encoding="utf-8")
    return path


@pytest.mark.parametrize("size,kept", [(1, [0, 3, 4]), (2, [0, 1, 3, 4, 5]), (3, [0, 1, 2, 3, 4, 5]),
                                       (50, [0, 1, 2, 3, 4, 5])])
def test_the_first_lines_of_each_sentence_unchanged(nbest: Path, size: int, kept: list[int]) -> None:
    lines = LIST.splitlines()
    assert [entry.line() for entry in first_hypotheses(read_nbest(nbest), size)] == [lines[i] for i in kept]


def test_the_real_list_keeps_its_bytes(test_data: Path) -> None:
    lines = (test_data / "toy.nbest").read_text(encoding="utf-8").splitlines()
    cut = [entry.line() for entry in first_hypotheses(read_nbest(test_data / "toy.nbest"), 1)]
    assert cut == [lines[0], lines[3], lines[6]]  # two spaces before the first |||, as Moses writes them


@pytest.mark.parametrize("size", [0, -3])
def test_fewer_than_one_hypothesis_is_refused(nbest: Path, size: int) -> None:
    with pytest.raises(ValueError, match=f"expected at least one hypothesis per sentence, got {size}"):
        next(first_hypotheses(read_nbest(nbest), size))
