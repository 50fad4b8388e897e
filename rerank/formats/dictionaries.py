"""Word dictionaries for UNK replacement: a two-column text file, or the one-word entries of a phrase table."""

from __future__ import annotations

import os

from rerank.errors import FormatError
from rerank.formats.files import display_name, read_lines
from rerank.formats.phrase_table import read_phrase_table

P_E_GIVEN_F = 2  # p(e|f) in a Moses phrase table: p(f|e) lex(f|e) p(e|f) lex(e|f)


P_E_GIVEN_F = 2  # p(e|f) in a Moses phrase table: p(f|e) lex(f|e) p(e|f) lex(e|f)


def read_dictionary(path: str | os.PathLike[str]) -> dict[str, str]:
    """A word dictionary: ``source translation`` per line, one translation per source word."""
    name = display_name(path)
    dictionary: dict[str, str] = {}
    for lineno, line in read_lines(path):
        fields = line.split()
        if not fields:
            continue
        if len(fields) != 2:
            raise FormatError(name, lineno, "a source word and its translation separated by a space", got=line)
        if fields[0] in dictionary and dictionary[fields[0]] != fields[1]:
            raise FormatError(name, lineno, f"one translation of {fields[0]!r} (already {dictionary[fields[0]]!r})",
                              got=line)
        dictionary[fields[0]] = fields[1]
    return dictionary


def phrase_table_dictionary(path: str | os.PathLike[str], score_index: int = P_E_GIVEN_F) -> dict[str, str]:
    """For each one-word source phrase of a Moses phrase table, its most probable one-word
    translation by the score in column ``score_index`` (0-based; default p(e|f)); the first on a tie."""
    best: dict[str, tuple[float, str]] = {}
    for entry in read_phrase_table(path):
        if len(entry.scores) <= score_index:
            raise FormatError(display_name(path), entry.lineno,
                              f"at least {score_index + 1} scores, p(e|f) being score {score_index + 1}",
                              got=entry.fields[2])
        source, target = entry.source, entry.target
        if " " in source or " " in target:
            continue
        score = entry.scores[score_index]
        if source not in best or score > best[source][0]:
            best[source] = (score, target)
    return {source: target for source, (_, target) in best.items()}
