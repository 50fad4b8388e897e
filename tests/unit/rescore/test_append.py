"""The rescoring config: the shipped one loads, and its settings are checked; a label the list has is refused."""

from __future__ import annotations

from pathlib import Path

import pytest

from rerank.config import from_dict, load_config
from rerank.errors import ConfigError, RerankError
from rerank.formats.nbest import FeatureLayout
from rerank.rescore.append import RescoreConfig, check_new_labels

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


def test_a_label_the_list_has_is_refused_with_how_to_rename_it() -> None:
    layout = FeatureLayout(("RNNsearch0", "WP0"), (1, 1))
    check_new_labels(layout, ["RNNsearch1", "LM1"], "dev.nbest")
    with pytest.raises(RerankError, match=r"^dev.nbest: the n-best list already has the feature\(s\) RNNsearch0; "
                                          r"give the new feature another label \(--model-label NAME\)$"):
        check_new_labels(layout, ["RNNsearch0", "LM1"], "dev.nbest", {"RNNsearch0": "--model-label NAME"})
    with pytest.raises(RerankError, match=r"RNNsearch0, WP0; give the new feature another label$"):
        check_new_labels(layout, ["RNNsearch0", "WP0"], "dev.nbest")
