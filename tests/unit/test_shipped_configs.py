"""Every config the repository ships loads with the loader its command uses, and every config or
model an experiment names from the repository is there: a renamed or mistyped file fails here, not
half an hour into a study."""

from __future__ import annotations

from pathlib import Path

import pytest

from rerank.study.config import ExperimentConfig, load_experiment
from rerank.training.config import load_train_config

REPO = Path(__file__).resolve().parents[2]
EXPERIMENTS = sorted((REPO / "configs" / "experiments").glob("*.yaml"))
TRAINING = sorted([*(REPO / "configs").glob("encdec*.yaml"), *(REPO / "configs").glob("rnnsearch*.yaml"),
                   *(REPO / "configs" / "recipe").glob("*.yaml"), *(REPO / "configs" / "shipped").glob("*.yaml"),
                   *(REPO / "configs" / "sample").glob("*.yaml")])


def named_files(config: ExperimentConfig) -> list[str]:
    """The models and training configs an experiment names (trained ones under runs/ are made by other steps)."""
    names = [config.encdec, config.rnnsearch, config.right_to_left, config.channel, config.cslm]
    return [name for name in names if name is not None and not name.startswith("runs/")]


def test_there_are_configs_to_check() -> None:
    assert len(EXPERIMENTS) >= 10 and len(TRAINING) >= 15


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
