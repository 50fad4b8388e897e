"""Whether references belong to the hypotheses at all: another set's references, or a file shifted by a line,
of the right length score without an error, only at a BLEU near 0 (tuning Moses' test-set list against the
first 1,000 references of the validation set: BLEU 0.94, exit status 0).

The test compares each hypothesis with its own reference line and with other lines' (the references shifted
by a half, a third and a quarter of the set): the share of words a hypothesis has in common with a reference
(clipped counts of lowercased words, ``2 * common / (hypothesis words + reference words)``, so that case,
tokenization and Moses' escapes do not count) is averaged over the first :data:`SAMPLE_SENTENCES` sentences.
A translation shares words with any sentence of its language (articles, punctuation, the domain's nouns), but
far more with its own reference: on Multi30k's test set, Moses' 1-best shares 78% with its own references and
15% with other lines' (5.3 times as many); against the validation set's references, 15% and 15%. The
references look unrelated when the own share is below :data:`RATIO` times the others', in
:data:`MIN_SENTENCES` sentences or more. Replacing words of Moses' 1-best with random words of the training
text until it falls below that ratio leaves a BLEU below 0.2: no system worth scoring comes that close.

It is a warning, not an error: a system whose output does not depend on its input (an untrained model, a wrong
source file) looks the same, and scoring it is legitimate; the warning says what to check.
"""

from __future__ import annotations

import collections
import html
import itertools
import logging
import os
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from rerank.errors import log_once

SAMPLE_SENTENCES = 2000  # sentences compared
MIN_SENTENCES = 50  # fewer: no verdict (the shares vary too much)
RATIO = 1.3  # the own reference's share must be at least this many times the other lines'

_WORD = re.compile(r"\w+")


@dataclass(frozen=True)
class Overlap:
    """The mean share of a hypothesis' words in its own reference and in other lines' references."""

    sentences: int
    own: float
    others: float

    @property
    def unrelated(self) -> bool:
        """Whether the own references share too few words more than the others to be the hypotheses' references."""
        return self.sentences >= MIN_SENTENCES and (self.own == 0 or self.own < RATIO * self.others)


def _words(line: str) -> collections.Counter[str]:
    return collections.Counter(_WORD.findall(html.unescape(line).lower() if "&" in line else line.lower()))


def _shared(hypothesis: collections.Counter[str], reference: collections.Counter[str]) -> float:
    total = hypothesis.total() + reference.total()
    return 2 * (hypothesis & reference).total() / total if total else 0.0


def overlap(hypotheses: Iterable[str], references: Iterable[str], limit: int = SAMPLE_SENTENCES) -> Overlap:
    """The :class:`Overlap` of the first ``limit`` hypotheses and references (line ``i`` with line ``i``)."""
    pairs = list(itertools.islice(zip(hypotheses, references, strict=False), limit))
    count = len(pairs)
    if count < 2:
        return Overlap(count, 0.0, 0.0)
    hyps, refs = [_words(h) for h, _ in pairs], [_words(r) for _, r in pairs]
    own = sum(_shared(h, r) for h, r in zip(hyps, refs, strict=True)) / count
    shifts = sorted({max(1, count // d) for d in (2, 3, 4)})
    others = sum(_shared(hyps[i], refs[(i + k) % count]) for k in shifts for i in range(count)) / (count * len(shifts))
    return Overlap(count, own, others)


def unrelated_message(found: Overlap, hypotheses_name: str, references_name: str) -> str | None:
    """Where the references look unrelated to the hypotheses, a sentence that says so and what to check."""
    if not found.unrelated:
        return None
    return (f"{references_name} looks unrelated to {hypotheses_name}: over {found.sentences} sentences a hypothesis "
            f"shares {found.own:.0%} of its words with its own reference and {found.others:.0%} with other lines' "
            f"(a translation shares several times more); check that {references_name} holds the references of the "
            f"text {hypotheses_name} translates, line for line (the same set, in the same order)")


def warn_unrelated(hypotheses: Sequence[str], references: Sequence[str], hypotheses_name: str, references_name: str,
                   logger: logging.Logger) -> str | None:
    """Warn (once per pair of files in a process) where the references look unrelated to the hypotheses;
    returns the warning, or None."""
    message = unrelated_message(overlap(hypotheses, references), hypotheses_name, references_name)
    if message:
        log_once(logger, logging.WARNING, "%s", message)
    return message


def warn_unrelated_nbest(path: str | os.PathLike[str], references: Sequence[str], references_name: str,
                         logger: logging.Logger) -> str | None:
    """:func:`warn_unrelated` for the first hypothesis of each sentence of an n-best list (its first
    :data:`SAMPLE_SENTENCES` sentences, read from the file's start), each against the reference line of its id."""
    from rerank.formats.files import display_name
    from rerank.formats.nbest import read_nbest

    first: dict[int, str] = {}
    for entry in read_nbest(path):
        if entry.sentence_id >= min(SAMPLE_SENTENCES, len(references)):
            break
        first.setdefault(entry.sentence_id, entry.hypothesis)
    return warn_unrelated(list(first.values()), [references[i] for i in first], display_name(path), references_name,
                          logger)
