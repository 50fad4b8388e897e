"""The one training loop's rules for both kinds of model: the config class chosen by the model's architecture,
and the resume rule (a saved config read with today's defaults) for a CSLM as for a translation model."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from rerank.errors import RerankError
from rerank.models.checkpoint import CHECKPOINT, load_state
from rerank.models.config import CONFIG, CSLMConfig, ModelConfig, model_config_type
from rerank.training.config import CSLMData, CSLMTrainConfig, CSLMTraining, TrainConfig, train_config_type
from rerank.training.cslm import CSLMTrainer

TEXT = ["the cat sat on the mat", "the dog sat on the log", "a cat and a dog", "the mat and the log"] * 3


@pytest.mark.parametrize(("data", "kind", "model"), [
    ({"model": {"architecture": "cslm"}}, CSLMTrainConfig, CSLMConfig),
    ({"model": {"architecture": "encdec"}}, TrainConfig, ModelConfig),
    ({"model": {}}, TrainConfig, ModelConfig),  # rnnsearch, the default
    ({"model": {"architecture": "transformer"}}, TrainConfig, ModelConfig),  # its reading names the known ones
    (None, TrainConfig, ModelConfig),
])
def test_the_config_class_is_chosen_by_the_architecture(data: object, kind: type, model: type) -> None:
    assert train_config_type(data) is kind
    assert model_config_type(data.get("model") if isinstance(data, dict) else None) is model


def cslm_config(tmp_path: Path, **training: object) -> CSLMTrainConfig:
    (tmp_path / "train.txt").write_text("\n".join(TEXT) + "\n")
    return CSLMTrainConfig(model=CSLMConfig(order=3, embedding_size=4, hidden_sizes=(8,)),
                           data=CSLMData(train=str(tmp_path / "train.txt"), valid=str(tmp_path / "train.txt"),
                                         min_count=1),
                           training=CSLMTraining(batch_size=8, valid_every=2, log_every=1000, **training),  # type: ignore[arg-type]
                           output_dir=str(tmp_path / "cslm"))


def test_a_cslm_run_saved_before_a_key_was_added_resumes(tmp_path: Path) -> None:
    CSLMTrainer(cslm_config(tmp_path, max_updates=2)).train()
    path = tmp_path / "cslm" / CONFIG
    saved = yaml.safe_load(path.read_text())
    del saved["model"]["dropout"], saved["data"]["max_words"]  # as a run written before these keys existed
    path.write_text(yaml.safe_dump(saved))
    resumed = CSLMTrainer(cslm_config(tmp_path, max_updates=4))
    assert resumed.progress.updates == 2
    assert resumed.train().updates == 4
    assert load_state(tmp_path / "cslm" / CHECKPOINT)["progress"]["updates"] == 4


def test_a_cslm_run_with_another_model_is_refused(tmp_path: Path) -> None:
    CSLMTrainer(cslm_config(tmp_path, max_updates=2)).train()
    path = tmp_path / "cslm" / CONFIG
    saved = yaml.safe_load(path.read_text())
    saved["model"]["order"] = 4
    path.write_text(yaml.safe_dump(saved))
    with pytest.raises(RerankError, match="holds a run with another 'model' config"):
        CSLMTrainer(cslm_config(tmp_path, max_updates=4))
