"""The structure of an ARPA back-off language model: which n-grams are explicit and the back-off weights
of their contexts (what an exact sum over a word list needs; the probabilities themselves come from KenLM).

::

    \\data\\
    ngram 1=3
    ...
    \\1-grams:
    -1.2	word	-0.3        log10 p, the n-gram's words, log10 back-off weight (optional)
    ...
    \\end\\
"""

from __future__ import annotations

import math
import os
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import numpy as np

from rerank.errors import FormatError
from rerank.formats.files import display_name, open_binary, read_lines

Context = tuple[str, ...]
LN_10 = math.log(10.0)  # ARPA files and KenLM give log10 p; ln p = LN_10 · log10 p


@dataclass
class ArpaStructure:
    """An ARPA model's explicit n-grams, kept as each context's continuations (only words ``keep`` accepts),
    and the back-off weight (log10, rounded to float32 as KenLM keeps it) of every n-gram listed with one."""

    order: int
    vocab: set[str] = field(default_factory=set)  # the 1-grams' words
    continuations: dict[Context, list[str]] = field(default_factory=dict)  # h -> [w: "h w" explicit]
    backoffs: dict[Context, float] = field(default_factory=dict)  # h -> log10 bo(h) (absent: 0)
    contexts: set[Context] = field(default_factory=set)  # every explicit n-gram shorter than the order


def read_arpa_structure(path: str | os.PathLike[str], keep: Callable[[str], bool] = lambda word: True) -> ArpaStructure:
    """The structure of the ARPA file ``path`` (.gz allowed); a malformed line is a FormatError at its line."""
    name = display_name(path)
    lines = read_lines(path)
    counts = _header(lines, name)
    arpa = ArpaStructure(order=max(counts))
    interned: dict[str, str] = {}
    section, seen = 0, 0
    lineno = 0
    for lineno, line in lines:
        if not line.strip():
            continue
        if line.startswith("\\"):
            if seen != counts.get(section, 0):
                raise FormatError(name, lineno, f"{counts[section]} {section}-grams as the header says",
                                  got=f"{seen} before {line.strip()}")
            if line.strip() == "\\end\\":
                if section != arpa.order:
                    raise FormatError(name, lineno, f"the {section + 1}-grams section", got=line.strip())
                return arpa
            if line.strip() != f"\\{section + 1}-grams:":
                raise FormatError(name, lineno, f"\\{section + 1}-grams:", got=line.strip())
            section, seen = section + 1, 0
            continue
        if section == 0:
            raise FormatError(name, lineno, "\\1-grams: after the header", got=line)
        fields = line.split()
        if len(fields) not in (section + 1, section + 2):
            raise FormatError(name, lineno, f"log10 p, {section} word(s) and an optional back-off weight", got=line)
        try:
            float(fields[0])
            backoff = float(fields[section + 1]) if len(fields) == section + 2 else 0.0
        except ValueError:
            raise FormatError(name, lineno, "numbers for log10 p and the back-off weight", got=line) from None
        seen += 1
        ngram = tuple(interned.setdefault(w, w) for w in fields[1:section + 1])
        if section == 1:
            arpa.vocab.add(ngram[0])
        elif keep(ngram[-1]):
            arpa.continuations.setdefault(ngram[:-1], []).append(ngram[-1])
        if section < arpa.order:
            arpa.contexts.add(ngram)
            if backoff:
                arpa.backoffs[ngram] = float(np.float32(backoff))  # as KenLM stores it
    raise FormatError(name, lineno + 1, "\\end\\ closing the model", got="the end of the file")


KENLM_BINARY_MAGIC = b"mmap lm http://kheafield.com/code"  # the first bytes of every KenLM binary model


def check_language_model(path: str | os.PathLike[str], binary: bool = True) -> None:
    """``path`` is what KenLM loads, told from its first line in a moment: an ARPA file (``\\data\\`` its first
    line that is not blank; gzipped or not) or, where ``binary``, a KenLM binary model. A text file, a phrase
    table or an n-best list given as the language model is a :class:`FormatError` at its first line."""
    name = display_name(path)
    try:
        with open_binary(path) as stream:
            head = stream.read(len(KENLM_BINARY_MAGIC))
    except (OSError, EOFError, zlib.error):
        head = b""  # a damaged gzip stream: named by read_lines below
    if head == KENLM_BINARY_MAGIC:
        if binary:
            return
        raise FormatError(name, None, "an ARPA language model (text): a KenLM binary model does not do here",
                          got="a KenLM binary model")
    expected = "an ARPA language model (\\data\\ first)" + (" or a KenLM binary model" if binary else "")
    for lineno, line in read_lines(path, "latin-1"):  # any bytes: the first line is shown as it is
        if line.strip():
            if line.strip() != "\\data\\":
                raise FormatError(name, lineno, expected, got=line)
            return
    raise FormatError(name, None, expected, got="an empty file")


def _header(lines: Iterator[tuple[int, str]], name: str) -> dict[int, int]:
    """The ``ngram N=count`` lines after ``\\data\\``: order -> count."""
    counts: dict[int, int] = {}
    started = False
    for lineno, line in lines:
        text = line.strip()
        if not started:
            if text == "\\data\\":
                started = True
            continue
        if not text:
            if counts:
                return counts
            continue
        try:
            key, value = text.split("=")
            kind, order = key.split()
            if kind != "ngram" or int(order) != len(counts) + 1:
                raise ValueError
            counts[int(order)] = int(value)
        except ValueError:
            raise FormatError(name, lineno, f"'ngram {len(counts) + 1}=COUNT'", got=line) from None
    raise FormatError(name, None, "an ARPA language model (\\data\\ and 'ngram N=COUNT' lines)",
                      got="the end of the file")
