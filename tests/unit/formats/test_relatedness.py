"""References unrelated to the hypotheses (another set's, or shifted by a line) are told from the right ones by
the words each hypothesis shares with its own reference line against other lines'; a warning names both files."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from rerank.formats.relatedness import (
    MIN_SENTENCES,
    RATIO,
    Overlap,
    overlap,
    unrelated_message,
    warn_unrelated,
    warn_unrelated_nbest,
)

SAMPLE = Path(__file__).resolve().parents[3] / "examples" / "data"


def lines(name: str) -> list[str]:
    return (SAMPLE / name).read_text(encoding="utf-8").splitlines()


def test_a_system_shares_far_more_words_with_its_own_references() -> None:
    found = overlap(lines("test.1best"), lines("test.fr"))
    assert found.sentences == 250 and found.own > 0.6 and found.own > 3 * found.others and not found.unrelated
    other_set = overlap(lines("test.1best"), lines("val.fr"))
    assert other_set.unrelated and other_set.own < 1.1 * other_set.others
    references = lines("test.fr")
    assert overlap(lines("test.1best"), references[1:] + references[:1]).unrelated  # shifted by a line


def test_case_tokenization_and_escapes_do_not_count() -> None:
    hypotheses = ["un homme boit d&apos; eau ."] * MIN_SENTENCES
    assert overlap(hypotheses, ["Un homme boit d'eau."] * MIN_SENTENCES).own == 1.0


def test_the_verdict_needs_enough_sentences_and_a_ratio_below_the_threshold() -> None:
    assert not overlap(lines("test.1best")[: MIN_SENTENCES - 1], lines("val.fr")).unrelated
    assert overlap(lines("test.1best")[:MIN_SENTENCES], lines("val.fr")).unrelated
    assert not Overlap(MIN_SENTENCES, RATIO * 0.2, 0.2).unrelated
    assert Overlap(MIN_SENTENCES, RATIO * 0.19, 0.2).unrelated
    assert Overlap(MIN_SENTENCES, 0.0, 0.0).unrelated  # not a word in common: another language, say
    assert overlap(["a"], ["a"]) == Overlap(1, 0.0, 0.0) and overlap([], []).sentences == 0


def test_the_warning_names_both_files_and_what_to_check(caplog: pytest.LogCaptureFixture) -> None:
    message = unrelated_message(overlap(lines("test.1best"), lines("val.fr")), "test.1best", "val.fr")
    assert message is not None and message.startswith("val.fr looks unrelated to test.1best: over 250 sentences")
    assert "check that val.fr holds the references of the text test.1best translates" in message
    assert "\n" not in message
    assert unrelated_message(overlap(lines("test.1best"), lines("test.fr")), "test.1best", "test.fr") is None
    logger = logging.getLogger("rerank.tests.relatedness")
    with caplog.at_level(logging.WARNING, logger=logger.name):
        first = warn_unrelated(lines("val.1best"), lines("test.fr"), "once.1best", "once.fr", logger)
        again = warn_unrelated(lines("val.1best"), lines("test.fr"), "once.1best", "once.fr", logger)
        assert warn_unrelated(lines("val.1best"), lines("val.fr"), "val.1best", "val.fr", logger) is None
    assert first is not None and first == again and [r.getMessage() for r in caplog.records] == [first]


def test_an_nbest_lists_first_hypotheses_are_compared(caplog: pytest.LogCaptureFixture) -> None:
    logger = logging.getLogger("rerank.tests.relatedness")
    with caplog.at_level(logging.WARNING, logger=logger.name):
        assert warn_unrelated_nbest(SAMPLE / "test.100best.gz", lines("test.fr"), "test.fr", logger) is None
        message = warn_unrelated_nbest(SAMPLE / "test.100best.gz", lines("val.fr"), "val.fr", logger)
    assert message is not None and message.startswith("val.fr looks unrelated to ")
    assert "test.100best.gz" in message and [r.getMessage() for r in caplog.records] == [message]
