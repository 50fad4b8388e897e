"""Everything an experiment config names, checked before its first step: each file is there and is a file
(a directory is not a source, a language model or a moses.ini), each model a model directory or a training
config of the right direction, references as long as their sources, no more cross-validation folds than dev
sentences, the language model an ARPA file or a KenLM binary, Moses' weights finite, and the words UNK1 counts
known (the values that need no file, seeds and the BLEU tokenizer among them, are checked as the config is read:
:mod:`rerank.study.config`). Every message names the experiment's file and key, never a file the study
derives."""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from rerank.config import load_yaml
from rerank.errors import RerankError, did_you_mean_path
from rerank.evaluation.metrics import check_bucket_scheme
from rerank.formats.arpa import check_language_model
from rerank.formats.files import count_lines
from rerank.formats.moses_ini import MosesIni
from rerank.models.config import CONFIG, ModelConfig, read_model_config
from rerank.study.config import ExperimentConfig

WEIGHTS = "model.pt"  # a model directory's weights (rerank.models.checkpoint, which imports torch)
SUBWORD_MODEL = "subwords.trg.model"  # a subword model's target pieces (rerank.models.subwords)
# the keys naming a model or its config
NEURAL_MODELS = ("encdec", "rnnsearch", "right_to_left", "channel", "phrases", "cslm")


def check_experiment(config: ExperimentConfig, source: str = "the experiment config") -> None:
    """Check every input of the study ``config`` (read from ``source``) before its first step."""
    check_files(config, source)
    for key in NEURAL_MODELS:
        path = getattr(config, key)
        if path is not None and key != "cslm":
            model = _model_config(path, f"{source}: {key}")
            _check_direction(key, model, path, source)
    if config.distill is not None:
        student = config.distill.student
        _check_direction("distill.student", _model_config(student, f"{source}: distill.student"), student, source)
    if config.cslm is not None and Path(config.cslm).is_dir():
        _model_directory(config.cslm, f"{source}: cslm")
    check_features(config, source)
    for name, split in (("dev", config.dev), ("test", config.test)):
        sources, references = count_lines(split.source), count_lines(split.reference)
        if sources != references:
            raise RerankError(f"{source}: {name}.reference: expected as many lines as {name}.source "
                              f"({split.source}: {sources:,}), got {references:,} in {split.reference}")
        if name == "dev" and config.rescoring and config.cv_folds > sources:
            raise RerankError(f"{source}: cv_folds: expected at most the {sources:,} sentences of dev.source "
                              f"({split.source}), one a fold at least, got {config.cv_folds}")
    try:  # KenLM reads it for LM1 (and the CSLM's back-off structure, from ARPA text only) many steps later
        check_language_model(config.moses.language_model, binary=config.cslm is None)
    except RerankError as e:
        raise RerankError(f"{source}: moses.language_model: {e}") from None
    try:
        check_bucket_scheme(config.buckets)
    except ValueError as e:
        raise RerankError(f"{source}: buckets: {e}") from None
    try:
        MosesIni.read(config.moses.ini).weights()
    except RerankError as e:
        raise RerankError(f"{source}: moses.ini: {e}") from None
    unknown_word_list(config.rnnsearch, f"{source}: rnnsearch")


def check_features(config: ExperimentConfig, source: str) -> None:
    """The config's own ``features``: kinds, keys, files and optional packages, and labels of their own."""
    from rerank.features.registry import read_specs
    from rerank.study.rows import CONSENSUS_FEATURES, EXTRA_FEATURES, NEW_FEATURES

    taken = {*NEW_FEATURES, *EXTRA_FEATURES.values(), *CONSENSUS_FEATURES}
    for spec in read_specs(config.features, f"{source}: features"):
        if spec.label in taken:
            raise RerankError(f"{source}: features: the label {spec.label} is the study's own: give the feature "
                              "another name")


def check_files(config: ExperimentConfig, source: str) -> None:
    """Every file the config names exists, and is a file where a file is read."""
    missing, directories = [], []
    for key, path, kind in _named_paths(config):
        if not os.path.exists(path):
            missing.append(f"{key}: {path}{did_you_mean_path(path)}")
        elif kind == "file" and os.path.isdir(path):
            directories.append(f"{key}: {path}")
    m = config.moses
    if m.decoder is not None and shutil.which(m.decoder) is None:
        missing.append(f"moses.decoder: {m.decoder} (no such program)")
    if missing:
        raise RerankError(f"{source}: the files it names do not exist: {'; '.join(missing)}")
    if directories:
        raise RerankError(f"{source}: expected files, got directories: {'; '.join(directories)}")


