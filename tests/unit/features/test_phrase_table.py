"""A feature as a phrase table's scorer (score-table --feature): one ln p per pair, from a translation model's
feature of one value; a feature of no source or of two values is refused before anything loads."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import yaml

from rerank.errors import ConfigError
from rerank.features.phrase_table import FeatureTableScorer, read_table_feature
from rerank.features.registry import build_feature
from rerank.scoring.pairs import ScoringConfig


def written(tmp_path: Path, spec: dict[str, object]) -> str:
    path = tmp_path / "feature.yaml"
    path.write_text(yaml.safe_dump(spec), encoding="utf-8")
    return str(path)


def test_the_options_go_over_the_keys_the_feature_has(tmp_path: Path) -> None:
    model = Path(__file__).resolve().parents[3] / "examples" / "models" / "rnnsearch"
    path = written(tmp_path, {"kind": "nmt", "model": str(model), "max_tokens": 100})
    spec = read_table_feature(path, {"max_tokens": 7, "precision": None, "threads": 2})
    assert (spec.config.max_tokens, spec.config.precision) == (7, "fp32")  # nmt has no threads: not given to it


def test_a_feature_of_no_source_or_of_two_values_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"feature.yaml: a phrase table's column is one ln p\(target \| source\): "
                                          r"expected a translation model's feature .*, got kind word-penalty$"):
        read_table_feature(written(tmp_path, {"kind": "word-penalty"}), {})
    model = Path(__file__).resolve().parents[3] / "examples" / "models" / "rnnsearch"
    with pytest.raises(ConfigError, match=r"got kind nmt with per_word$"):
        read_table_feature(written(tmp_path, {"kind": "nmt", "model": str(model), "per_word": True}), {})


def test_the_scorer_gives_the_features_value(test_data: Path) -> None:
    model = Path(__file__).resolve().parents[3] / "examples" / "models" / "rnnsearch"
    feature = build_feature({"kind": "nmt", "model": str(model)})
    pairs = [("a dog".split(), "un chien".split()), ("a man".split(), "un homme".split())]
    scorer = FeatureTableScorer(feature, ScoringConfig(window=5))
    assert scorer.config.window == 5
    np.testing.assert_array_equal(scorer.score_prepared(scorer.prepare(pairs)), feature.score(pairs)[:, 0])
    with pytest.raises(ValueError, match="gives 2 values"):
        FeatureTableScorer(build_feature({"kind": "nmt", "model": str(model), "per_word": True}))
