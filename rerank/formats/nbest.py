"""Moses n-best lists, read and written as streams.

A line is ``id ||| hypothesis ||| features ||| total [||| segmentation] [||| alignment]``.
Each :class:`NBestEntry` keeps the raw text of its fields, spaces included, so that writing an
entry back gives the same bytes, and adding features touches nothing but the end of field 3.

Features are ``Label= v v v``: a label is printed once, followed by all its values. A label that
contains ``_`` is a sparse feature with a single value (this is how Moses' ``mert`` extractor
reads it); the other, dense, labels must be the same on every line, in the same order and with
the same number of values, because the extractor takes its feature list from the first line.
Old Moses writes short labels (``d= lm= tm= w=``) and sometimes no space after the id (``0|||``).
"""

from __future__ import annotations

import itertools
import os
import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field

from rerank.errors import FormatError, check_finite, quoted, shorten
from rerank.formats.files import atomic_output, display_name, read_lines
from rerank.formats.shards import ShardReader

SEPARATOR = "|||"
MIN_FIELDS, MAX_FIELDS = 4, 6
LABEL_PATTERN = re.compile(r"[A-Za-z][A-Za-z0-9]*")  # what we may add: no "_", or Moses reads it as sparse


@dataclass(frozen=True)
class FeatureLayout:
    """The dense features of an n-best list: labels in order and the number of values of each."""

    labels: tuple[str, ...]
    sizes: tuple[int, ...]

    @property
    def dims(self) -> int:
        return sum(self.sizes)

    def columns(self) -> list[str]:
        """One name per value: ``LM0`` for a single value, ``TranslationModel0_2`` for the third of several."""
        names = []
        for label, size in zip(self.labels, self.sizes, strict=True):
            names += [label] if size == 1 else [f"{label}_{i}" for i in range(size)]
        return names

    def offsets(self) -> dict[str, slice]:
        """The slice of the dense vector that belongs to each label."""
        ends = list(itertools.accumulate(self.sizes))
        return {label: slice(end - size, end) for label, size, end in zip(self.labels, self.sizes, ends, strict=True)}

    def extended(self, labels: Sequence[str], sizes: Sequence[int]) -> FeatureLayout:
        return FeatureLayout(self.labels + tuple(labels), self.sizes + tuple(sizes))

    def describe(self) -> str:
        return " ".join(f"{label}=({size})" for label, size in zip(self.labels, self.sizes, strict=True))


@dataclass(frozen=True, eq=False, slots=True)
class NBestEntry:
    """One hypothesis of an n-best list, with the raw text of its fields."""

    sentence_id: int
    fields: tuple[str, ...]
    dense: tuple[float, ...]
    layout: FeatureLayout
    sparse: dict[str, float] = field(default_factory=dict)
    total: float = 0.0
    lineno: int = 0

    @classmethod
    def build(cls, sentence_id: int, words: Sequence[str], features: Sequence[tuple[str, Sequence[float]]],
              total: float) -> NBestEntry:
        """A new line ``id ||| words ||| Label= v ... ||| total``, spaced as Moses writes it; a non-finite
        value is a :class:`~rerank.errors.NonFiniteScore`."""
        def where() -> str:
            return f"sentence {sentence_id}, hypothesis {quoted(shorten(' '.join(words)))}"
        check_finite(features, where)
        check_finite([("the total score", (total,))], where)
        fields = (f"{sentence_id} ", f" {' '.join(words)} ", f" {format_features(features)} ",
                  f" {format_value(total)}")
        layout = FeatureLayout(tuple(label for label, _ in features), tuple(len(values) for _, values in features))
        dense = tuple(float(v) for _, values in features for v in values)
        return cls(sentence_id, fields, dense, layout, total=total)

    @property
    def hypothesis(self) -> str:
        """The translation as Moses' 1-best output has it: one padding space removed on each side."""
        text = self.fields[1]
        if text.startswith(" "):
            text = text[1:]
        if text.endswith(" "):
            text = text[:-1]
        return text

    @property
    def tokens(self) -> list[str]:
        return self.fields[1].split()

    def line(self) -> str:
        return SEPARATOR.join(self.fields)

    def where(self) -> str:
        """The entry's place, for errors: its line of the n-best list and its sentence."""
        return f"line {self.lineno} (sentence {self.sentence_id})" if self.lineno else f"sentence {self.sentence_id}"

    def with_features(self, additions: Sequence[tuple[str, Sequence[float]]], layout: FeatureLayout) -> NBestEntry:
        """A copy with ``Label= v ...`` appended to the features field; every other byte is kept. A non-finite
        value is a :class:`~rerank.errors.NonFiniteScore`."""
        check_finite(additions, self.where)
        raw = self.fields[2]
        body = raw.rstrip(" ")
        padding = raw[len(body):] or " "
        fields = (*self.fields[:2], f"{body} {format_features(additions)}{padding}", *self.fields[3:])
        dense = self.dense + tuple(float(v) for _, values in additions for v in values)
        return NBestEntry(self.sentence_id, fields, dense, layout, self.sparse, self.total, self.lineno)

    def with_total(self, total: float) -> NBestEntry:
        """A copy whose field 4 holds ``total``, written as Moses writes it (finite, or a
        :class:`~rerank.errors.NonFiniteScore`)."""
        check_finite([("the total score", (total,))], self.where)
        raw = self.fields[3]
        lead = raw[: len(raw) - len(raw.lstrip(" "))] or " "
        trail = raw[len(raw.rstrip(" ")):] or (" " if len(self.fields) > 4 else "")
        fields = (*self.fields[:3], f"{lead}{format_value(total)}{trail}", *self.fields[4:])
        return NBestEntry(self.sentence_id, fields, self.dense, self.layout, self.sparse, total, self.lineno)


