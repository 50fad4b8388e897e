"""The rescoring config: the shipped one loads, and its settings are checked."""

from __future__ import annotations

from pathlib import Path

import pytest

from rerank.config import from_dict, load_config
from rerank.errors import ConfigError
from rerank.rescore.append import RescoreConfig

REPO = Path(__file__).resolve().parents[3]


def test_rescore_config_shipped() -> None:
    config = load_config(RescoreConfig, REPO / "configs" / "rescoring" / "rescore.yaml")
    assert [spec["kind"] for spec in config.features] == ["kenlm", "word-penalty", "unk-penalty"]
    assert config.batch_sentences >= 1


def test_rescore_config_checks() -> None:
    with pytest.raises(ConfigError, match="batch_sentences must be positive"):
        from_dict(RescoreConfig, {"batch_sentences": 0})
    with pytest.raises(ConfigError, match=r"'features\[0\]': expected a mapping"):
        from_dict(RescoreConfig, {"features": ["kenlm"]})
