"""The style of a text: tokenized or not, escaped or not, told only by a clear majority of its first lines; a
mismatch between hypotheses and references is one warning naming both files."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from rerank.formats.tokenization import (
    MARGIN,
    MIN_LINES,
    case_mismatch,
    check_nbest_references,
    looks_tokenized,
    nbest_hypotheses,
    style_mismatch,
    text_style,
    warn_style_mismatch,
)

TOKENIZED = ["un homme sur un canapé .", "l' homme boit d&apos; eau .", "deux chiens , un chat .", "il don 't sait"]
DETOKENIZED = ["un homme sur un canapé.", "l'homme boit d'eau.", "deux chiens, un chat.", "il sait"]


def test_each_line_counts_for_the_styles_it_shows() -> None:
    style = text_style(TOKENIZED)
    assert (style.lines, style.split, style.attached, style.escaped, style.bare_quotes) == (4, 4, 0, 1, 2)
    assert (style.lowercase, style.capitals) == (4, 0)
    style = text_style(DETOKENIZED)
    assert (style.lines, style.split, style.attached, style.escaped, style.bare_quotes) == (4, 0, 3, 0, 1)
    assert (text_style(["Un homme.", "un homme.", "É", "1 2 ."]).lowercase, text_style(["Un", "É"]).capitals) == (1, 2)
    assert text_style(TOKENIZED * 10, limit=5).lines == 5


def test_a_style_needs_enough_lines_and_a_clear_majority() -> None:
    assert text_style(TOKENIZED).tokenized is True and text_style(DETOKENIZED).tokenized is False
    assert text_style(TOKENIZED[: MIN_LINES - 1]).tokenized is None
    mixed = ["a b ."] * MARGIN + ["a b."]  # exactly MARGIN to one: tokenized
    assert text_style(mixed).tokenized is True
    assert text_style(mixed[1:] + ["a b."]).tokenized is None  # less than MARGIN to one
    assert text_style(["a &apos;b"] * MIN_LINES).escapes is True and text_style(["a 'b"] * MIN_LINES).escapes is False


def test_a_mismatch_names_which_file_is_which() -> None:
    message = style_mismatch(text_style(TOKENIZED), text_style(DETOKENIZED), "hyps.txt", "refs.txt")
    assert message is not None and message.startswith("hyps.txt looks tokenized")
    assert "but refs.txt looks detokenized" in message
    assert style_mismatch(text_style(TOKENIZED), text_style(TOKENIZED), "a", "b") is None
    assert style_mismatch(text_style(TOKENIZED), text_style(["a b c"] * 10), "a", "b") is None  # no style: no warning
    escaped, bare = ["a &quot;b&quot; ."] * MIN_LINES, ['a "b" .'] * MIN_LINES
    message = style_mismatch(text_style(bare), text_style(escaped), "hyps.txt", "refs.txt")
    assert message is not None and message.startswith("refs.txt escapes quotes")
    assert "but hyps.txt has them bare" in message


def test_the_warning_is_logged_once(caplog: pytest.LogCaptureFixture) -> None:
    logger = logging.getLogger("rerank.tests.tokenization")
    with caplog.at_level(logging.WARNING, logger=logger.name):
        first = warn_style_mismatch(TOKENIZED, DETOKENIZED, "once-hyps.txt", "once-refs.txt", logger)
        again = warn_style_mismatch(TOKENIZED, DETOKENIZED, "once-hyps.txt", "once-refs.txt", logger)
    assert len(first) == 1 and first == again
    assert [record.getMessage() for record in caplog.records] == first
    assert warn_style_mismatch(TOKENIZED, TOKENIZED, "a", "b", logger) == []


def test_an_nbest_lists_hypotheses_are_checked_against_the_references(test_data: Path,
                                                                       caplog: pytest.LogCaptureFixture) -> None:
    nbest = test_data / "toy.nbest"
    assert next(nbest_hypotheses(nbest)).strip() == "un homme avec un chapeau orange en regardant quelque chose ."
    assert list(nbest_hypotheses("-")) == []
    references = (test_data / "toy.fr").read_text(encoding="utf-8").splitlines()
    detokenized = [line.replace(" .", ".").replace("&apos; ", "'") for line in references]
    logger = logging.getLogger("rerank.tests.tokenization")
    with caplog.at_level(logging.WARNING, logger=logger.name):
        check_nbest_references([nbest], references, "toy.fr", logger)
        assert not caplog.records
        check_nbest_references([nbest], detokenized, "detokenized.fr", logger)
    (record,) = caplog.records
    assert record.getMessage().startswith(f"{nbest} looks tokenized")
    assert "but detokenized.fr looks detokenized" in record.getMessage()


def test_looks_tokenized_when_half_the_lines_end_in_a_spaced_mark() -> None:
    assert looks_tokenized(["a b .", "c d"]) and looks_tokenized(["a b !  ", "c d", "e f"])
    assert not looks_tokenized(["a b.", "c d"]) and not looks_tokenized(["a b .", "c d", "e f", "g h"][1:])
    assert not looks_tokenized([])


CASED = ["Un homme sur un canapé .", "L' homme boit d&apos; eau .", "Deux chiens , un chat .", "Il sait"]


def test_a_lowercased_text_against_a_cased_one_is_a_case_mismatch(caplog: pytest.LogCaptureFixture) -> None:
    assert text_style(TOKENIZED).lowercased is True and text_style(CASED).lowercased is False
    assert text_style(["1 2 3 ."] * 10).lowercased is None  # no letters: no case
    assert text_style(TOKENIZED[:1] + CASED[:2]).lowercased is None  # no clear majority
    message = case_mismatch(text_style(TOKENIZED), text_style(CASED), "hyps.txt", "refs.txt")
    assert message is not None and message.startswith("hyps.txt is lowercased but refs.txt has capitals")
    assert "lowercase refs.txt too" in message and "--lowercase" in message
    message = case_mismatch(text_style(CASED), text_style(TOKENIZED), "hyps.txt", "refs.txt")
    assert message is not None and message.startswith("refs.txt is lowercased but hyps.txt has capitals")
    assert case_mismatch(text_style(CASED), text_style(CASED), "a", "b") is None
    logger = logging.getLogger("rerank.tests.tokenization")
    with caplog.at_level(logging.WARNING, logger=logger.name):
        both = warn_style_mismatch(TOKENIZED, [line.capitalize().replace(" .", ".") for line in DETOKENIZED],
                                   "case-hyps.txt", "case-refs.txt", logger)
        assert [m.split(" ")[1:3] for m in both] == [["looks", "tokenized"], ["is", "lowercased"]]
        assert warn_style_mismatch(TOKENIZED, CASED, "a.txt", "b.txt", logger, lowercase=True) == []
    assert [record.getMessage() for record in caplog.records] == both  # one warning each, one line each
    assert all("\n" not in message for message in both)
