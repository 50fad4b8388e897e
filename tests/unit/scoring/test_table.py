"""Scoring a phrase table: every line kept byte for byte with exp(ln p) of its pair appended, the same bytes
with and without the reading and writing threads, and the moses.ini of the scored table checked first."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
from helpers import content

from rerank.errors import FormatError, RerankError
from rerank.formats.moses_ini import MosesIni
from rerank.formats.phrase_table import MOSES_LOWEST_LOG, read_phrase_table
from rerank.scoring.pairs import Scorer, ScoringConfig
from rerank.scoring.table import ScoreAppender, phrase_table_value, score_phrase_table, table_moses_ini


@pytest.fixture(scope="module")
def scorer(slice_table_model: Path) -> Scorer:
    """:func:`slice_table_model` loaded for scoring."""
    return Scorer.load(slice_table_model, config=ScoringConfig(window=40, max_tokens=64))


def test_each_line_gets_the_probability_of_its_pair(scorer: Scorer, multi30k_slice: dict[str, Path],
                                                    tmp_path: Path) -> None:
    table = multi30k_slice["phrase_table"]
    score_phrase_table(read_phrase_table(table), scorer, table=table, output=tmp_path / "scored", show_progress=False)
    score_phrase_table(read_phrase_table(table), scorer, table=table, output=tmp_path / "plain", show_progress=False,
                       overlap=False, count=False)
    assert (tmp_path / "scored").read_bytes() == (tmp_path / "plain").read_bytes()
    lines, scored = content(table).decode().splitlines(), (tmp_path / "scored").read_text().splitlines()
    assert len(scored) == len(lines) == 300
    entries = list(read_phrase_table(table))
    want = list(scorer.score([(e.source.split(), e.target.split()) for e in entries]))
    for line, out, log_prob, entry in zip(lines, scored, want, entries, strict=True):
        written, read = out.split(" ||| ", 3)[:3], line.split(" ||| ", 3)[:3]
        assert written[:2] == read[:2] and written[2].startswith(read[2].rstrip())  # the scores, one appended
        assert float(out.split(" ||| ")[2].split()[-1]) == pytest.approx(math.exp(log_prob), rel=1e-4), entry.lineno


def test_the_value_is_floored_and_a_broken_score_is_an_error_at_its_line(scorer: Scorer,
                                                                         multi30k_slice: dict[str, Path]) -> None:
    assert phrase_table_value(-500.0) == math.exp(MOSES_LOWEST_LOG) > 0 and phrase_table_value(0.0) == 1.0
    entries = list(read_phrase_table(multi30k_slice["phrase_table"]))[:2]
    appender = ScoreAppender(scorer, "table.gz")
    assert [e.scores[-1] for e in appender.with_values(entries, np.array([-1.0, -200.0]))] == \
        pytest.approx([math.exp(-1.0), math.exp(MOSES_LOWEST_LOG)])
    assert appender.floored == 1
    with pytest.raises(FormatError, match=r"^table.gz:2: expected a phrase pair the model gives a finite score"):
        appender.with_values(entries, np.array([-1.0, math.nan]))


def test_the_moses_ini_of_the_scored_table(multi30k_slice: dict[str, Path], tmp_path: Path) -> None:
    ini = multi30k_slice["moses_ini"]
    scored = table_moses_ini(ini, tmp_path / "moses.ini", "TranslationModel0", 4, tmp_path / "table.gz", 0.2)
    assert scored.weights()["TranslationModel0"] == (*MosesIni.read(ini).weights()["TranslationModel0"], 0.2)
    assert scored.feature("TranslationModel0").args["num-features"] == "5"
    assert scored.feature("TranslationModel0").args["path"] == str(tmp_path / "table.gz")
    with pytest.raises(RerankError, match=r"TranslationModel0 has num-features=4, but the table has 5 scores"):
        table_moses_ini(ini, tmp_path / "moses.ini", "TranslationModel0", 5, tmp_path / "table.gz", 0.2)
    with pytest.raises(RerankError, match=r"cannot write: directory .* does not exist"):
        table_moses_ini(ini, tmp_path / "nowhere" / "moses.ini", "TranslationModel0", 4, tmp_path / "table.gz", 0.2)