def _named_paths(config: ExperimentConfig) -> Iterator[tuple[str, str, str]]:
    """``(key, path, kind)`` of every path the config gives: kind ``file``, or ``model`` (a config file or a
    model directory)."""
    for key in NEURAL_MODELS:
        if getattr(config, key) is not None:
            yield key, getattr(config, key), "model"
    if config.distill is not None:
        yield "distill.student", config.distill.student, "file"
    m = config.moses
    tuning = config.decoder_tuning
    for key, path in (("moses.ini", m.ini), ("moses.language_model", m.language_model),
                      ("moses.phrase_table", m.phrase_table), ("moses.filter_script", m.filter_script),
                      ("decoder_tuning.mert_moses", tuning.mert_moses if tuning else None)):
        if path is not None:
            yield key, path, "file"
    for name, split in (("dev", config.dev), ("test", config.test)):
        for key in ("source", "reference", "nbest"):
            if getattr(split, key) is not None:
                yield f"{name}.{key}", getattr(split, key), "file"


def _model_directory(path: str, where: str) -> None:
    for name in (CONFIG, WEIGHTS):
        if not (Path(path) / name).is_file():
            raise RerankError(f"{where}: {path} is not a model directory written by rerank train (no {name})")


def _model_config(path: str, where: str) -> ModelConfig:
    """The model of a model directory or of a training config, errors naming ``where``."""
    try:
        if Path(path).is_dir():
            _model_directory(path, where)
            return read_model_config(path)
        from rerank.training.config import load_train_config

        return load_train_config(path).model
    except RerankError as e:
        if str(e).startswith(where):
            raise
        raise RerankError(f"{where}: {e}") from None


def _check_direction(key: str, model: ModelConfig, path: str, source: str) -> None:
    """right_to_left must read the target right to left (reverse_target), the others left to right: a feature's
    label says which."""
    if (key == "right_to_left") != model.reverse_target:
        expected = "a right-to-left model (model.reverse_target: true)" if key == "right_to_left" else \
            "a left-to-right model (model.reverse_target: false)"
        raise RerankError(f"{source}: {key}: expected {expected}, got {path}, whose model.reverse_target is "
                          f"{str(model.reverse_target).lower()}")


def load_json(path: Path) -> Any:
    """A JSON file's content, or None where it cannot be read."""
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def unknown_word_list(model: str | os.PathLike[str], where: str = "rnnsearch") -> dict[str, Any]:
    """What UNK1 counts the words of a hypothesis against, for the model ``model`` (a model directory or its
    training config): the model's target vocabulary; for a subword model, whose vocabulary holds pieces (with
    which every word is "known"), the ``trg_vocab_size`` most frequent words of its training target text, the
    shortlist a word model of the same data would have."""
    path = Path(model)
    data = load_yaml(path / CONFIG if path.is_dir() else path)
    if not isinstance(data, dict):
        raise RerankError(f"{where}: {path}: expected a training config (a mapping)")
    model_section = data.get("model")
    subwords = model_section.get("subwords") if isinstance(model_section, dict) else None
    if subwords is None and not (path / SUBWORD_MODEL).exists():
        return {"vocab": str(path / "vocab.trg.txt")}
    section = data.get("data")
    train = section.get("train") if isinstance(section, dict) else None
    target = train.get("target") if isinstance(train, dict) else None
    prepared = section.get("prepared") if isinstance(section, dict) else None
    if target is None and isinstance(prepared, str):  # the text it was prepared from
        manifest = load_json(Path(prepared) / "manifest.json")
        inputs = manifest.get("inputs") if isinstance(manifest, dict) else None
        record = inputs.get("target") if isinstance(inputs, dict) else None
        target = record.get("path") if isinstance(record, dict) else None
    if not isinstance(target, str) or not os.path.isfile(target):
        raise RerankError(f"{where}: {path}: a subword model's vocabulary holds pieces, and UNK1 counts words: "
                          "expected its data.train.target (the target text whose most frequent words are the "
                          f"shortlist), got {target!r}")
    size = section.get("trg_vocab_size", 15000) if isinstance(section, dict) else 15000
    return {"corpus": target, "shortlist": size if isinstance(size, int) and size > 0 else 15000}