NBestGroup = tuple[int, list[NBestEntry]]  # a sentence id and its hypotheses, in file order


def format_value(value: float) -> str:
    """A score as Moses prints it: 6 significant digits, integers without a point, never ``-0``."""
    return f"{value + 0.0:.6g}"


def format_features(features: Iterable[tuple[str, Sequence[float]]]) -> str:
    return " ".join(f"{label}= " + " ".join(format_value(v) for v in values) for label, values in features)


def check_label(label: str) -> str:
    """``label`` if Moses will read it as one dense feature, else a ValueError saying why."""
    if not LABEL_PATTERN.fullmatch(label):
        raise ValueError(f"feature label {label!r} must be a letter followed by letters and digits only "
                         "(Moses reads a label with '_' as a sparse feature)")
    return label


def read_nbest(path: str | os.PathLike[str], shard: ShardReader | None = None) -> Iterator[NBestEntry]:
    """Stream the entries of an n-best list (of one ``shard`` of it, cut between sentences: see
    :func:`~rerank.formats.shards.nbest_sentence`), checking every line against the first one."""
    name = display_name(path)
    layout: FeatureLayout | None = None
    template: _Template | None = None
    previous_id = -1
    for lineno, line in shard.lines() if shard is not None else read_lines(path):
        fields = tuple(line.split(SEPARATOR))
        if not MIN_FIELDS <= len(fields) <= MAX_FIELDS:
            raise FormatError(name, lineno, f"{MIN_FIELDS} to {MAX_FIELDS} fields separated by '{SEPARATOR}' "
                              f"(id ||| hypothesis ||| features ||| total), found {len(fields)}", got=line)
        id_text = fields[0].strip()
        if not (id_text.isascii() and id_text.isdigit()):
            raise FormatError(name, lineno, "a sentence id (a non-negative integer) in field 1", got=fields[0])
        sentence_id = int(id_text)
        if sentence_id < previous_id:
            raise FormatError(name, lineno, f"sentence ids in increasing order (after {previous_id}), "
                              "each sentence's hypotheses on consecutive lines", got=id_text)
        previous_id = sentence_id
        dense_only = template.values(fields[2]) if template is not None else None
        if dense_only is not None and layout is not None:
            dense, sparse = dense_only, dict[str, float]()
            labels, sizes = layout.labels, layout.sizes
        else:
            labels, sizes, dense, sparse = _parse_features(fields[2], name, lineno)
            if template is None and not sparse:
                template = _Template(fields[2])
        if layout is None:
            layout = FeatureLayout(labels, sizes)
        elif labels != layout.labels or sizes != layout.sizes:
            expected, got = _first_difference(layout, FeatureLayout(labels, sizes))
            raise FormatError(name, lineno, f"{expected}, as on the first line", got=got)
        try:
            total = float(fields[3])
        except ValueError:
            raise FormatError(name, lineno, "a number (the total score) in field 4", got=fields[3]) from None
        yield NBestEntry(sentence_id, fields, dense, layout, sparse, total, lineno)


