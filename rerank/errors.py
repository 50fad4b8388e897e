"""The errors a user can cause, each printed by the CLI as one line and exit status 2."""

from __future__ import annotations

import difflib
import logging
import math
import os
import pathlib
import re
import reprlib
from collections.abc import Callable, Iterable

_SAID: set[str] = set()
ANSI_ESCAPE = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


class RerankError(Exception):
    """Base class: a problem with the user's input or configuration, not a bug."""


class FormatError(RerankError):
    """A file does not have the format we expect, at a given line."""

    def __init__(self, path: str, lineno: int | None, expected: str, got: str | None = None):
        self.path = path
        self.lineno = lineno
        self.expected = expected
        self.got = got
        where = f"{path}:{lineno}" if lineno is not None else str(path)
        message = f"{where}: expected {expected}"
        if got is not None:
            message += f", got {quoted(shorten(got))}"
        super().__init__(message)


class ConfigError(RerankError):
    """A configuration value is missing, unknown or of the wrong type."""


class NonFiniteScore(RerankError):
    """A score about to be written is NaN or infinite; Moses' files take finite numbers only.

    ``where`` names the sentence or line; :meth:`in_file` adds the file it came from.
    """

    def __init__(self, where: str, label: str, value: float):
        self.where, self.label, self.value = where, label, value
        super().__init__(f"{where}: {label} is {value}, not a finite number; nothing was written "
                         "(Moses' files take finite numbers only)")

    def in_file(self, name: str) -> NonFiniteScore:
        return NonFiniteScore(f"{name}: {self.where}", self.label, self.value)


def did_you_mean(word: str, known: Iterable[str], prefix: str = "") -> str:
    """`` (did you mean 'x'?)`` with the known name closest to a mistyped ``word`` (after ``prefix``, as in
    ``training.x``), or ``""`` if none is close."""
    close = difflib.get_close_matches(word, list(known), n=1)
    return f" (did you mean {prefix + close[0]!r}?)" if close else ""


def did_you_mean_path(path: str | os.PathLike[str]) -> str:
    """`` (did you mean 'dir/x'?)`` for a path that does not exist, with each missing part of it replaced by the
    closest name in the directory above (``examples/models/rnnserch``: ``examples/models/rnnsearch``), where the
    path that makes exists; ``""`` otherwise."""
    text = os.fspath(path)
    found = ""
    for part in pathlib.Path(text).parts:
        candidate = os.path.join(found, part)
        if not os.path.lexists(candidate):
            try:
                names = sorted(os.listdir(found or os.curdir))
            except OSError:
                return ""
            close = difflib.get_close_matches(part, names, n=1)
            if not close:
                return ""
            candidate = os.path.join(found, close[0])
        found = candidate
    return f" (did you mean {found!r}?)" if found and os.path.normpath(found) != os.path.normpath(text) \
        and os.path.exists(found) else ""


def quoted(text: str) -> str:
    """``text`` in single quotes with its control characters shown as escapes (``\\r``, ``\\x1b``) and
    nothing else escaped: a backslash in the input shows as one backslash."""
    visible = "".join(repr(c)[1:-1] if (ord(c) < 32 or ord(c) == 127) else c for c in text)
    return f"'{visible}'"


def plain(text: str) -> str:
    """``text`` without terminal escape sequences (colours, bold), which some libraries put in messages."""
    return ANSI_ESCAPE.sub("", text)


def counted(number: int, noun: str, plural: str | None = None) -> str:
    """``1 value``, ``4 values``, ``1 hypothesis``, ``2 hypotheses``."""
    return f"{number} {noun}" if number == 1 else f"{number:,} {plural or noun + 's'}"


def log_once(logger: logging.Logger, level: int, message: str, *args: object) -> None:
    """Log ``message % args`` the first time this process says it; a repeat (the same warning for every
    tuning run of a study) is dropped."""
    text = message % args if args else message
    if text not in _SAID:
        _SAID.add(text)
        logger.log(level, "%s", text)


def shorten(text: str, width: int = 80) -> str:
    """``text`` cut to ``width`` characters, with an ellipsis when cut."""
    return text if len(text) <= width else text[: width - 3] + "..."


_BRIEF = reprlib.Repr()
_BRIEF.maxlevel, _BRIEF.maxstring, _BRIEF.maxlong, _BRIEF.maxother = 3, 60, 40, 60
_BRIEF.maxtuple = _BRIEF.maxlist = _BRIEF.maxarray = _BRIEF.maxdict = _BRIEF.maxset = _BRIEF.maxfrozenset = \
    _BRIEF.maxdeque = 4


def brief(value: object) -> str:
    """``repr(value)`` bounded in length and in the work it takes (a value read from a file can be a string of
    megabytes, or a structure a few aliases blow up): what an error message shows of a value."""
    return shorten(_BRIEF.repr(value), 120)


def check_finite(values: Iterable[tuple[str, Iterable[float]]], where: Callable[[], str]) -> None:
    """A :class:`NonFiniteScore` naming ``where()`` and the label if any value is NaN or infinite (the place
    is only worked out for the error, so that the check costs nothing on the lines that pass)."""
    for label, numbers in values:
        for value in numbers:
            if not math.isfinite(value):
                raise NonFiniteScore(where(), label, float(value))


def install_extra(extra: str) -> str:
    """How to install the optional packages of ``extra``: rerank-moses is not on the public package index, so from
    a clone or from the built wheel (docs/getting-started.md)."""
    return (f"pip install '.[{extra}]' in rerank's clone, or the wheel's path followed by [{extra}] "
            f"('dist/rerank_moses-VERSION-py3-none-any.whl[{extra}]')")
