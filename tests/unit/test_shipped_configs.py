"""Every config the repository ships loads with the loader its command uses, and every config or
model an experiment names from the repository is there: a renamed or mistyped file fails here, not
half an hour into a study."""

from __future__ import annotations

from pathlib import Path

import pytest

from rerank.config import load_config, load_config_data
from rerank.features.registry import read_specs
from rerank.rescore.append import RescoreConfig
from rerank.study.config import ExperimentConfig, load_experiment
from rerank.training.config import CSLMTrainConfig, load_train_config, read_train_config
from rerank.tune.config import TuneConfig

REPO = Path(__file__).resolve().parents[2]
CONFIGS = REPO / "configs"
EXPERIMENTS = sorted((CONFIGS / "experiments").glob("*.yaml"))
TUNING, CSLM = CONFIGS / "tuning" / "tune.yaml", CONFIGS / "training" / "cslm.yaml"
TRAINING = sorted(path for path in (CONFIGS / "training").rglob("*.yaml") if path != CSLM)
RESCORING = sorted((CONFIGS / "rescoring").glob("*.yaml"))


def named_files(config: ExperimentConfig) -> list[str]:
    """The models and training configs an experiment names (trained ones under runs/ are made by other steps)."""
    names = [config.encdec, config.rnnsearch, config.right_to_left, config.channel, config.cslm,
             config.distill.student if config.distill else None]
    return [name for name in names if name is not None and not name.startswith("runs/")]


def test_there_are_configs_to_check() -> None:
    assert len(EXPERIMENTS) >= 10 and len(TRAINING) >= 15 and len(RESCORING) >= 4


@pytest.mark.parametrize("path", TRAINING, ids=lambda p: str(p.relative_to(REPO)))
def test_each_training_config_loads(path: Path) -> None:
    config = load_train_config(path)
    assert config.output_dir.startswith("runs/")


@pytest.mark.parametrize("path", EXPERIMENTS, ids=lambda p: p.name)
def test_each_experiment_loads_and_what_it_names_is_in_the_repository(path: Path) -> None:
    config = load_experiment(path)
    for name in named_files(config):
        assert (REPO / name).exists(), f"{path.name}: {name} is not in the repository"
        if name.endswith(".yaml") and "cslm" not in name:
            load_train_config(REPO / name)


@pytest.mark.parametrize("path", RESCORING, ids=lambda p: p.name)
def test_each_rescoring_config_loads_with_its_features(path: Path) -> None:
    config = load_config(RescoreConfig, path)
    assert read_specs(config.features, source=str(path))  # kinds, labels and settings checked, no model loaded


def test_the_tuning_and_cslm_configs_load() -> None:
    load_config(TuneConfig, TUNING)
    assert isinstance(read_train_config(load_config_data(CSLM), str(CSLM)), CSLMTrainConfig)


def test_every_config_in_the_repository_is_loaded_here() -> None:
    loaded = {*EXPERIMENTS, *TRAINING, *RESCORING, TUNING, CSLM}
    assert sorted(set(CONFIGS.rglob("*.yaml")) - loaded) == []
    assert sorted(CONFIGS.glob("*.yaml")) == []  # each config in the folder of its use (configs/README.md)
