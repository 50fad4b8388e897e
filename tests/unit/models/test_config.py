"""Model configs: the sizes and rates derived from them, their labels, the options refused where they cannot
work, and the model section of a model directory read as the config class of its architecture."""

from __future__ import annotations

from pathlib import Path

import pytest

from rerank.errors import ConfigError, RerankError
from rerank.models.config import (
    CONFIG,
    AttentionConfig,
    CSLMConfig,
    ModelConfig,
    default_label,
    model_config_type,
    read_model_config,
    read_model_section,
)


def test_the_derived_sizes_and_rates() -> None:
    config = ModelConfig(hidden_size=16, encoder_hidden_size=8, maxout_size=4, dropout=0.2, hidden_dropout=0.0)
    assert (config.encoder_size, config.annotation_size, config.output_input_size) == (8, 16, 4)
    assert (config.embedding_dropout_rate, config.hidden_dropout_rate) == (0.2, 0.0)
    assert ModelConfig(architecture="encdec", hidden_size=16).annotation_size == 16  # the summary c
    assert ModelConfig(hidden_size=16, decoder="luong").output_input_size == 16  # Luong's h̃


def test_the_label_of_each_model() -> None:
    assert default_label(ModelConfig()) == "RNNsearch0" and default_label(ModelConfig(architecture="encdec")) == "RNN0"
    assert default_label(ModelConfig(reverse_target=True)) == "R2L0"


@pytest.mark.parametrize(("settings", "message"), [
    ({"input_feeding": True}, "input_feeding needs architecture: rnnsearch with decoder: luong"),
    ({"hidden_size": 16, "encoder_hidden_size": 16, "attention": AttentionConfig(score="dot")},
     r"the dot score compares decoder states \(16\) with annotations \(2 x 16\): set encoder_hidden_size: 8"),
    ({"dropout": 1.0}, "dropout"),
    ({"embedding_rank": 10, "tie_target_embeddings": True, "maxout_size": 620}, "tied embeddings need full-rank"),
])
def test_options_that_cannot_work_are_refused(settings: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        ModelConfig(**settings)


def test_a_cslm_needs_layers_and_a_context() -> None:
    with pytest.raises(ValueError, match=r"hidden_sizes: expected a list of positive sizes, got \[\]"):
        CSLMConfig(hidden_sizes=())
    with pytest.raises(ValueError, match="order"):
        CSLMConfig(order=1)


def test_the_model_section_is_read_as_its_architectures_config(tmp_path: Path) -> None:
    assert model_config_type({"architecture": "cslm"}) is CSLMConfig
    assert model_config_type({}) is ModelConfig and model_config_type({"architecture": "lstm"}) is ModelConfig
    (tmp_path / CONFIG).write_text("model:\n  architecture: encdec\n  hidden_size: 32\n", encoding="utf-8")
    assert read_model_config(tmp_path) == ModelConfig(architecture="encdec", hidden_size=32)
    with pytest.raises(ConfigError, match=r"config.yaml: model.architecture is 'encdec', not 'cslm'"):
        read_model_section(tmp_path, CSLMConfig)
    (tmp_path / CONFIG).write_text("model:\n  architecture: rnnsearch\n  hiden_size: 32\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=r"config.yaml: unknown key 'model.hiden_size'"):
        read_model_config(tmp_path)
    (tmp_path / CONFIG).write_text("data: {}\n", encoding="utf-8")
    with pytest.raises(RerankError, match=r"config.yaml: expected a 'model:' section"):
        read_model_config(tmp_path)
    (tmp_path / "elsewhere").mkdir()
    with pytest.raises(RerankError, match=r"elsewhere: not a model directory \(no config.yaml\)"):
        read_model_config(tmp_path / "elsewhere")
    with pytest.raises(RerankError, match=r"elsewher: no such directory \(did you mean '.*elsewhere'\?\)$"):
        read_model_config(tmp_path / "elsewher")
