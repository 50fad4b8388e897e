"""Whether a text is tokenized (and lowercased) as Moses' pipeline writes it, and whether hypotheses and
references agree.

BLEU counts tokens: hypotheses tokenized by Moses (``un homme sur un canapé .``, ``l' homme``, ``d&apos; eau``)
scored against detokenized references (``un homme sur un canapé.``, ``l'homme``) share far fewer n-grams than
they should (on the shipped sample, ``rerank evaluate --tokenize none`` gives 41.75 instead of 60.60), and
tuning against them optimises toward the wrong lengths. Nothing fails: only the numbers are wrong.

The test is cheap and looks at the first lines of each text only. A line shows the tokenized style when a
comma or a full stop stands alone between spaces or at its end (``canapé .``), or an apostrophe ends a word
(``l' homme``, ``d&apos; eau``, ``don 't``); it shows the detokenized style when a comma or full stop follows
a word directly (``canapé.``) or an apostrophe joins two words (``l'homme``). A text is of a style when the
lines that show it outnumber those that show the other by :data:`MARGIN` to one, in :data:`MIN_LINES` lines
or more; a text with little punctuation is of no style, and is never reported. Apart from that, Moses escapes
quotes (``&apos;``, ``&quot;``): a text with the escapes scored against one with the bare characters is also
a mismatch. So is case: a text is lowercased when its lines with letters but no capital outnumber those with a
capital by the same margin, cased for the reverse; a lowercased system (Moses trained on ``*.lc.*`` files)
scored against cased references loses every capitalised word (on Multi30k's test set, ``rerank evaluate`` of
Moses' lowercased 1-best against the raw references gives BLEU 38.32, against the lowercased tokenized ones with
``--tokenize none`` 56.12). Case is not compared where BLEU is case-insensitive (``--lowercase``).

A mismatch is a warning (on standard error, once per pair of files), not an error, as sacreBLEU warns on
tokenized input: the test is a heuristic, and a user may mean it (a detokenized system scored with
``--tokenize 13a``); the warning says which file is which and how to make them agree.
"""

from __future__ import annotations

import itertools
import logging
import os
import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass

from rerank.errors import log_once

SAMPLE_LINES = 2000  # lines of each text looked at
MIN_LINES = 3  # lines that must show a style for the text to have one
MARGIN = 3  # how many times more lines must show the style than the other

_SPLIT = re.compile(r"(?:^|\s)[.,](?:\s|$)|\S(?:'|&apos;)\s|\s(?:'|&apos;)(?:s|t|re|ll|ve|d|m)\b")
_ATTACHED = re.compile(r"[^\W\d_][.,](?:\s|$)|[^\W\d_]'[^\W\d_]")
_ESCAPED = re.compile(r"&(?:apos|quot);")
_BARE_QUOTE = re.compile(r"['\"]")
_LETTER = re.compile(r"[^\W\d_]")

# sacreBLEU's test for tokenized text: a line ending in a punctuation mark set off by a space
_TOKENIZED_END = re.compile(r"\S \W$")


@dataclass(frozen=True)
class TextStyle:
    """How many of the lines looked at show each style."""

    lines: int
    split: int  # punctuation set off by spaces: canapé . / l' homme
    attached: int  # punctuation attached to words: canapé. / l'homme
    escaped: int  # Moses' escapes &apos; &quot;
    bare_quotes: int  # ' or " as they are
    lowercase: int = 0  # letters, none of them a capital
    capitals: int = 0  # a capital letter or more

    @property
    def tokenized(self) -> bool | None:
        """True for tokenized text, False for detokenized text, None where the lines do not tell."""
        return _outweighs(self.split, self.attached)

    @property
    def escapes(self) -> bool | None:
        """True where quotes are escaped as Moses does, False where they are bare, None where it does not tell."""
        return _outweighs(self.escaped, self.bare_quotes)

    @property
    def lowercased(self) -> bool | None:
        """True for lowercased text, False for cased text, None where the lines do not tell."""
        return _outweighs(self.lowercase, self.capitals)


def _outweighs(yes: int, no: int) -> bool | None:
    """True where the lines that show a style (``yes``) outnumber those that show the other (``no``) by
    :data:`MARGIN` to one, in :data:`MIN_LINES` lines or more, False for the reverse, None where neither does."""
    if yes >= MIN_LINES and yes >= MARGIN * no:
        return True
    if no >= MIN_LINES and no >= MARGIN * yes:
        return False
    return None


def text_style(lines: Iterable[str], limit: int = SAMPLE_LINES) -> TextStyle:
    """The style of the first ``limit`` lines."""
    counts = [0, 0, 0, 0, 0, 0, 0]
    for line in itertools.islice(lines, limit):
        counts[0] += 1
        counts[1] += bool(_SPLIT.search(line))
        counts[2] += bool(_ATTACHED.search(line))
        counts[3] += bool(_ESCAPED.search(line))
        counts[4] += bool(_BARE_QUOTE.search(line))
        if line != line.lower():
            counts[6] += 1
        elif _LETTER.search(line):
            counts[5] += 1
    return TextStyle(*counts)


