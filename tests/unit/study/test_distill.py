"""The distillation's parts without a teacher: the student's training pairs checked, the settings an earlier run
recorded, the corpus from the chunks' n-best lists (with the references after them), the student's config."""

from __future__ import annotations

from pathlib import Path

import pytest

from rerank.config import from_dict
from rerank.errors import ConfigError, FormatError, RerankError
from rerank.search.beam import SearchConfig
from rerank.study.distill import (
    STUDENT,
    Distillation,
    check_settings,
    student_config,
    training_pairs,
    write_corpus,
)
from rerank.training.config import TextPair, TrainConfig


def config(source: Path, target: Path, **data: object) -> TrainConfig:
    pair = {"source": str(source), "target": str(target)}
    return from_dict(TrainConfig, {"model": {"architecture": "encdec"},
                                   "data": {"train": pair, "valid": pair, **data}}, "student.yaml")


def write(path: Path, lines: list[str]) -> Path:
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return path


def test_the_training_pairs_and_their_checks(tmp_path: Path) -> None:
    source = write(tmp_path / "train.en", ["a b", "c"])
    target = write(tmp_path / "train.fr", ["x", "y z"])
    assert training_pairs(config(source, target), "ensemble") == (str(source), [["a", "b"], ["c"]], None)
    assert training_pairs(config(source, target), "ensemble+references")[2] == ["x", "y z"]
    short = write(tmp_path / "short.fr", ["x"])
    with pytest.raises(FormatError, match=r"short.fr:2: expected as many lines as .*train.en \(2\)"):
        training_pairs(config(source, short), "ensemble+references")
    training_pairs(config(source, short), "ensemble")  # the references are not read
    with pytest.raises(FormatError, match="empty.en:1: expected the training sources"):
        training_pairs(config(write(tmp_path / "empty.en", []), target), "ensemble")
    table = from_dict(TrainConfig, {"model": {"architecture": "encdec"}, "data": {
        "phrase_table": str(source), "valid": {"source": str(source), "target": str(target)}}}, "student.yaml")
    with pytest.raises(ConfigError, match="data.train: distillation translates the training sources"):
        training_pairs(table, "ensemble")


def test_a_resumed_run_must_have_the_earlier_settings(tmp_path: Path) -> None:
    settings = Distillation(("teacher",), SearchConfig(beam_size=5), chunk_lines=10).settings("train.en", 7)
    check_settings(tmp_path, settings)
    check_settings(tmp_path, settings)  # the same: resumed
    with pytest.raises(RerankError, match=r"distill.yaml: an earlier run translated with other settings \(targets, "
                                          r"beam\)"):
        check_settings(tmp_path, {**settings, "beam": 6, "targets": "ensemble+references"})


def test_the_settings_name_the_right_to_left_models_only_where_they_rerank() -> None:
    alone = Distillation(("teacher",), SearchConfig()).settings("train.en", 7)
    assert "r2l_model" not in alone and "r2l_weight" not in alone  # an earlier run's settings still resume
    both = Distillation(("teacher",), SearchConfig(), r2l_model=("r2l",), r2l_weight=0.2).settings("train.en", 7)
    assert both == {**alone, "r2l_model": ["r2l"], "r2l_weight": 0.2}


def test_the_corpus_pairs_each_translation_with_its_source_then_each_reference(tmp_path: Path) -> None:
    chunks = [write(tmp_path / "00000.nbest", ["0 ||| x1 ||| T= -1 ||| -1", "0 ||| x2 ||| T= -2 ||| -2",
                                               "1 ||| y1 ||| T= -1 ||| -1"]),
              write(tmp_path / "00001.nbest", ["2 |||  ||| T= -1 ||| -1"])]
    pair = write_corpus(chunks, [["a"], ["b", "c"], ["d"]], ["ra", "rb", "rd"], tmp_path)
    assert Path(pair.source).read_text() == "a\na\nb c\nd\na\nb c\nd\n"
    assert Path(pair.target).read_text() == "x1\nx2\ny1\n\nra\nrb\nrd\n"
    assert write_corpus(chunks[:1], [["a"]], None, tmp_path) == pair  # written once: kept as it is
    assert Path(pair.target).read_text().startswith("x1\nx2\ny1\n\n")


def test_the_student_trains_on_the_corpus_in_its_own_directory(tmp_path: Path) -> None:
    original = config(write(tmp_path / "s", ["a"]), write(tmp_path / "t", ["b"]))
    corpus = TextPair("DIR/train.src", "DIR/train.trg")
    student = student_config(original, corpus, tmp_path)
    assert student.data.train == corpus and student.output_dir == str(tmp_path / STUDENT)
    assert student.model == original.model and student.data.valid == original.data.valid


@pytest.mark.parametrize(("changes", "message"), [({"targets": "references"}, "targets: expected one of"),
                                                  ({"chunk_lines": 0}, "at least 1"),
                                                  ({"r2l_weight": -0.1}, "between 0 and 1")])
def test_bad_settings(changes: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        Distillation(("t",), SearchConfig(), **changes)  # type: ignore[arg-type]
