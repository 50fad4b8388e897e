"""merge_nbest: each sentence's distinct hypotheses once, first system first, with In<Name> indicators; an empty
list, an id beyond the source and a partial list are told apart."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from rerank.errors import FormatError, RerankError
from rerank.rescore.merge import merge_nbest

MOSES = """\
0 ||| a man sleeps  ||| d= 0 lm= -3.5 ||| -1.2
0 ||| a man sleeping  ||| d= -1 lm= -4.5 ||| -1.9
0 ||| a man sleeps  ||| d= -2 lm= -3.5 ||| -2.2
2 ||| dogs run  ||| d= 0 lm= -2.5 ||| -0.7
"""
NMT = """\
0 ||| a man is sleeping ||| RNNsearch0= -1.1 ||| -1.1
0 ||| a  man sleeps ||| RNNsearch0= -1.3 ||| -1.3
1 ||| a cat ||| RNNsearch0= -0.5 ||| -0.5
"""
THIRD = """\
1 ||| a cat ||| X0= 1 ||| 1
2 ||| the dogs run ||| X0= 1 ||| 1
"""


def write(directory: Path, **lists: str) -> list[tuple[str, str]]:
    """Each list as NAME.nbest in ``directory``: the ``(name, path)`` systems of merge_nbest."""
    systems = []
    for name, text in lists.items():
        (directory / f"{name}.nbest").write_text(text, encoding="utf-8")
        systems.append((name, str(directory / f"{name}.nbest")))
    return systems


def test_each_distinct_hypothesis_once_with_an_indicator_per_system(tmp_path: Path) -> None:
    systems = write(tmp_path, Moses=MOSES, RNNsearch=NMT, Third=THIRD)
    assert [entry.line() for entry in merge_nbest(systems)] == [
        "0 ||| a man sleeps ||| InMoses= 1 InRNNsearch= 1 InThird= 0 ||| 0",  # Moses' repeat and other spacing: once
        "0 ||| a man sleeping ||| InMoses= 1 InRNNsearch= 0 InThird= 0 ||| 0",
        "0 ||| a man is sleeping ||| InMoses= 0 InRNNsearch= 1 InThird= 0 ||| 0",
        "1 ||| a cat ||| InMoses= 0 InRNNsearch= 1 InThird= 1 ||| 0",
        "2 ||| dogs run ||| InMoses= 1 InRNNsearch= 0 InThird= 0 ||| 0",
        "2 ||| the dogs run ||| InMoses= 0 InRNNsearch= 0 InThird= 1 ||| 0",
    ]


def test_the_first_system_comes_first(tmp_path: Path) -> None:
    systems = write(tmp_path, RNNsearch=NMT, Moses=MOSES)
    assert [(e.sentence_id, " ".join(e.tokens), e.dense) for e in merge_nbest(systems)][:3] == [
        (0, "a man is sleeping", (1.0, 0.0)), (0, "a man sleeps", (1.0, 1.0)), (0, "a man sleeping", (0.0, 1.0))]


def test_a_sentence_id_beyond_the_source_names_its_line(tmp_path: Path) -> None:
    systems = write(tmp_path, Moses=MOSES, RNNsearch=NMT)
    with pytest.raises(FormatError) as error:
        list(merge_nbest(systems, num_sentences=2))
    assert str(error.value) == f"{systems[0][1]}:4: expected a sentence id below 2, got '2'"


def test_an_empty_list_is_an_error_unless_allowed(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    systems = write(tmp_path, Moses=MOSES, RNNsearch="")
    with pytest.raises(RerankError) as error:
        list(merge_nbest(systems))
    assert str(error.value) == (f"{systems[1][1]}: the n-best list of RNNsearch is empty; give --allow-partial to "
                                "merge it anyway")
    with caplog.at_level(logging.WARNING, logger="rerank.rescore.merge"):
        merged = list(merge_nbest(systems, num_sentences=4, allow_empty=True))
    assert [e.dense for e in merged] == [(1.0, 0.0)] * 3
    assert f"{systems[1][1]}: the n-best list of RNNsearch has hypotheses for 0 of the 4 sentences" in caplog.text
    assert f"{systems[0][1]}: the n-best list of Moses has hypotheses for 2 of the 4 sentences" in caplog.text


def test_a_list_without_some_sentences_is_merged_with_a_warning(tmp_path: Path,
                                                                 caplog: pytest.LogCaptureFixture) -> None:
    systems = write(tmp_path, Moses=MOSES, RNNsearch=NMT)
    with caplog.at_level(logging.WARNING, logger="rerank.rescore.merge"):
        merged = list(merge_nbest(systems))
    assert [e.sentence_id for e in merged] == [0, 0, 0, 1, 2]
    # of the 3 sentences the lists have together, each has 2
    assert f"{systems[0][1]}: the n-best list of Moses has hypotheses for 2 of the 3 sentences; the others have " \
           "none of its hypotheses" in caplog.text
    assert f"{systems[1][1]}: the n-best list of RNNsearch has hypotheses for 2 of the 3 sentences" in caplog.text


def test_lists_covering_every_sentence_merge_silently(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    systems = write(tmp_path, A="0 ||| x ||| F0= 1 ||| 0\n1 ||| y ||| F0= 1 ||| 0\n",
                    B="0 ||| x ||| G0= 1 ||| 0\n1 ||| z ||| G0= 1 ||| 0\n")
    with caplog.at_level(logging.WARNING, logger="rerank.rescore.merge"):
        assert [e.line() for e in merge_nbest(systems, num_sentences=2)] == [
            "0 ||| x ||| InA= 1 InB= 1 ||| 0", "1 ||| y ||| InA= 1 InB= 0 ||| 0", "1 ||| z ||| InA= 0 InB= 1 ||| 0"]
    assert caplog.text == ""
