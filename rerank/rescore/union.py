"""The union of several systems' n-best lists in which every hypothesis has Moses' features.

Lines that Moses' list has keep Moses' values, copied. The other systems' hypotheses get the values
of their best derivation under forced decoding (:mod:`rerank.rescore.forced`). A hypothesis Moses
cannot produce with its phrase table (an unknown target word, a reordering beyond the distortion
limit, ...) gets neutral values, the mean of each feature over Moses' own hypotheses for the same
sentence, so that Moses' features neither favour nor penalise it against its list, and
``Unreachable0= 1``, whose tuned weight says how much such hypotheses should gain or lose. Where
Moses' list has no hypothesis of that sentence at all (Moses failed on it, or the list is partial),
there is no such mean: the mean of each feature over all the hypotheses of Moses' list stands in,
the neutral values of a typical sentence (never 0, which for a log-probability is a perfect score).
Then come the ``In<Name>`` indicators of :func:`~rerank.rescore.merge.merge_nbest`; the total is 0.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from rerank.errors import RerankError, log_once
from rerank.formats.files import display_name
from rerank.formats.nbest import FeatureLayout, NBestEntry, NBestGroup, group_by_sentence, read_nbest
from rerank.rescore.forced import ForcedDecoding, ForcedResult, SentenceHypothesis, force_decode
from rerank.rescore.merge import merge_nbest

logger = logging.getLogger(__name__)

UNREACHABLE = "Unreachable0"
Systems = Sequence[tuple[str, str | os.PathLike[str]]]


@dataclass
class UnionReport:
    """What the union holds: hypotheses per origin and the forced decoding's outcome."""

    lines: int
    from_moses: int
    forced: ForcedResult


def hypotheses_to_force(systems: Systems, moses: int, num_sentences: int | None = None,
                        allow_empty: bool = False) -> list[SentenceHypothesis]:
    """The ``(sentence id, words)`` of every hypothesis of the union that Moses' list (system
    ``moses``) does not have, in the union's order."""
    return [(entry.sentence_id, tuple(entry.tokens)) for entry in merge_nbest(systems, num_sentences, allow_empty)
            if entry.dense[moses] == 0.0]


def union_with_moses_features(systems: Systems, moses: int, settings: ForcedDecoding, sources: Sequence[str],
                              allow_empty: bool = False) -> tuple[Iterator[NBestEntry], UnionReport]:
    """The union of ``systems``' lists (``systems[moses]`` being Moses'), each line with Moses' features,
    ``Unreachable0`` and the ``In<Name>`` indicators; the report is complete once the lines are read."""
    pairs = hypotheses_to_force(systems, moses, len(sources), allow_empty)
    forced = force_decode(settings, sources, pairs)
    report = UnionReport(0, 0, forced)
    return _entries(systems, moses, dict(zip(pairs, forced.derivations, strict=True)), len(sources), report,
                    forced.layout, settings.moses_ini, allow_empty), report


def list_mean(path: str | os.PathLike[str]) -> tuple[float, ...] | None:
    """The mean of each dense feature over all the hypotheses of an n-best list (None if it has none), read
    as a stream."""
    total: list[float] | None = None
    count = 0
    for entry in read_nbest(path):
        total = list(entry.dense) if total is None else [t + v for t, v in zip(total, entry.dense, strict=True)]
        count += 1
    return None if total is None else tuple(t / count for t in total)


def _list_fallback(path: str | os.PathLike[str], name: str) -> tuple[float, ...]:
    """The neutral values of a hypothesis Moses cannot produce of a sentence Moses' list has no hypothesis of."""
    mean = list_mean(path)
    if mean is None:
        raise RerankError(f"{name}: Moses' list has no hypotheses, so there are no neutral values (their mean) "
                          "for the hypotheses Moses cannot produce")
    log_once(logger, logging.INFO, "hypotheses Moses cannot produce, of sentences without Moses hypotheses, get "
             "the mean of each feature over the whole of %s", name)
    return mean


def _entries(systems: Systems, moses: int, derivations: dict[SentenceHypothesis, NBestEntry | None], num_sentences: int,
             report: UnionReport, forced_layout: FeatureLayout | None, ini_name: str,
             allow_empty: bool = False) -> Iterator[NBestEntry]:
    moses_name = display_name(systems[moses][1])
    moses_groups = _Groups(group_by_sentence(read_nbest(systems[moses][1])))
    layout: FeatureLayout | None = None
    fallback: tuple[float, ...] | None = None  # the list-wide mean, read when first needed
    for entry in merge_nbest(systems, num_sentences, allow_empty):
        group = moses_groups.get(entry.sentence_id)
        if layout is None:
            first = next(read_nbest(systems[moses][1]), None) if group is None else None
            layout = group.layout if group is not None else first.layout if first is not None else forced_layout
            if layout is None:
                raise RerankError(f"{moses_name}: Moses' list has no hypotheses and none could be forced")
            if forced_layout is not None and forced_layout != layout:
                raise RerankError(f"{ini_name}: Moses prints the features {forced_layout.describe()} but "
                                  f"{moses_name} has {layout.describe()}: is it the moses.ini that made the list?")
        unreachable = 0.0
        key = (entry.sentence_id, tuple(entry.tokens))
        if entry.dense[moses] == 1.0:
            assert group is not None
            values = group.features[key[1]]
            report.from_moses += 1
        else:
            derivation = derivations[key]
            unreachable = 0.0 if derivation is not None else 1.0
            if derivation is not None:
                values = derivation.dense
            elif group is not None:
                values = group.mean
            else:
                fallback = fallback or _list_fallback(systems[moses][1], moses_name)
                values = fallback
        report.lines += 1
        features = [(label, values[span]) for label, span in layout.offsets().items()]
        features += [(UNREACHABLE, (unreachable,))]
        features += [(label, entry.dense[span]) for label, span in entry.layout.offsets().items()]
        yield NBestEntry.build(entry.sentence_id, entry.tokens, features, 0.0)


@dataclass
class _MosesGroup:
    """Moses' hypotheses of one sentence: features by words (the first line of each), their mean."""

    layout: FeatureLayout
    features: dict[tuple[str, ...], tuple[float, ...]]
    mean: tuple[float, ...]


class _Groups:
    """Moses' list read sentence by sentence, in step with the union's increasing sentence ids."""

    def __init__(self, groups: Iterator[NBestGroup]):
        self._groups = groups
        self._next: NBestGroup | None = next(groups, None)
        self._current: tuple[int, _MosesGroup] | None = None

    def get(self, sentence_id: int) -> _MosesGroup | None:
        if self._current is not None and self._current[0] == sentence_id:
            return self._current[1]
        while self._next is not None and self._next[0] < sentence_id:
            self._next = next(self._groups, None)
        if self._next is None or self._next[0] != sentence_id:
            return None
        entries = self._next[1]
        features: dict[tuple[str, ...], tuple[float, ...]] = {}
        for e in entries:
            features.setdefault(tuple(e.tokens), e.dense)
        mean = tuple(sum(column) / len(entries) for column in zip(*(e.dense for e in entries), strict=True))
        self._current = (sentence_id, _MosesGroup(entries[0].layout, features, mean))
        return self._current[1]