class _Template:
    """The tokens of a features field with dense features only, as a pattern: another field with the same label
    tokens in the same places gives its values at once (the lines of a list have the same layout); anything
    else goes through :func:`_parse_features`, which checks it and says what is wrong."""

    def __init__(self, text: str):
        tokens = text.split()
        self.size = len(tokens)
        self.labels = tuple((i, token) for i, token in enumerate(tokens) if token[-1] in "=:")
        self.positions = tuple(i for i, token in enumerate(tokens) if token[-1] not in "=:")

    def values(self, text: str) -> tuple[float, ...] | None:
        """The dense values of ``text`` if it fits the pattern, else None."""
        tokens = text.split()
        if len(tokens) != self.size:
            return None
        for i, label in self.labels:
            if tokens[i] != label:
                return None
        try:
            return tuple([float(tokens[i]) for i in self.positions])
        except ValueError:
            return None


def _parse_features(text: str, name: str, lineno: int
                    ) -> tuple[tuple[str, ...], tuple[int, ...], tuple[float, ...], dict[str, float]]:
    labels: list[str] = []
    sizes: list[int] = []
    dense: list[float] = []
    sparse: dict[str, float] = {}
    label: str | None = None
    for token in text.split():
        if token[-1] in "=:":
            if label is not None and "_" in label and label not in sparse:
                raise FormatError(name, lineno, f"a value after the sparse feature '{label}='", got=token)
            label = token[:-1]
            if "_" not in label:
                labels.append(label)
                sizes.append(0)
            continue
        if label is None:
            raise FormatError(name, lineno, "a feature label ('Name=') before the first value in field 3", got=token)
        try:
            value = float(token)
        except ValueError:
            raise FormatError(name, lineno, f"a number after '{label}='", got=token) from None
        if "_" in label:
            if label in sparse:
                raise FormatError(name, lineno, f"one value for the sparse feature '{label}='", got=token)
            sparse[label] = value
        else:
            dense.append(value)
            sizes[-1] += 1
    if label is not None and "_" in label and label not in sparse:
        raise FormatError(name, lineno, f"a value after the sparse feature '{label}='", got=text)
    for label, size in zip(labels, sizes, strict=True):
        if size == 0:
            raise FormatError(name, lineno, f"at least one value after '{label}='", got=text)
    return tuple(labels), tuple(sizes), tuple(dense), sparse


def _first_difference(first: FeatureLayout, line: FeatureLayout) -> tuple[str, str]:
    """What differs between the dense features of the first line and of another: (expected, got)."""
    for i, (label, size) in enumerate(zip(first.labels, first.sizes, strict=True)):
        if i == len(line.labels):
            return f"the dense feature '{label}=' after '{line.labels[-1]}='" if line.labels else \
                f"the dense feature '{label}=' first", "no more dense features"
        if line.labels[i] != label:
            return f"the dense feature '{label}=' in position {i + 1}", f"{line.labels[i]}="
        if line.sizes[i] != size:
            return f"{size} values after '{label}='", f"{line.sizes[i]} values"
    return f"no dense feature after '{first.labels[-1]}='" if first.labels else "no dense features", \
        f"{line.labels[len(first.labels)]}="


def group_by_sentence(entries: Iterable[NBestEntry]) -> Iterator[NBestGroup]:
    """Consecutive entries of the same sentence, as ``(sentence id, entries)``, in file order."""
    for sentence_id, group in itertools.groupby(entries, key=lambda e: e.sentence_id):
        yield sentence_id, list(group)


def write_nbest(entries: Iterable[NBestEntry], path: str | os.PathLike[str]) -> int:
    """Write entries atomically; returns the number of lines written."""
    count = 0
    with atomic_output(path) as out:
        for entry in entries:
            out.write(entry.line())
            out.write("\n")
            count += 1
    return count


def beyond_source(nbest_name: str, entry: NBestEntry, num_sentences: int, source_name: str) -> FormatError:
    """The error for an n-best sentence id that the source file has no line for."""
    return FormatError(nbest_name, entry.lineno,
                       f"a sentence id below {num_sentences}, the number of lines of {source_name}",
                       got=str(entry.sentence_id))
