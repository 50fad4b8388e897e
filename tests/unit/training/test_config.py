"""Training configs: the config class chosen by the model's architecture, and the batch sizes by device."""

from __future__ import annotations

import pytest

from rerank.config import from_dict
from rerank.errors import ConfigError
from rerank.models.config import CSLMConfig, ModelConfig, model_config_type
from rerank.training.config import (
    GPU_BATCH_TOKENS,
    CSLMTrainConfig,
    TrainConfig,
    TrainingConfig,
    train_config_type,
)


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


def test_the_cpu_default_is_batch_size_and_a_gpu_default_fills_it() -> None:
    default = TrainingConfig()
    assert default.batch_tokens_on("cpu") is None and default.batch_tokens_on("cuda") == GPU_BATCH_TOKENS
    off = from_dict(TrainingConfig, {"batch_tokens": 0}, "test")
    assert off.batch_tokens_on("cuda") is None
    assert from_dict(TrainingConfig, {"batch_tokens": 3000}, "test").batch_tokens_on("cpu") == 3000
    with pytest.raises(ConfigError, match="batch_tokens: expected an integer of at least 0"):
        from_dict(TrainingConfig, {"batch_tokens": -1}, "test")
