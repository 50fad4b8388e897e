"""The study's models: model directories taken as they are, training configs trained into the output directory
(the ensemble's seeds as ``--seed``), every training config checked before the first model trains; the ``--device``
flag and the extra features a config asks for."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
import yaml

from rerank.errors import RerankError
from rerank.study.config import ExperimentConfig, MosesSystem, Split
from rerank.study.models import device_flag, extra_features, train_models
from rerank.study.runner import StepRunner

REPO = Path(__file__).resolve().parents[3]
MODELS = REPO / "examples" / "models"


def experiment(test_data: Path, **settings: object) -> ExperimentConfig:
    split = Split(str(test_data / "toy.en"), str(test_data / "toy.fr"), str(test_data / "toy.nbest"))
    moses = MosesSystem(ini=str(test_data / "multi30k" / "moses.ini"), language_model="lm.arpa")
    values: dict[str, object] = {"output_dir": "run", "encdec": str(MODELS / "encdec"),
                                 "rnnsearch": str(MODELS / "rnnsearch"), "moses": moses, "dev": split, "test": split}
    return ExperimentConfig(**{**values, **settings})  # type: ignore[arg-type]


def training_config(path: Path, test_data: Path, architecture: str, **training: object) -> str:
    """A training config of a tiny model on the toy data, a single update."""
    model: dict[str, object] = {"architecture": architecture, "embedding_size": 8, "hidden_size": 8, "maxout_size": 4}
    if architecture == "rnnsearch":
        model["attention"] = {"hidden_size": 4}
    pair = {"source": str(test_data / "toy.en"), "target": str(test_data / "toy.fr")}
    path.write_text(yaml.safe_dump({
        "model": model, "data": {"train": pair, "valid": pair, "src_vocab_size": 50, "trg_vocab_size": 50},
        "training": {"optimizer": "adam", "batch_size": 3, "max_updates": 1, "valid_every": 1, "threads": 1,
                     **training}}))
    return str(path)


def test_the_device_flag_is_for_other_devices_than_the_cpu(test_data: Path) -> None:
    assert device_flag(experiment(test_data)) == []
    assert device_flag(experiment(test_data, device="cuda:1")) == ["--device", "cuda:1"]


def test_the_extra_features_in_their_fixed_order(test_data: Path) -> None:
    assert extra_features(experiment(test_data)) == ()
    assert extra_features(experiment(test_data, cslm="c.yaml", channel="ch.yaml")) == ("Chan0", "CSLM0")
    every = experiment(test_data, rnnsearch="r.yaml", ensemble_seeds=(2, 3), right_to_left="r2l.yaml",
                       channel="ch.yaml", cslm="c.yaml")
    assert extra_features(every) == ("Ens0", "R2L0", "Chan0", "CSLM0")
    hf = {"kind": "hf", "model": str(MODELS / "rnnsearch"), "source_language": "en", "target_language": "fr"}
    assert extra_features(experiment(test_data, channel="ch.yaml", features=(hf, {**hf, "channel": True}))) == \
        ("Chan0", "HF0", "HFChan0")


def test_model_directories_are_taken_as_they_are(test_data: Path, tmp_path: Path) -> None:
    steps = StepRunner(tmp_path / "run")
    config = experiment(test_data, channel=str(MODELS / "encdec"))
    assert train_models(config, steps) == {"encdec": MODELS / "encdec", "rnnsearch": MODELS / "rnnsearch",
                                           "channel": MODELS / "encdec"}
    assert not steps.commands.exists()  # nothing ran


def test_a_bad_training_config_stops_the_study_before_any_training(test_data: Path, tmp_path: Path) -> None:
    steps = StepRunner(tmp_path / "run")
    good = training_config(tmp_path / "encdec.yaml", test_data, "encdec")
    bad = tmp_path / "rnnsearch.yaml"
    bad.write_text(yaml.safe_dump({"model": {"architecture": "rnnsearch", "hiden_size": 8}}))
    with pytest.raises(RerankError, match=rf"^{bad}: .*hiden_size"):
        train_models(experiment(test_data, encdec=good, rnnsearch=str(bad)), steps)
    assert not steps.commands.exists() and not (steps.out / "models").exists()


def test_training_configs_train_into_the_output_directory(test_data: Path, tmp_path: Path) -> None:
    steps = StepRunner(tmp_path / "run")
    encdec = training_config(tmp_path / "encdec.yaml", test_data, "encdec")
    rnnsearch = training_config(tmp_path / "rnnsearch.yaml", test_data, "rnnsearch", seed=5)
    models = train_models(experiment(test_data, encdec=encdec, rnnsearch=rnnsearch, ensemble_seeds=(2,)), steps)
    out = steps.out / "models"
    assert models == {"encdec": out / "encdec", "rnnsearch": out / "rnnsearch",
                      "rnnsearch-seed2": out / "rnnsearch-seed2"}
    assert steps.commands.read_text(encoding="utf-8").splitlines() == [
        f"rerank train --config {encdec} --output-dir {out}/encdec",
        f"rerank train --config {rnnsearch} --output-dir {out}/rnnsearch",
        f"rerank train --config {rnnsearch} --output-dir {out}/rnnsearch-seed2 --seed 2"]
    seeds = [yaml.safe_load((models[name] / "config.yaml").read_text())["training"]["seed"]
             for name in ("rnnsearch", "rnnsearch-seed2")]
    assert seeds == [5, 2]  # the config's own seed, and the ensemble's
    first = torch.load(models["rnnsearch"] / "model.pt", weights_only=True)["model"]
    second = torch.load(models["rnnsearch-seed2"] / "model.pt", weights_only=True)["model"]
    assert any(not torch.equal(first[k], second[k]) for k in first)


def test_distill_trains_the_student_on_the_ensemble_s_translations_as_the_command_does(test_data: Path,
                                                                                      tmp_path: Path) -> None:
    from rerank.cli import main
    from rerank.study.config import Distill

    steps = StepRunner(tmp_path / "run")
    student = training_config(tmp_path / "student.yaml", test_data, "encdec", seed=3)
    config = experiment(test_data, rnnsearch=str(MODELS / "rnnsearch"), beam=3, nbest=3, length_penalty="wu",
                        distill=Distill(student, targets="ensemble+references", chunk_lines=2))
    models = train_models(config, steps)
    out = steps.out / "models" / "distilled"
    assert models["distilled"] == out / "student" and (out / "student" / "model.pt").is_file()
    command = steps.commands.read_text(encoding="utf-8").splitlines()[-1]
    assert command == (f"rerank distill --teacher {MODELS / 'rnnsearch'} --config {student} --output-dir {out} "
                       "--beam 3 --length-penalty wu --nbest 1 --targets ensemble+references --chunk-lines 2")
    # the logged command, run by hand elsewhere, makes the same corpus and student
    assert main(["-q", *command.replace(str(out), str(tmp_path / "by-hand")).split()[1:]]) == 0
    for name in ("train.src", "train.trg"):
        assert (tmp_path / "by-hand" / name).read_bytes() == (out / name).read_bytes()
    by_hand = torch.load(tmp_path / "by-hand" / "student" / "model.pt", weights_only=True)["model"]
    study = torch.load(out / "student" / "model.pt", weights_only=True)["model"]
    assert all(torch.equal(by_hand[k], study[k]) for k in study)
    translations = (out / "train.trg").read_text(encoding="utf-8").splitlines()
    assert translations[3:] == (test_data / "toy.fr").read_text(encoding="utf-8").splitlines()


def test_distill_with_r2l_weight_reranks_the_teacher_s_beam_by_the_right_to_left_model(test_data: Path,
                                                                                       tmp_path: Path) -> None:
    from rerank.study.config import Distill

    steps = StepRunner(tmp_path / "run")
    student = training_config(tmp_path / "student.yaml", test_data, "encdec", seed=3)
    r2l = Path(training_config(tmp_path / "r2l.yaml", test_data, "rnnsearch"))
    r2l.write_text(yaml.safe_dump({**(data := yaml.safe_load(r2l.read_text())),
                                   "model": {**data["model"], "reverse_target": True}}))
    config = experiment(test_data, beam=3, nbest=3, right_to_left=str(r2l),
                        distill=Distill(student, chunk_lines=2, r2l_weight=0.3))
    models = train_models(config, steps)
    out = steps.out / "models" / "distilled"
    command = steps.commands.read_text(encoding="utf-8").splitlines()[-1]
    assert command.endswith(f"--r2l-model {models['right_to_left']} --r2l-weight 0.3")
    assert yaml.safe_load((out / "distill.yaml").read_text())["r2l_model"] == [str(models["right_to_left"])]
    assert all(" R2L0= " in line for line in (out / "chunks" / "00000.nbest").read_text().splitlines())


def test_distill_r2l_weight_needs_the_right_to_left_model(test_data: Path) -> None:
    from rerank.study.config import Distill

    with pytest.raises(ValueError, match="distill.r2l_weight is the weight of the right_to_left model"):
        experiment(test_data, beam=3, nbest=3, distill=Distill("student.yaml", r2l_weight=0.3))
    with pytest.raises(ValueError, match="r2l_weight"):
        Distill("student.yaml", r2l_weight=1.5)
