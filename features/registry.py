"""The registry of feature kinds: each kind's name in YAML and its class, listed in this one place.

A feature is described in YAML as a mapping with ``kind`` plus the keys of that kind's ``Config``
dataclass (see :mod:`rerank.features`).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, cast

from rerank.config import from_dict
from rerank.errors import ConfigError, did_you_mean
from rerank.features.cslm import ContinuousSpaceLM
from rerank.features.ctranslate2 import CTranslate2Model
from rerank.features.hf import HuggingFaceModel
from rerank.features.language_model import LanguageModel
from rerank.features.mbr import ConsensusScore
from rerank.features.nmt import NeuralTranslationModel
from rerank.features.word_penalty import UnknownWordCount, WordPenalty
from rerank.formats.nbest import check_label
from rerank.rescore.feature import Feature

FEATURES: dict[str, type[Any]] = {
    "kenlm": LanguageModel,
    "word-penalty": WordPenalty,
    "unk-penalty": UnknownWordCount,
    "nmt": NeuralTranslationModel,
    "cslm": ContinuousSpaceLM,
    "mbr": ConsensusScore,
    "hf": HuggingFaceModel,
    "ctranslate2": CTranslate2Model,
}


# The keys of the kinds' configs that name files or model directories (a config file's found from its own
# directory too: rerank.config.resolved_input).
FILE_KEYS = ("path", "vocab", "corpus", "model", "lm", "tokenizer")


def _paths(value: object) -> tuple[str, ...]:
    if isinstance(value, str):
        return (value,)
    return tuple(v for v in value if isinstance(v, str)) if isinstance(value, (tuple, list)) else ()


@dataclass(frozen=True)
class FeatureSpec:
    """A feature read from its config mapping but not built yet (no model loaded): what can be checked
    before the expensive work starts."""

    cls: type[Any]
    config: Any

    @property
    def label(self) -> str:
        return str(self.cls.label(self.config))

    @property
    def needs_source(self) -> bool:
        return bool(self.cls.needs_source)

    def build(self) -> Feature:
        return cast(Feature, self.cls(self.config))


def read_spec(spec: Mapping[str, Any], source: str = "config") -> FeatureSpec:
    """One feature's config mapping (``kind`` plus the keys of that kind's ``Config``), checked."""
    if not isinstance(spec, Mapping) or "kind" not in spec:
        raise ConfigError(f"{source}: a feature needs a 'kind' (one of {', '.join(FEATURES)}), got {spec!r}")
    kind = spec["kind"]
    if kind not in FEATURES:
        raise ConfigError(f"{source}: unknown feature kind {kind!r}{did_you_mean(str(kind), FEATURES)}; "
                          f"known kinds: {', '.join(FEATURES)}")
    cls = FEATURES[kind]
    config = from_dict(cls.Config, {k: v for k, v in spec.items() if k != "kind"}, source, prefix=kind)
    for key in FILE_KEYS:  # a file the feature reads is checked here, where the config and the key are known
        for path in _paths(getattr(config, key, None)):
            if not os.path.exists(path):
                raise ConfigError(f"{source}: {kind}.{key}: {path}: no such file or directory")
    try:
        if config.name is not None:  # None: the feature chooses its label (nmt: from the model's architecture)
            check_label(config.name)
    except ValueError as e:
        raise ConfigError(f"{source}: {kind}: {e}") from None
    return FeatureSpec(cls, config)


def read_specs(specs: Sequence[Mapping[str, Any]], source: str = "config") -> list[FeatureSpec]:
    """Several features' config mappings, checked; their labels must be distinct."""
    read = [read_spec(spec, source) for spec in specs]
    labels = [spec.label for spec in read]
    duplicates = sorted({label for label in labels if labels.count(label) > 1})
    if duplicates:
        raise ConfigError(f"{source}: feature label(s) used twice: {', '.join(duplicates)}")
    return read


def build_feature(spec: Mapping[str, Any], source: str = "config") -> Feature:
    """One feature from its config mapping."""
    return read_spec(spec, source).build()


def build_features(specs: Sequence[Mapping[str, Any]], source: str = "config") -> list[Feature]:
    """Features from their config mappings, all checked before any is built; labels must be distinct."""
    return [spec.build() for spec in read_specs(specs, source)]
