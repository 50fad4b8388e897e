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
from rerank.scoring.table import (
    Column,
    ScoreAppender,
    Spread,
    phrase_table_value,
    score_phrase_table,
    spread_matched_weight,
    table_moses_ini,
)


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


@pytest.fixture(scope="module")
def channel_model(multi30k_slice: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A small random RNNsearch that reads the slice's target side and scores its source side (fr->en)."""
    import torch
    from tiny_models import save_model_dir, tiny_config, tiny_model

    from rerank.models.vocab import Vocabulary

    entries = list(read_phrase_table(multi30k_slice["phrase_table"]))
    src_vocab = Vocabulary.build((e.target.split() for e in entries), 150)
    trg_vocab = Vocabulary.build((e.source.split() for e in entries), 150)
    model = tiny_model(tiny_config("rnnsearch"), len(src_vocab), len(trg_vocab), seed=3, dtype=torch.float32)
    return save_model_dir(tmp_path_factory.mktemp("model") / "channel", model, src_vocab, trg_vocab)


def model_log_prob(model: Path, reads: list[str], scores: list[str]) -> float:
    """ln p(scores | reads) under ``model``, the pair in a batch of its own, without the scorer."""
    import torch

    from rerank.models.batching import pad, to_ids
    from rerank.models.checkpoint import load_model

    loaded = load_model(model)
    with torch.inference_mode():
        src, src_len = pad(to_ids([reads], loaded.src_vocab))
        trg, _ = pad(to_ids([scores], loaded.trg_vocab))
        return float(loaded.model.score(loaded.model.encode(src, src_len), trg))


@pytest.mark.parametrize("per_word", [False, True])
def test_a_channel_column_holds_p_source_given_target(channel_model: Path, multi30k_slice: dict[str, Path],
                                                      tmp_path: Path, per_word: bool) -> None:
    table = multi30k_slice["phrase_table"]
    scorer = Scorer.load(channel_model, config=ScoringConfig(window=40, max_tokens=64))
    column = Column(channel=True, per_word=per_word)
    score_phrase_table(read_phrase_table(table), scorer, table=table, output=tmp_path / "channel",
                       show_progress=False, column=column)
    lines, scored = content(table).decode().splitlines(), (tmp_path / "channel").read_text().splitlines()
    assert len(scored) == len(lines) == 300
    for line, out in zip(lines, scored, strict=True):  # every byte kept but the one value appended
        fields = line.split(" ||| ")
        value = out.split(" ||| ")[2].split()[-1]
        assert out == " ||| ".join([*fields[:2], f"{fields[2].rstrip()} {value}", *fields[3:]])
    for index in (0, 7, 150, 299):  # the value: the channel model's ln p(source phrase | target phrase)
        source, target = lines[index].split(" ||| ")[:2]
        log_prob = model_log_prob(channel_model, target.split(), source.split())
        if per_word:
            log_prob /= len(source.split()) + 1
        written = math.log(float(scored[index].split(" ||| ")[2].split()[-1]))
        assert written == pytest.approx(log_prob, abs=1e-4), index
    assert column.describe() == "p(source | target)" + (" per word" if per_word else "")


def test_a_per_word_column_divides_ln_p_by_the_target_words_and_end(scorer: Scorer,
                                                                    multi30k_slice: dict[str, Path]) -> None:
    entries = list(read_phrase_table(multi30k_slice["phrase_table"]))[:3]
    appender = ScoreAppender(scorer, "table.gz", column=Column(per_word=True))
    words = [len(e.target.split()) + 1 for e in entries]
    values = [e.scores[-1] for e in appender.with_values(entries, np.array([-6.0, -300.0, -2.0]))]
    assert values == pytest.approx([math.exp(-6.0 / words[0]), math.exp(max(-300.0 / words[1], MOSES_LOWEST_LOG)),
                                    math.exp(-2.0 / words[2])])
    assert appender.floored == (300.0 / words[1] > 100)


def test_the_spread_matched_weight_gives_the_new_score_the_mean_contribution() -> None:
    spread = Spread()
    for scores in [(0.5, 1.0, math.exp(-2.0)), (0.25, 0.0, math.exp(-10.0)), (1.0, 0.5, math.exp(-6.0))]:
        spread.add(scores)  # a 0 reads as Moses' lowest, -100
    logs = np.array([[math.log(0.5), 0.0, -2.0], [math.log(0.25), MOSES_LOWEST_LOG, -10.0], [0.0, math.log(0.5), -6.0]])
    assert spread.deviations() == pytest.approx(logs.std(axis=0))
    deviations = np.array([1.0, 2.0, 8.0])
    assert spread_matched_weight((0.2, -0.1), deviations) == pytest.approx((0.2 * 1.0 + 0.1 * 2.0) / 2 / 8.0)
    assert spread_matched_weight((0.2, 0.1), np.array([1.0, 2.0, 0.0])) == 0.0
    with pytest.raises(ValueError, match="expected the deviations of 2 scores and the added one, got 2"):
        spread_matched_weight((0.2, 0.1), np.array([1.0, 2.0]))