def style_mismatch(hypotheses: TextStyle, references: TextStyle, hypotheses_name: str, references_name: str
                   ) -> str | None:
    """What differs between the hypotheses' style and the references', as a sentence; None if nothing does."""
    styles = {True: "tokenized (punctuation set off by spaces: 'canapé .', 'l' homme')",
              False: "detokenized (punctuation attached: 'canapé.', 'l'homme')"}
    if None not in (hypotheses.tokenized, references.tokenized) and hypotheses.tokenized != references.tokenized:
        assert hypotheses.tokenized is not None and references.tokenized is not None
        return (f"{hypotheses_name} looks {styles[hypotheses.tokenized]} but {references_name} looks "
                f"{styles[references.tokenized].split(' (')[0]}: BLEU would compare different tokens; tokenize "
                "both alike (Moses' tokenizer.perl, or its detokenizer.perl) before scoring or tuning")
    if None not in (hypotheses.escapes, references.escapes) and hypotheses.escapes != references.escapes:
        escaped, bare = (hypotheses_name, references_name) if hypotheses.escapes else (references_name, hypotheses_name)
        return (f"{escaped} escapes quotes as Moses does (&apos;, &quot;) but {bare} has them bare (' \"): BLEU "
                "would compare different tokens; unescape the first (Moses' deescape-special-chars.perl) or escape "
                "the second (escape-special-chars.perl)")
    return None


def case_mismatch(hypotheses: TextStyle, references: TextStyle, hypotheses_name: str, references_name: str
                  ) -> str | None:
    """Where one text is lowercased and the other cased, a sentence that says which is which; None otherwise."""
    if None in (hypotheses.lowercased, references.lowercased) or hypotheses.lowercased == references.lowercased:
        return None
    lower, cased = (hypotheses_name, references_name) if hypotheses.lowercased else (references_name, hypotheses_name)
    return (f"{lower} is lowercased but {cased} has capitals: BLEU counts 'Un' and 'un' as different words; "
            f"lowercase {cased} too (Moses' lowercase.perl) or score case-insensitively (--lowercase)")


def style_mismatches(hypotheses: TextStyle, references: TextStyle, hypotheses_name: str, references_name: str,
                     lowercase: bool = False) -> list[str]:
    """The tokenization and case mismatches (see :func:`style_mismatch`, :func:`case_mismatch`), one sentence
    each; case is not compared where BLEU is ``lowercase`` (case-insensitive)."""
    messages = [style_mismatch(hypotheses, references, hypotheses_name, references_name),
                None if lowercase else case_mismatch(hypotheses, references, hypotheses_name, references_name)]
    return [message for message in messages if message]


def warn_style_mismatch(hypotheses: Iterable[str], references: Iterable[str], hypotheses_name: str,
                        references_name: str, logger: logging.Logger, lowercase: bool = False) -> list[str]:
    """Warn (each warning once per pair of files in a process) where the hypotheses and the references differ in
    style or case (only in style where BLEU is ``lowercase``); returns the warnings."""
    messages = style_mismatches(text_style(hypotheses), text_style(references), hypotheses_name, references_name,
                                lowercase)
    for message in messages:
        log_once(logger, logging.WARNING, "%s", message)
    return messages


def nbest_hypotheses(path: str | os.PathLike[str]) -> Iterator[str]:
    """The hypotheses of an n-best list, in file order (none from stdin, which cannot be read twice)."""
    from rerank.formats.nbest import read_nbest

    if str(path) == "-":
        return iter(())
    return (entry.hypothesis for entry in read_nbest(path))


def check_nbest_references(nbests: Sequence[str | os.PathLike[str]], references: Iterable[str], references_name: str,
                           logger: logging.Logger, lowercase: bool = False) -> None:
    """Warn where an n-best list's hypotheses and the references (their lines) differ in style or case (see the
    module; case not where BLEU is ``lowercase``)."""
    from rerank.formats.files import display_name

    reference = text_style(references)
    for nbest in nbests:
        for message in style_mismatches(text_style(nbest_hypotheses(nbest)), reference, display_name(nbest),
                                        references_name, lowercase):
            log_once(logger, logging.WARNING, "%s", message)


def looks_tokenized(lines: Sequence[str]) -> bool:
    """Whether most lines end in a punctuation mark set off by a space, as tokenized text does (sacreBLEU's
    test, as a share of the lines rather than 100 of them, so that short files are judged too)."""
    ends = sum(1 for line in lines if _TOKENIZED_END.search(line.rstrip()))
    return bool(lines) and ends >= max(1, len(lines) // 2)
