"""The checks of an experiment config before its first step: each message names the experiment's file and the
key, and what UNK1 counts words against is found for word and subword models."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml

from rerank.config import from_dict, to_dict
from rerank.errors import RerankError
from rerank.study.checks import check_experiment, check_files, load_json, unknown_word_list
from rerank.study.config import ExperimentConfig

REPO = Path(__file__).resolve().parents[3]
MODELS = REPO / "examples" / "models"


def sample(**changes: Any) -> ExperimentConfig:
    """configs/experiments/sample.yaml with absolute paths, its sections updated with ``changes``."""
    data = yaml.safe_load((REPO / "configs" / "experiments" / "sample.yaml").read_text(encoding="utf-8"))
    for section in ("moses", "dev", "test"):
        data[section] = {key: str(REPO / value) for key, value in data[section].items()}
    for key in ("encdec", "rnnsearch"):
        data[key] = str(REPO / data[key])
    for key, value in changes.items():
        data[key] = {**data[key], **value} if isinstance(value, dict) else value
    return from_dict(ExperimentConfig, data, "experiment.yaml")


def test_the_sample_passes() -> None:
    check_experiment(sample(), "experiment.yaml")


def test_the_ensemble_experiment_passes(shared_data: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """configs/experiments/ensemble.yaml (members, right-to-left model, distilled student) as the study checks it
    before its first step, run from the repository's root."""
    from rerank.study.config import load_experiment

    monkeypatch.chdir(REPO)
    config = load_experiment("configs/experiments/ensemble.yaml")
    assert config.distill is not None and len(config.ensemble_seeds) == 3
    check_experiment(config, "ensemble.yaml")


def test_the_phrase_table_experiment_passes(shared_data: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """configs/experiments/phrase-table.yaml (its columns: the ensemble, its student, the channel and phrase-pair
    models) as the study checks it before its first step, run from the repository's root."""
    from rerank.study.config import load_experiment, system_columns

    monkeypatch.chdir(REPO)
    config = load_experiment("configs/experiments/phrase-table.yaml")
    assert config.decoder_tuning is not None and config.decoder_tuning.rescore == "student+phrases"
    columns = {model for system in config.decoder_tuning.systems for model, _ in system_columns(system)}
    assert columns == {"encdec", "rnnsearch", "ensemble", "student", "channel", "phrases"}
    check_experiment(config, "phrase-table.yaml")


def test_a_right_to_left_student_is_refused(shared_data: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from rerank.study.config import load_experiment

    monkeypatch.chdir(REPO)
    config = load_experiment("configs/experiments/ensemble.yaml")
    student = "configs/training/recipe/rnnsearch-recipe-words-r2l.yaml"
    swapped = from_dict(ExperimentConfig, {**to_dict(config), "distill": {"student": student}}, "e")
    with pytest.raises(RerankError, match=f"ensemble.yaml: distill.student: expected a left-to-right .*{student}"):
        check_experiment(swapped, "ensemble.yaml")


def test_the_phrase_pair_model_is_checked_as_the_others() -> None:
    check_experiment(sample(phrases=str(MODELS / "rnnsearch")), "experiment.yaml")
    r2l = str(REPO / "configs" / "training" / "recipe" / "rnnsearch-recipe-words-r2l.yaml")
    with pytest.raises(RerankError, match=f"^experiment.yaml: phrases: expected a left-to-right .*{r2l}"):
        check_experiment(sample(phrases=r2l), "experiment.yaml")


def test_the_configs_own_features_are_read_and_their_labels_are_their_own() -> None:
    hf = {"kind": "hf", "model": str(MODELS / "rnnsearch"), "source_language": "en", "target_language": "fr"}
    check_experiment(sample(features=[hf]), "experiment.yaml")
    with pytest.raises(RerankError, match=r"^experiment.yaml: features: the label RNN0 is the study's own: give the "
                                          r"feature another name$"):
        check_experiment(sample(features=[{**hf, "name": "RNN0"}]), "experiment.yaml")
    with pytest.raises(RerankError, match=r"^experiment.yaml: features: hf.model: no-model: no such file or "
                                          r"directory$"):
        check_experiment(sample(features=[{**hf, "model": "no-model"}]), "experiment.yaml")


def test_missing_files_and_directories_are_named_by_their_keys(tmp_path: Path) -> None:
    config = sample(dev={"reference": str(tmp_path / "val.fr")}, moses={"phrase_table": str(tmp_path)})
    with pytest.raises(RerankError, match=rf"^experiment.yaml: the files it names do not exist: dev.reference: "
                                          rf"{tmp_path}/val.fr$"):
        check_files(config, "experiment.yaml")
    with pytest.raises(RerankError, match=rf"^experiment.yaml: expected files, got directories: moses.phrase_table: "
                                          rf"{tmp_path}$"):
        check_files(sample(moses={"phrase_table": str(tmp_path)}), "experiment.yaml")
    with pytest.raises(RerankError, match=r"moses.decoder: no-such-moses \(no such program\)"):
        check_files(sample(moses={"decoder": "no-such-moses"}), "experiment.yaml")


def test_a_reference_shorter_than_its_source_and_a_bad_bucket_scheme(tmp_path: Path) -> None:
    reference = tmp_path / "val.fr"
    reference.write_text("une ligne\n", encoding="utf-8")
    with pytest.raises(RerankError, match=r"^experiment.yaml: dev.reference: expected as many lines as dev.source "
                                          r"\(.*val.en: [\d,]+\), got 1 in .*val.fr$"):
        check_experiment(sample(dev={"reference": str(reference)}), "experiment.yaml")
    with pytest.raises(RerankError, match=r"^experiment.yaml: buckets: "):
        check_experiment(sample(buckets="wide"), "experiment.yaml")


def test_a_model_of_the_wrong_direction_or_without_weights(tmp_path: Path) -> None:
    with pytest.raises(RerankError, match=r"^experiment.yaml: right_to_left: expected a right-to-left model"):
        check_experiment(sample(right_to_left=str(MODELS / "rnnsearch")), "experiment.yaml")
    broken = tmp_path / "encdec"
    shutil.copytree(MODELS / "encdec", broken, ignore=shutil.ignore_patterns("model.pt"))
    with pytest.raises(RerankError, match=rf"^experiment.yaml: encdec: {broken} is not a model directory written by "
                                          r"rerank train \(no model.pt\)"):
        check_experiment(sample(encdec=str(broken)), "experiment.yaml")


def test_unk1_counts_a_subword_models_words_from_the_text_it_was_prepared_from(tmp_path: Path) -> None:
    assert unknown_word_list(MODELS / "rnnsearch") == {"vocab": str(MODELS / "rnnsearch" / "vocab.trg.txt")}
    target, prepared = tmp_path / "train.fr", tmp_path / "prepared"
    target.write_text("un homme vert\n", encoding="utf-8")
    prepared.mkdir()
    (prepared / "manifest.json").write_text(json.dumps({"inputs": {"target": {"path": str(target)}}}))
    config = tmp_path / "train.yaml"
    config.write_text(yaml.safe_dump({"model": {"subwords": {"vocab_size": 300}},
                                      "data": {"prepared": str(prepared), "trg_vocab_size": 0}}))
    assert unknown_word_list(config) == {"corpus": str(target), "shortlist": 15000}  # 0: the default shortlist
    (prepared / "manifest.json").write_text("{cut")
    assert load_json(prepared / "manifest.json") is None
    with pytest.raises(RerankError, match=r"^rnnsearch: .*train.yaml: a subword model's vocabulary holds pieces, "
                                          r"and UNK1 counts words: expected its data.train.target"):
        unknown_word_list(config)
