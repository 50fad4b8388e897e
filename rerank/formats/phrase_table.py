"""Moses phrase tables (text, usually gzipped), read and written as streams.

A line is ``source ||| target ||| scores [||| alignment [||| counts [||| sparse [||| properties]]]]``:
three fields in old tables, five to seven in modern ones. Each :class:`PhraseEntry` keeps the raw
text of its fields, so that a table written back is byte-identical, and a score appended with
:meth:`PhraseEntry.with_score` changes nothing but the end of the scores field. The scores are
probabilities (Moses takes their log when loading), so an added score must be strictly positive.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from rerank.errors import FormatError
from rerank.formats.files import atomic_output, display_name, read_lines
from rerank.formats.nbest import format_value
from rerank.formats.shards import ShardReader

SEPARATOR = "|||"
MIN_FIELDS, MAX_FIELDS = 3, 7
MOSES_LOWEST_LOG = -100.0  # Moses' LOWEST_SCORE: it reads max(ln x, -100) for every phrase-table score


@dataclass(frozen=True, slots=True)
class PhraseEntry:
    """One phrase pair with the raw text of its fields."""

    fields: tuple[str, ...]
    scores: tuple[float, ...]
    lineno: int = 0

    @property
    def source(self) -> str:
        return self.fields[0].strip()

    @property
    def target(self) -> str:
        return self.fields[1].strip()

    def line(self) -> str:
        return SEPARATOR.join(self.fields)

    def with_score(self, value: float) -> PhraseEntry:
        """A copy with ``value`` appended to the scores field; every other byte is kept."""
        raw = self.fields[2]
        body = raw.rstrip(" ")
        padding = raw[len(body):]
        fields = (self.fields[0], self.fields[1], f"{body} {format_value(value)}{padding}", *self.fields[3:])
        return PhraseEntry(fields, self.scores + (value,), self.lineno)


def read_phrase_table(path: str | os.PathLike[str], encoding: str = "utf-8",
                      shard: ShardReader | None = None) -> Iterator[PhraseEntry]:
    """Stream the entries of a phrase table (of one ``shard`` of it), checking that every line has as many
    scores as the first.

    Write a table read with another ``encoding`` back with the same one.
    """
    lines = shard.lines(encoding) if shard is not None else read_lines(path, encoding)
    return parse_phrase_table(lines, display_name(path))


def parse_phrase_table(lines: Iterable[tuple[int, str]], name: str,
                       num_scores: int | None = None) -> Iterator[PhraseEntry]:
    """The entries of numbered ``lines`` of the table ``name``, checked as :func:`read_phrase_table` checks
    them; every line must have ``num_scores`` scores (default: as many as the first)."""
    for lineno, line in lines:
        fields = tuple(line.split(SEPARATOR))
        if not MIN_FIELDS <= len(fields) <= MAX_FIELDS:
            raise FormatError(name, lineno, f"{MIN_FIELDS} to {MAX_FIELDS} fields separated by '{SEPARATOR}' "
                              f"(source ||| target ||| scores ...), found {len(fields)}", got=line)
        if not fields[0].strip() or not fields[1].strip():
            raise FormatError(name, lineno, "a non-empty source and target phrase", got=line)
        try:
            scores = tuple(float(token) for token in fields[2].split())
        except ValueError:
            raise FormatError(name, lineno, "numbers in the scores field (field 3)", got=fields[2]) from None
        if num_scores is None:
            num_scores = len(scores)
            if num_scores == 0:
                raise FormatError(name, lineno, "at least one score in field 3", got=line)
        elif len(scores) != num_scores:
            raise FormatError(name, lineno, f"{num_scores} scores, as on the first line", got=fields[2])
        yield PhraseEntry(fields, scores, lineno)


def write_phrase_table(entries: Iterable[PhraseEntry], path: str | os.PathLike[str], encoding: str = "utf-8") -> int:
    """Write entries atomically; returns the number of lines written."""
    count = 0
    with atomic_output(path, encoding) as out:
        for entry in entries:
            out.write(entry.line())
            out.write("\n")
            count += 1
    return count
