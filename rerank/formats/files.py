"""Reading and writing text files: gzip chosen by suffix, ``-`` for stdin/stdout, atomic output.

Every reader in :mod:`rerank.formats` goes through :func:`read_lines`, so that CRLF line ends,
invalid UTF-8 and truncated gzip streams are reported the same way everywhere: as a
:class:`~rerank.errors.FormatError` naming the file and the line.
"""

from __future__ import annotations

import contextlib
import gzip
import io
import os
import sys
import tempfile
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import TextIO

from rerank.errors import FormatError, RerankError

STDIO = "-"
GZIP_LEVEL = 6  # level 9 costs twice the time for 1-2% smaller files


def is_gzip(path: str | os.PathLike) -> bool:
    return str(path).endswith(".gz")


def display_name(path: str | os.PathLike) -> str:
    return "<stdin>" if str(path) == STDIO else str(path)


def read_lines(path: str | os.PathLike, encoding: str = "utf-8") -> Iterator[tuple[int, str]]:
    """Yield ``(line number, line)`` pairs, 1-based, without the final ``\\n``.

    Lines are decoded one by one, so an invalid byte is reported at its own line. ``encoding``
    is UTF-8 unless a file is known to be otherwise (old German Europarl tables are Latin-1).
    """
    name = display_name(path)
    lineno = 0
    try:
        with _open_binary(path) as stream:
            for lineno, raw in enumerate(stream, 1):
                if raw.endswith(b"\n"):
                    raw = raw[:-1]
                if raw.endswith(b"\r"):
                    raise FormatError(name, lineno, "Unix line ends (\\n); convert the file with dos2unix",
                                      got="a line ending in \\r\\n")
                try:
                    line = raw.decode(encoding)
                except UnicodeDecodeError as e:
                    bad = raw[max(0, e.start - 20): e.end + 20]
                    raise FormatError(name, lineno, f"{encoding.upper()} text",
                                      got=f"byte 0x{raw[e.start]:02x} at column {e.start + 1} in {bad!r}") from None
                yield lineno, line
    except (EOFError, gzip.BadGzipFile, zlib.error) as e:
        raise FormatError(name, lineno + 1, "a complete gzip stream", got=f"{type(e).__name__}: {e}") from None


@contextlib.contextmanager
def _open_binary(path: str | os.PathLike) -> Iterator[io.BufferedIOBase]:
    if str(path) == STDIO:
        stream = sys.stdin.buffer
        if is_gzip(path):
            stream = gzip.GzipFile(fileobj=stream, mode="rb")
        yield stream
        return
    try:
        raw = open(path, "rb")
    except OSError as e:
        raise RerankError(f"{path}: cannot read: {e.strerror}") from None
    with raw:
        if is_gzip(path):
            with gzip.GzipFile(fileobj=raw, mode="rb") as stream:
                yield stream
        else:
            yield raw


def read_text(path: str | os.PathLike, encoding: str = "utf-8") -> list[str]:
    """All lines of a (small) text file, such as a source or reference file."""
    return [line for _, line in read_lines(path, encoding)]


def count_lines(path: str | os.PathLike, encoding: str = "utf-8") -> int:
    """The number of lines of a text file, read as a stream (and checked like any other input)."""
    return sum(1 for _ in read_lines(path, encoding))


@contextlib.contextmanager
def atomic_output(path: str | os.PathLike, encoding: str = "utf-8") -> Iterator[TextIO]:
    """A text stream that becomes ``path`` only when the block finishes without an exception.

    The data go to a temporary file in the same directory, which is renamed over ``path`` at the
    end, so a crash or a bad input line never leaves half a file behind. ``-`` is stdout.
    A ``.gz`` suffix writes gzip.
    """
    if str(path) == STDIO:
        yield sys.stdout
        sys.stdout.flush()
        return
    with atomic_binary_output(path) as binary:
        with io.TextIOWrapper(binary, encoding=encoding, newline="\n", write_through=False) as text:
            yield text


@contextlib.contextmanager
def atomic_binary_output(path: str | os.PathLike) -> Iterator[io.BufferedIOBase]:
    """A binary stream that becomes ``path`` at the end of the block, as :func:`atomic_output` does."""
    if str(path) == STDIO:
        yield sys.stdout.buffer
        sys.stdout.buffer.flush()
        return
    target = Path(path)
    directory = target.parent
    if not directory.is_dir():
        raise RerankError(f"{path}: cannot write: directory {str(directory)!r} does not exist")
    if target.is_dir():
        raise RerankError(f"{path}: cannot write: it is a directory")
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=directory)
    except OSError as e:
        raise RerankError(f"{path}: cannot write: {e.strerror}") from None
    try:
        with os.fdopen(fd, "wb") as raw:
            if is_gzip(target):
                with gzip.GzipFile(filename="", fileobj=raw, mode="wb", compresslevel=GZIP_LEVEL, mtime=0) as binary:
                    yield binary
            else:
                yield raw
        os.chmod(tmp, 0o666 & ~_umask())
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask
