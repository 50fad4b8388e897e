"""``moses.ini``: read feature functions and weights, rewrite weights and phrase-table arity.

Both layouts are understood:

* modern: a ``[feature]`` section (``PhraseDictionaryMemory name=TranslationModel0 num-features=4 ...``)
  and a ``[weight]`` section (``TranslationModel0= 0.2 0.2 0.2 0.2``); a feature without ``name=`` is
  called by its class and an index (``WordPenalty0``);
* old: ``[ttable-file]`` and one ``[weight-x]`` section per kind of feature, one value per line. Their
  weights are reported under the short labels an old n-best list uses (``d lm tm w``).

The file is kept as its raw lines; edits replace single lines, so everything else (comments,
blank lines, other sections) is written back byte for byte.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from rerank.errors import FormatError, RerankError
from rerank.formats.files import atomic_output, display_name, read_lines

Weights = dict[str, tuple[float, ...]]

# Old [weight-x] sections and the labels old Moses prints for them in n-best lists.
OLD_WEIGHT_SECTIONS = {
    "weight-d": "d", "weight-l": "lm", "weight-t": "tm", "weight-w": "w",
    "weight-i": "I", "weight-generation": "g", "weight-u": "u", "weight-e": "e",
}
SECTION = re.compile(r"\[([^\]]+)\]")
TRAIN_MODEL_WEIGHT = 0.2  # the initial weight train-model.perl gives each phrase-table score


def format_weight(value: float) -> str:
    """A weight with enough digits to survive a round trip through the file."""
    return f"{value:.10g}"


@dataclass(frozen=True)
class FeatureLine:
    """One line of the ``[feature]`` section."""

    kind: str
    name: str
    args: dict[str, str]
    index: int  # line index in MosesIni.lines


class MosesIni:
    """A parsed ``moses.ini`` that remembers its raw lines."""

    def __init__(self, lines: Sequence[str], path: str = "moses.ini"):
        self.path = path
        self.lines = list(lines)
        self.headers: dict[str, int] = {}
        self.sections = self._find_sections()

    @classmethod
    def read(cls, path: str | os.PathLike[str]) -> MosesIni:
        return cls([line for _, line in read_lines(path)], display_name(path))

    def write(self, path: str | os.PathLike[str]) -> None:
        with atomic_output(path) as out:
            for line in self.lines:
                out.write(line)
                out.write("\n")

    def _find_sections(self) -> dict[str, list[int]]:
        """Section name -> indices of its content lines (comments and blank lines included)."""
        sections: dict[str, list[int]] = {}
        self.headers = {}
        current: list[int] | None = None
        for i, line in enumerate(self.lines):
            match = SECTION.fullmatch(line.strip())
            if match:
                self.headers.setdefault(match.group(1), i)
                current = sections.setdefault(match.group(1), [])
            elif current is not None:
                current.append(i)
        return sections

    def _content(self, section: str) -> list[int]:
        """Indices of the meaningful lines of a section (no comments, no blank lines)."""
        return [i for i in self.sections.get(section, []) if self.lines[i].strip()
                and not self.lines[i].lstrip().startswith("#")]

    @property
    def is_old_format(self) -> bool:
        return "weight" not in self.sections and any(s in self.sections for s in OLD_WEIGHT_SECTIONS)

    def features(self) -> list[FeatureLine]:
        """The feature functions of the ``[feature]`` section, with their resolved names."""
        counts: dict[str, int] = {}
        result = []
        for i in self._content("feature"):
            kind, *rest = self.lines[i].split()
            args = {}
            for token in rest:
                key, sep, value = token.partition("=")
                if not sep:
                    raise FormatError(self.path, i + 1, "key=value arguments after the feature class", got=token)
                args[key] = value
            name = args.get("name")
            if name is None:
                name = f"{kind}{counts.get(kind, 0)}"
                counts[kind] = counts.get(kind, 0) + 1
            result.append(FeatureLine(kind, name, args, i))
        return result

    def weights(self) -> Weights:
        """Weights by feature label, from ``[weight]`` or from the old ``[weight-x]`` sections."""
        if not self.is_old_format:
            return {label: values for label, (values, _) in self._weight_lines().items()}
        weights: Weights = {}
        for section, label in OLD_WEIGHT_SECTIONS.items():
            if section in self.sections:
                weights[label] = tuple(self._number(i) for i in self._content(section))
        return weights

    def _weight_lines(self) -> dict[str, tuple[tuple[float, ...], int]]:
        result = {}
        for i in self._content("weight"):
            label, sep, values = self.lines[i].partition("=")
            label = label.strip()
            if not sep or not label or " " in label:
                raise FormatError(self.path, i + 1, "a weight line 'Name= v1 v2 ...'", got=self.lines[i])
            try:
                numbers = tuple(float(v) for v in values.split())
                if not all(map(math.isfinite, numbers)):
                    raise ValueError
                result[label] = (numbers, i)
            except ValueError:
                raise FormatError(self.path, i + 1, f"finite numbers after '{label}='", got=self.lines[i]) from None
        return result

    def _number(self, i: int) -> float:
        try:
            number = float(self.lines[i].split()[0])
            if not math.isfinite(number):
                raise ValueError
            return number
        except (ValueError, IndexError):
            raise FormatError(self.path, i + 1, "a finite number", got=self.lines[i]) from None

    def with_weights(self, weights: Mapping[str, Sequence[float]]) -> MosesIni:
        """A copy whose weights are replaced by ``weights``; labels not yet in the file are added."""
        copy = MosesIni(self.lines, self.path)
        if self.is_old_format:
            for section, label in OLD_WEIGHT_SECTIONS.items():
                if label in weights:
                    copy._replace_old_section(section, weights[label])
            unknown = sorted(set(weights) - set(OLD_WEIGHT_SECTIONS.values()))
            if unknown:
                raise RerankError(f"{self.path}: an old-format moses.ini has no place for weights {unknown}")
            return copy
        existing = copy._weight_lines()
        for label, values in weights.items():
            line = f"{label}= " + " ".join(format_weight(v) for v in values)
            if label in existing:
                copy.lines[existing[label][1]] = line
            else:
                copy._append_to_section("weight", line)
        return copy

    def with_added_score(self, table: str, weight: float) -> MosesIni:
        """A copy where phrase table ``table`` has one more score, and its weight one more value.

        ``table`` is a feature name (``TranslationModel0``) or, in an old-format file, the path of the
        table as written in ``[ttable-file]``.
        """
        return self._with_added_score_old(table, weight) if self.is_old_format else \
            self._with_added_score_modern(table, weight)

    def feature(self, name: str) -> FeatureLine:
        """The ``[feature]`` line of feature ``name``."""
        features = {f.name: f for f in self.features()}
        if name not in features:
            raise RerankError(f"{self.path}: no feature named {name!r} in [feature]; "
                              f"features: {', '.join(features)}")
        return features[name]

    def with_table_path(self, table: str, path: str) -> MosesIni:
        """A copy where phrase table ``table`` (named as for :meth:`with_added_score`) is read from ``path``."""
        if not path or any(c.isspace() for c in path):
            raise RerankError(f"{self.path}: Moses cannot read an empty table path or one with spaces: {path!r}")
        copy = MosesIni(self.lines, self.path)
        if self.is_old_format:
            for i in self._content("ttable-file"):
                fields = self.lines[i].split()
                if fields[-1] == table:
                    copy.lines[i] = " ".join([*fields[:-1], path])
                    return copy
            raise RerankError(f"{self.path}: no table {table!r} in [ttable-file]")
        feature = self.feature(table)
        if "path" not in feature.args:
            raise FormatError(self.path, feature.index + 1, f"a path= argument for {table}",
                              got=self.lines[feature.index])
        copy.lines[feature.index] = re.sub(r"(?<=\spath=)\S+", lambda _: path, self.lines[feature.index])
        return copy

    def _with_added_score_modern(self, table: str, weight: float) -> MosesIni:
        feature = self.feature(table)
        if "num-features" not in feature.args:
            raise FormatError(self.path, feature.index + 1, f"a num-features= argument for {table}",
                              got=self.lines[feature.index])
        count = int(feature.args["num-features"])
        weights = self._weight_lines()
        if table not in weights:
            raise RerankError(f"{self.path}: no [weight] line for {table}")
        values, at = weights[table]
        if len(values) != count:
            raise RerankError(f"{self.path}: {table} has num-features={count} but {len(values)} weights")
        copy = MosesIni(self.lines, self.path)
        copy.lines[feature.index] = re.sub(r"(?<=\snum-features=)\d+", str(count + 1), self.lines[feature.index])
        copy.lines[at] = f"{self.lines[at].rstrip()} {format_weight(weight)}"
        return copy

    def _with_added_score_old(self, table: str, weight: float) -> MosesIni:
        offset = 0
        for i in self._content("ttable-file"):
            fields = self.lines[i].split()
            count = int(fields[-2])
            if fields[-1] == table:
                break
            offset += count
        else:
            raise RerankError(f"{self.path}: no table {table!r} in [ttable-file]")
        copy = MosesIni(self.lines, self.path)
        fields[-2] = str(count + 1)
        copy.lines[i] = " ".join(fields)
        weight_lines = copy._content("weight-t")
        if "weight-t" not in copy.headers:
            raise RerankError(f"{self.path}: no [weight-t] section")
        at = weight_lines[offset + count - 1] + 1 if weight_lines else copy.headers["weight-t"] + 1
        copy.lines.insert(at, format_weight(weight))
        copy.sections = copy._find_sections()
        return copy

    def _replace_old_section(self, section: str, values: Sequence[float]) -> None:
        indices = self._content(section)
        if len(indices) != len(values):
            raise RerankError(f"{self.path}: [{section}] has {len(indices)} weights, got {len(values)} to write")
        for i, value in zip(indices, values, strict=True):
            self.lines[i] = format_weight(value)

    def _append_to_section(self, section: str, line: str) -> None:
        if section not in self.sections:
            self.lines += [f"[{section}]", line]
        else:
            content = self._content(section)
            at = (content[-1] if content else self.headers[section]) + 1
            self.lines.insert(at, line)
        self.sections = self._find_sections()
