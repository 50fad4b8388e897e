"""The errors a user can cause, each printed by the CLI as one line and exit status 2."""

from __future__ import annotations


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
            message += f", got {shorten(got)!r}"
        super().__init__(message)


class ConfigError(RerankError):
    """A configuration value is missing, unknown or of the wrong type."""


def shorten(text: str, width: int = 80) -> str:
    """``text`` cut to ``width`` characters, with an ellipsis when cut."""
    return text if len(text) <= width else text[: width - 3] + "..."
