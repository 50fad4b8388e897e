"""Feature functions for n-best rescoring, and the registry that builds them from config.

Each kind is a class with a ``Config`` dataclass; a feature is described in YAML as a mapping
with ``kind`` plus that config's keys::

    features:
      - {kind: kenlm, name: LM1, path: lm/train.fr.4.arpa}
      - {kind: word-penalty, name: WP1}
      - {kind: nmt, model: runs/encdec-small}      # RNN0 (RNNsearch0 for an RNNsearch model)

Modules are imported explicitly below, so the registry holds exactly what is listed here.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

from features.base import Feature, Pair
from rerank.config import from_dict
from rerank.errors import ConfigError
from rerank.formats.nbest import check_label

FEATURES: dict[str, type] = {}
F = TypeVar("F", bound=type)


def register_feature(kind: str) -> Callable[[F], F]:
    """Class decorator: make a feature class buildable as ``{kind: <kind>, ...}``."""
    def add(cls: F) -> F:
        if kind in FEATURES:
            raise ValueError(f"feature kind {kind!r} registered twice")
        FEATURES[kind] = cls
        return cls
    return add


def build_feature(spec: Mapping[str, Any], source: str = "config") -> Feature:
    """One feature from its config mapping (``kind`` plus the keys of that kind's ``Config``)."""
    if not isinstance(spec, Mapping) or "kind" not in spec:
        raise ConfigError(f"{source}: a feature needs a 'kind' (one of {', '.join(FEATURES)}), got {spec!r}")
    kind = spec["kind"]
    if kind not in FEATURES:
        raise ConfigError(f"{source}: unknown feature kind {kind!r}; known kinds: {', '.join(FEATURES)}")
    cls = FEATURES[kind]
    config = from_dict(cls.Config, {k: v for k, v in spec.items() if k != "kind"}, source, prefix=kind)
    try:
        if config.name is not None:  # None: the feature chooses its label (nmt: from the model's architecture)
            check_label(config.name)
    except ValueError as e:
        raise ConfigError(f"{source}: {kind}: {e}") from None
    return cls(config)


def build_features(specs: Sequence[Mapping[str, Any]], source: str = "config") -> list[Feature]:
    """Features from their config mappings; labels must be distinct."""
    built = [build_feature(spec, source) for spec in specs]
    labels = [f.name for f in built]
    duplicates = sorted({label for label in labels if labels.count(label) > 1})
    if duplicates:
        raise ConfigError(f"{source}: feature label(s) used twice: {', '.join(duplicates)}")
    return built


# Explicit imports: each module registers its kinds.
from features import language_model, nmt, word_penalty  # noqa: E402,F401

__all__ = ["FEATURES", "Feature", "Pair", "build_feature", "build_features", "register_feature"]
