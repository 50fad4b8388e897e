"""Shell command templates (``tune --decoder``, ``--submit``) and the child processes they start: the one way
rerank runs a command line a user wrote.

A template is shell text with placeholders, ``{nbest}``, ``{command}``. rerank puts every value in quoted
for the shell (:func:`shlex.quote`), so that a path or a label with spaces, ``$(...)``, backticks or
quotes is one word and never runs. A placeholder the template quotes itself, ``'{nbest}'`` or
``"{nbest}"``, is taken as the bare placeholder (its quotes dropped, the value quoted by rerank); one
inside a longer quoted string (``"--n={nbest}"``), where no quoting of the value is right, is refused
with a message saying how to write it. ``${name}`` is the shell's, not a placeholder. A placeholder in the
body of a here-document (``sh <<EOF ... {nbest} ... EOF``) is refused: the shell expands ``$(...)`` there
whatever the quotes, so no quoting can keep a value one word.

The commands are run by :mod:`rerank.processes`, each in a process group of its own, so that rerank ends
the decoder and everything it started (a ``sh -c`` and its ``moses``) when it stops.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field

from rerank.errors import RerankError

_NAME = re.compile(r"\{([a-z_]+)\}")
_HERE_DOCUMENT = re.compile(r"<<(-?)[ \t]*((?:[^\s;&|<>()'\"\\]|'[^']*'|\"[^\"]*\"|\\.)+)")


Value = str | Sequence[str]  # one shell word, or a command as several words


@dataclass(frozen=True)
class Template:
    """A command template ``text`` given as ``option``, its placeholders among ``known``."""

    text: str
    option: str
    known: Collection[str]
    parts: tuple[str | Placeholder, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "parts", _parse(self.text, self.option, self.known))

    @property
    def names(self) -> set[str]:
        """The placeholders the template uses."""
        return {part.name for part in self.parts if isinstance(part, Placeholder)}

    def render(self, values: Mapping[str, Value]) -> str:
        """The command line with each placeholder replaced by its value quoted for the shell: a string as one
        word; a list of words (a command) as those words, or as one word where the template quoted the
        placeholder (``sh -c '{command}'``)."""
        out = []
        for part in self.parts:
            if isinstance(part, str):
                out.append(part)
                continue
            if part.name not in values:
                raise RerankError(f"{self.option}: no value for {{{part.name}}}")
            value = values[part.name]
            words = [value] if isinstance(value, str) else list(value)
            if any("\0" in word for word in words):
                raise RerankError(f"{self.option}: the value of {{{part.name}}} holds a NUL byte")
            joined = shlex.join(words)
            out.append(shlex.quote(joined) if part.quoted and not isinstance(value, str) else joined)
        return "".join(out)


@dataclass(frozen=True)
class Placeholder:
    name: str
    quoted: bool  # the template had quotes around it


def _here_document_end(text: str, start: int, delimiters: Sequence[tuple[str, bool]], option: str) -> int:
    """Where the bodies of the here-documents that start at ``start`` end (after their delimiter lines); a
    placeholder in a body is refused."""
    lines = text[start:].split("\n")
    at, line = start, 0
    for delimiter, tabs in delimiters:
        while line < len(lines):
            body = lines[line]
            line += 1
            if (body.lstrip("\t") if tabs else body) == delimiter:
                at += len(body) + 1
                break
            if (match := _NAME.search(body)) and not body[:match.start()].endswith("$"):
                raise RerankError(
                    f"{option}: the placeholder {match.group(0)} is in the body of a here-document (<<{delimiter}), "
                    "where the shell expands $(...) and `...` in a value whatever its quotes: pass it as an argument "
                    f"or in the environment instead (e.g. sh -c '... \"$1\" ...' sh {match.group(0)})")
            at += len(body) + 1
    return min(at, len(text))


def _parse(text: str, option: str, known: Collection[str]) -> tuple[str | Placeholder, ...]:
    """The template as literal text and placeholders, following the shell's quoting."""
    parts: list[str | Placeholder] = []
    literal: list[str] = []
    quote: str | None = None  # the quote character the text at i is inside, if any
    opened = -1  # where that quote opened
    here_documents: list[tuple[str, bool]] = []  # delimiters (and <<-) of here-documents whose body is next
    i = 0
    while i < len(text):
        char = text[i]
        if quote is None and char == "<" and (here := _HERE_DOCUMENT.match(text, i)) and text[i - 1:i] != "<":
            here_documents.append((re.sub(r"['\"\\]", "", here.group(2)), bool(here.group(1))))
            literal.append(here.group(0))
            i = here.end()
            continue
        if quote is None and char == "\n" and here_documents:
            end = _here_document_end(text, i + 1, here_documents, option)
            literal.append(text[i:end])
            here_documents, i = [], end
            continue
        match = _NAME.match(text, i) if char == "{" and (i == 0 or text[i - 1] != "$") else None
        if match is not None:
            name = match.group(1)
            if name not in known:
                raise RerankError(f"{option}: unknown placeholder {{{name}}}; known: "
                                  + ", ".join(f"{{{k}}}" for k in known))
            end = match.end()
            quoted = quote is not None
            if quote is not None:
                if opened != i - 1 or end >= len(text) or text[end] != quote:
                    raise RerankError(
                        f"{option}: the placeholder {{{name}}} is inside a quoted string with other text "
                        f"({text[max(opened, 0):end + 1]!r}): rerank quotes every value it puts in, so write the "
                        f"placeholder on its own, outside quotes (e.g. --flag {{{name}}} for --flag={{{name}}})")
                literal.pop()  # the template's own quotes around the placeholder: rerank quotes the value
                quote = None
                end += 1
            parts += ["".join(literal), Placeholder(name, quoted)]
            literal = []
            i = end
            continue
        literal.append(char)
        if quote is None:
            if char == "\\" and i + 1 < len(text):
                literal.append(text[i + 1])
                i += 1
            elif char in "'\"":
                quote, opened = char, i
        elif char == quote:
            quote = None
        elif quote == '"' and char == "\\" and i + 1 < len(text):
            literal.append(text[i + 1])
            i += 1
        i += 1
    if quote is not None:
        raise RerankError(f"{option}: a quote ({quote}) opened at character {opened + 1} is never closed")
    parts.append("".join(literal))
    return tuple(part for part in parts if part != "")
