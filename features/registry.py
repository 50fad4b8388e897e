"""The registry of feature kinds: each kind's name in YAML and its class, listed in this one place.

A feature is described in YAML as a mapping with ``kind`` plus the keys of that kind's ``Config``
dataclass (see :mod:`rerank.features`).
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, cast

from rerank.config import from_dict
from rerank.errors import ConfigError, did_you_mean, did_you_mean_path
from rerank.features.cslm import ContinuousSpaceLM
from rerank.features.ctranslate2 import CTranslate2Model
from rerank.features.hf import HuggingFaceModel
from rerank.features.language_model import LanguageModel
from rerank.features.mbr import ConsensusScore
from rerank.features.nmt import NeuralTranslationModel
from rerank.features.word_penalty import UnknownWordCount, WordPenalty
from rerank.formats.nbest import check_label
from rerank.formats.scored import describing_record, file_entry
from rerank.models.config import WEIGHTS
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
# The keys that say how a feature computes, not what: left out of the record of a scored list.
HOW_KEYS = ("name", "device", "max_tokens", "window", "threads")


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

    @property
    def scores_lists(self) -> bool:
        """Whether its values depend on the whole list (a consensus feature), so that they are never reused."""
        return callable(getattr(self.cls, "score_lists", None))

    def build(self) -> Feature:
        return cast(Feature, self.cls(self.config))

    def identity(self, source: str | os.PathLike[str] | None) -> dict[str, Any]:
        """What the feature's values are computed from, for the record of a scored list
        (:mod:`rerank.formats.scored`): its kind, every option but those of :data:`HOW_KEYS`, each file it reads
        with its content's digest (a model directory's weights), and with ``source`` where it reads the source."""
        entry: dict[str, Any] = {"kind": next(kind for kind, cls in FEATURES.items() if cls is self.cls)}
        for field in dataclasses.fields(self.config):
            value = getattr(self.config, field.name)
            if field.name in HOW_KEYS:
                continue
            if field.name in FILE_KEYS and value is not None:
                paths = [_read_file(path) for path in _paths(value)]
                entry[field.name] = paths[0] if isinstance(value, str) else paths
            else:
                entry[field.name] = list(value) if isinstance(value, tuple) else value
        if self.needs_source:
            entry["source"] = file_entry(source) if source is not None else None
        return entry


def scored_record(specs: Sequence[FeatureSpec], source: str | os.PathLike[str] | None,
                  nbest: str | os.PathLike[str]) -> dict[str, dict[str, Any]]:
    """The record of the list that scoring ``nbest`` with ``specs`` writes (:mod:`rerank.formats.scored`): the
    features of ``nbest``'s own record, where it describes the list (their values pass through), and each
    spec's :meth:`~FeatureSpec.identity`."""
    inherited = describing_record(nbest) if str(nbest) != "-" else None
    return {**(inherited.features if inherited is not None else {}),
            **{spec.label: spec.identity(source) for spec in specs}}


def _read_file(path: str) -> dict[str, Any]:
    """A file's entry in a record; a model directory's is its weights' (rerank's), or its files' (a pretrained
    model's)."""
    weights = os.path.join(path, WEIGHTS)
    return file_entry(path, weights if os.path.isdir(path) and os.path.exists(weights) else None)


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
                raise ConfigError(f"{source}: {kind}.{key}: {path}: no such file or directory{did_you_mean_path(path)}")
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
