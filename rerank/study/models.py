"""The study's models: trained (``rerank train``), or taken as they are where the config names model directories."""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rerank.config import from_dict, load_config_data, with_overrides
from rerank.study.config import ExperimentConfig
from rerank.study.rows import EXTRA_FEATURES
from rerank.study.runner import StepRunner
from rerank.study.steps import train_model
from rerank.training.config import load_train_config

logger = logging.getLogger(__name__)


def device_flag(config: ExperimentConfig) -> list[str]:
    """``--device`` for the commands.sh line of a step that runs a model (none for the CPU)."""
    return [] if config.device == "cpu" else ["--device", config.device]


def train_models(config: ExperimentConfig, steps: StepRunner) -> dict[str, Path]:
    """Every model of the study by name (encdec, rnnsearch, rnnsearch-seedN, right_to_left, channel, phrases, cslm,
    and distilled, the student of ``distill``).
    Every training config is read and checked before the first model trains."""
    from rerank.training.cslm import CSLMTrainConfig, train_cslm

    c = config
    runs: list[tuple[str, str, int | None]] = [("encdec", c.encdec, None), ("rnnsearch", c.rnnsearch, None)]
    runs += [(f"rnnsearch-seed{seed}", c.rnnsearch, seed) for seed in c.ensemble_seeds]
    runs += [(name, path, None) for name, path in
             (("right_to_left", c.right_to_left), ("channel", c.channel), ("phrases", c.phrases), ("cslm", c.cslm))
             if path is not None]
    models: dict[str, Path] = {}
    trainings: list[tuple[str, list[object], Callable[..., object], Any]] = []
    for name, path, seed in runs:
        if Path(path).is_dir():
            logger.info("%s: the trained model in %s", name, path)
            models[name] = Path(path)
            continue
        directory = models[name] = steps.out / "models" / name
        train: Callable[..., object] = train_model
        if name == "cslm":
            data = load_config_data(path)
            train_config: Any = from_dict(CSLMTrainConfig, data if data is not None else {}, path)
            train = train_cslm
        else:
            train_config = load_train_config(path)
        # the overrides of `rerank train --output-dir --seed`
        train_config = with_overrides(train_config, {"output_dir": str(directory), "training.seed": seed})
        seed_flag: list[object] = ["--seed", seed] if seed is not None else []
        trainings.append((name, ["train", "--config", path, "--output-dir", directory, *seed_flag,
                                 *device_flag(c)], train, train_config))
    for name, argv, train, train_config in trainings:
        steps.rerank(argv, [], train, train_config, c.device, timing=f"train {name}")
    if c.distill is not None:
        models["distilled"] = distill_student(c, steps, models)
    return models


def distill_student(config: ExperimentConfig, steps: StepRunner, models: dict[str, Path]) -> Path:
    """``rerank distill``: the student of ``distill.student`` trained on the translations of the RNNsearch ensemble
    (rnnsearch and its ensemble_seeds); its model directory."""
    from rerank.search.beam import LengthPenalty, SearchConfig
    from rerank.study.distill import STUDENT, Distillation, train_student

    c, settings = config, config.distill
    assert settings is not None
    teacher = [models["rnnsearch"], *(models[f"rnnsearch-seed{seed}"] for seed in c.ensemble_seeds)]
    search = SearchConfig(beam_size=c.beam, nbest=settings.nbest, length_penalty=LengthPenalty(c.length_penalty))
    distillation = Distillation(tuple(map(str, teacher)), search, settings.targets, settings.chunk_lines)
    r2l: list[object] = []
    if settings.r2l_weight is not None:  # the right-to-left model reranks the teacher's beam
        distillation = dataclasses.replace(distillation, r2l_model=(str(models["right_to_left"]),),
                                           r2l_weight=settings.r2l_weight)
        r2l = ["--r2l-model", models["right_to_left"], "--r2l-weight", settings.r2l_weight]
    directory = steps.out / "models" / "distilled"
    student = load_train_config(settings.student)
    steps.rerank(["distill", "--teacher", *teacher, "--config", settings.student, "--output-dir", directory,
                  "--beam", c.beam, "--length-penalty", c.length_penalty, "--nbest", settings.nbest,
                  "--targets", settings.targets, "--chunk-lines", settings.chunk_lines, *r2l, *device_flag(c)], [],
                 train_student, student, distillation, directory, c.device, timing="distill")
    return directory / STUDENT


def extra_features(config: ExperimentConfig) -> tuple[str, ...]:
    """The labels of the extra models' features this study has (see :data:`EXTRA_FEATURES`), then those of the
    config's ``features``."""
    from rerank.features.registry import read_spec

    present = {"ensemble": bool(config.ensemble_seeds), "right_to_left": config.right_to_left is not None,
               "channel": config.channel is not None, "cslm": config.cslm is not None}
    return (*(label for key, label in EXTRA_FEATURES.items() if present[key]),
            *(read_spec(spec, "features").label for spec in config.features))
