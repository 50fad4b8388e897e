"""Weights files (YAML and moses.ini), --weight flags, and the vector aligned with an n-best list's features."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from rerank.errors import ConfigError, RerankError
from rerank.formats.nbest import FeatureLayout
from rerank.formats.weights import as_weights, load_weights, parse_weight_assignment, save_weights, weight_vector

LAYOUT = FeatureLayout(("Distortion0", "LM0", "WordPenalty0", "PhrasePenalty0", "TranslationModel0"), (1, 1, 1, 1, 4))


def test_yaml_and_moses_ini_give_the_same_weights(test_data: Path, multi30k_slice: dict[str, Path]) -> None:
    from_yaml = load_weights(test_data / "weights.yaml")
    from_ini = load_weights(multi30k_slice["moses_ini"])
    assert from_ini.pop("UnknownWordPenalty0") == (1.0,)
    assert from_yaml == from_ini


def test_weight_vector_follows_the_layout(test_data: Path) -> None:
    vector = weight_vector(load_weights(test_data / "weights.yaml"), LAYOUT, source="w")
    np.testing.assert_array_equal(vector, [0.138061, 0.15949, -0.225306, 0.105148,
                                           0.126263, 0.0567749, 0.12818, 0.0607768])
    assert as_weights(vector, LAYOUT) == load_weights(test_data / "weights.yaml")


def test_unknown_labels() -> None:
    weights = {"Distortion0": [1], "LM0": [1], "WordPenalty0": [1], "PhrasePenalty0": [1],
               "TranslationModel0": [1] * 4, "UnknownWordPenalty0": [1]}
    with pytest.raises(RerankError, match="w: weights for features the n-best list does not have: UnknownWordPenalty0"):
        weight_vector(weights, LAYOUT, source="w")
    assert weight_vector(weights, LAYOUT, source="w", ignore_unknown=True).tolist() == [1.0] * 8


def test_missing_labels() -> None:
    with pytest.raises(RerankError, match="no weight for the n-best features WordPenalty0, PhrasePenalty0, "
                                          "TranslationModel0"):
        weight_vector({"Distortion0": [1], "LM0": [2]}, LAYOUT, source="w")
    vector = weight_vector({"Distortion0": [1], "LM0": [2]}, LAYOUT, source="w", missing=0.0)
    assert vector.tolist() == [1, 2] + [0.0] * 6


def test_wrong_number_of_values() -> None:
    with pytest.raises(RerankError, match="TranslationModel0 has 4 values in the n-best list but 2 weights"):
        weight_vector({"TranslationModel0": [1, 2]}, LAYOUT, source="w", missing=0.0)


@pytest.mark.parametrize("text, parsed", [("LM1=0.5", ("LM1", (0.5,))), ("TM0=0.1,0.2", ("TM0", (0.1, 0.2))),
                                          (" WP1 = -1 ", ("WP1", (-1.0,)))])
def test_parse_weight_assignment(text: str, parsed: tuple) -> None:
    assert parse_weight_assignment(text) == parsed


@pytest.mark.parametrize("text", ["LM1", "LM1=", "=0.5", "LM1=x", "LM1=0.5,"[:-1] + ",a"])
def test_parse_weight_assignment_errors(text: str) -> None:
    with pytest.raises(RerankError, match="expected Label=value or Label=v1,v2"):
        parse_weight_assignment(text)


def test_save_and_load(tmp_path: Path) -> None:
    weights = {"LM1": (0.1,), "TranslationModel0": (0.2, -0.3)}
    save_weights(weights, tmp_path / "w.yaml")
    assert load_weights(tmp_path / "w.yaml") == weights
    assert "LM1: 0.1\n" in (tmp_path / "w.yaml").read_text()


@pytest.mark.parametrize("text", ["- 1\n- 2\n", "LM0: abc\n", "LM0: []\n", "LM0: true\n"])
def test_bad_yaml_weights(tmp_path: Path, text: str) -> None:
    path = tmp_path / "w.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError, match="w.yaml"):
        load_weights(path)
