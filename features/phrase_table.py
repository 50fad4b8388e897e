"""A feature's ln p(target | source) as a phrase table's new column (``rerank score-table --feature YAML``): a
translation model's feature of one value (``nmt``, ``hf``, ``ctranslate2``: the sum, or the channel's
ln p(source | target)) scores the table's phrase pairs a window at a time."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from rerank.config import load_config_data, with_overrides
from rerank.errors import ConfigError
from rerank.features.registry import FeatureSpec, read_spec
from rerank.formats.tokens import Pair
from rerank.rescore.feature import Feature
from rerank.scoring.pairs import ScoringConfig


def read_table_feature(path: str, overrides: Mapping[str, Any]) -> FeatureSpec:
    """The feature of the YAML file ``path`` (one mapping: ``kind`` and its keys), with the command's options
    (``overrides``: keys of its config, None for those not given) put over the keys it has; checked to give
    one ln p of the pair: a translation model's, without its per-word form."""
    spec = read_spec(load_config_data(path), source=path)
    given = {key: value for key, value in overrides.items() if value is not None and hasattr(spec.config, key)}
    spec = dataclasses.replace(spec, config=with_overrides(spec.config, given))
    if not spec.needs_source or getattr(spec.config, "per_word", True):
        raise ConfigError(f"{path}: a phrase table's column is one ln p(target | source): expected a translation "
                          "model's feature (kind nmt, hf or ctranslate2) without per_word, got kind "
                          f"{_kind(spec)}{' with per_word' if getattr(spec.config, 'per_word', False) else ''}")
    return spec


def _kind(spec: FeatureSpec) -> str:
    from rerank.features.registry import FEATURES

    return next(kind for kind, cls in FEATURES.items() if cls is spec.cls)


class FeatureTableScorer:
    """Scores a phrase table's windows of pairs with a feature of one value (a
    :class:`~rerank.scoring.table.TableScorer`)."""

    def __init__(self, feature: Feature, config: ScoringConfig | None = None):
        if feature.dims != 1:
            raise ValueError(f"feature {feature.name} gives {feature.dims} values; a table's column takes one")
        self.feature = feature
        self.config = config or ScoringConfig()

    def prepare(self, pairs: Sequence[Pair]) -> Sequence[Pair]:
        return pairs

    def score_prepared(self, window: Sequence[Pair]) -> np.ndarray:
        return np.asarray(self.feature.score(window), dtype=np.float64)[:, 0]
