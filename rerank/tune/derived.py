"""Features made from a scored list's own columns while tuning, without scoring the list again.

:func:`tie` puts several features under one weight: the members of an ensemble, a model's directions and seeds, as
one feature, the mean of their log-probabilities, in place of one weight each (fewer weights to fit to the tuning
set). It is linear: the tuned weight goes back to every member as weight / n (:meth:`Tied.weights`), so that the
weights name the list's own labels and ``rerank apply`` reranks with them as they are (``rerank tune --tie``).

:func:`per_word` adds a feature divided by the hypothesis' words plus one (``</s>``), the per-word form of a
log-probability (as the ``nmt`` feature's ``per_word``), so that cross-validation can choose between the sentence
and per-word forms of a feature on one scored list.

:func:`hold` keeps every feature but some at its starting weight: the held values weighted by those weights make
one feature (``Held``) of which only the scale is tuned, beside the features that are, so that the optimiser moves
the tuned ones alone and the held ones keep their ratios (``mert-moses.pl --activate-features``; ``rerank tune
--activate``): one new weight tuned on a small tuning set, not all of them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

import numpy as np

from rerank.errors import RerankError
from rerank.formats.nbest import FeatureLayout, check_label
from rerank.tune.data import TuningData


@dataclass(frozen=True)
class Tied:
    """Tuning data with some features tied, and the map from its weights back to the original features."""

    data: TuningData
    mapping: np.ndarray  # (D original, D tied): tied features = original features @ mapping

    def weights(self, tied: np.ndarray) -> np.ndarray:
        """The original features' weights (D original,) that score as ``tied`` (D tied,) scores the tied data."""
        return self.mapping @ tied

    def start(self, original: np.ndarray) -> np.ndarray:
        """Starting weights for the tied data: the sum of each tie's members' weights (the weight of their mean)."""
        return (self.mapping > 0).T.astype(np.float64) @ original


def tie(data: TuningData, groups: Mapping[str, Sequence[str]]) -> Tied:
    """``data`` with each group's features (one value each) replaced by their mean under the group's name, placed
    where its first member was."""
    offsets = data.layout.offsets()
    members = {label: name for name, labels in groups.items() for label in labels}
    for name, labels in groups.items():
        try:
            check_label(name)
        except ValueError as e:
            raise RerankError(f"tie {name}: {e}") from None
        if len(labels) < 2:
            raise RerankError(f"tie {name}: give at least two features to tie, got {', '.join(labels) or 'none'}")
        for label in labels:
            if label not in offsets:
                raise RerankError(f"tie {name}: the n-best list has no feature {label} (it has "
                                  f"{', '.join(data.layout.labels)})")
            if offsets[label].stop - offsets[label].start != 1:
                raise RerankError(f"tie {name}: {label} has several values; tie features of one value each")
        if name in offsets and name not in labels:
            raise RerankError(f"tie {name}: the n-best list has a feature of that name already")
    if len(members) != sum(len(labels) for labels in groups.values()):
        raise RerankError("tie: a feature is in two groups")
    names: list[str] = []
    dims: list[int] = []
    columns: list[np.ndarray] = []
    identity = np.eye(data.dims)
    for label in data.layout.labels:
        span = offsets[label]
        group = members.get(label)
        if group is None:
            names.append(label)
            dims.append(span.stop - span.start)
            columns += [identity[column] for column in range(span.start, span.stop)]
        elif group not in names:
            names.append(group)
            dims.append(1)
            columns.append(np.mean([identity[offsets[member].start] for member in groups[group]], axis=0))
    mapping = np.stack(columns, axis=1)
    layout = FeatureLayout(tuple(names), tuple(dims))
    return Tied(replace(data, layout=layout, features=data.features @ mapping), mapping)


HELD = "Held"  # the held features' weighted sum, while tuning


def activated(layout: FeatureLayout, tuned: Sequence[str], of: str = "the n-best list") -> np.ndarray:
    """(D,) True for the values of ``tuned`` (labels, or values as ``TranslationModel0_4``); a RerankError where
    ``of`` (``layout``'s features) has no such name or where every value would be tuned."""
    columns = layout.columns()
    offsets = layout.offsets()
    active = np.zeros(layout.dims, dtype=bool)
    for name in tuned:
        if name in offsets:
            active[offsets[name]] = True
        elif name in columns:
            active[columns.index(name)] = True
        else:
            raise RerankError(f"activate {name}: not a feature or value of {of} (those are "
                              f"{', '.join(columns)})")
    if active.all():
        raise RerankError("activate: every feature would be tuned; name fewer, or tune without --activate")
    return active


def hold(data: TuningData, weights: np.ndarray, tuned: Sequence[str]) -> tuple[Tied, np.ndarray]:
    """``data`` with the values of ``tuned`` (labels, or one value of a label as ``TranslationModel0_4``) as they
    are and every other value summed under its weight in ``weights`` (D,) into one feature, ``Held``, the last; and
    the starting weights for it (``tuned``'s from ``weights``, 1 for ``Held``). A RerankError where a name is not
    the list's or the held weights are all 0 (nothing to hold)."""
    active = activated(data.layout, tuned)
    offsets = data.layout.offsets()
    held = np.where(active, 0.0, weights)
    if not held.any():
        raise RerankError("activate: the features not tuned have weight 0 at the start, so there is nothing to hold "
                          "them at; give starting weights (--init or --moses-ini)")
    identity = np.eye(data.dims)
    mapping = np.concatenate([identity[:, active], held[:, None]], axis=1)
    sizes = [int(active[offsets[label]].sum()) for label in data.layout.labels]
    layout = FeatureLayout(tuple(label for label, size in zip(data.layout.labels, sizes, strict=True) if size)
                           + (HELD,), tuple(size for size in sizes if size) + (1,))
    start = np.append(weights[active], 1.0)
    return Tied(replace(data, layout=layout, features=data.features @ mapping), mapping), start


def per_word(data: TuningData, label: str, words: np.ndarray, name: str | None = None) -> TuningData:
    """``data`` with one more feature, ``label``'s value divided by each hypothesis' words plus one; ``words``:
    (S, K), ``name``: its label (default ``label`` + ``w``)."""
    offsets = data.layout.offsets()
    if label not in offsets or offsets[label].stop - offsets[label].start != 1:
        raise RerankError(f"per word: the n-best list has no feature {label} of one value")
    name = name or f"{label}w"
    check_label(name)
    column = data.features[:, :, offsets[label].start] / (np.asarray(words, dtype=np.float64) + 1.0)
    layout = data.layout.extended((name,), (1,))
    return replace(data, layout=layout, features=np.concatenate([data.features, column[:, :, None]], axis=2))
