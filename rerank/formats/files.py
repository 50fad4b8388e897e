"""Reading and writing text files: gzip (read by its magic bytes or the ``.gz`` suffix, written by the
suffix), ``-`` for stdin/stdout, atomic output.

Every reader in :mod:`rerank.formats` goes through :func:`read_lines`, so that CRLF line ends,
invalid UTF-8 and truncated gzip streams are reported the same way everywhere: as a
:class:`~rerank.errors.FormatError` naming the file and the line.
"""

from __future__ import annotations

import contextlib
import gzip
import io
import os
import secrets
import sys
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO, TextIO, cast

from rerank.errors import FormatError, RerankError

STDIO = "-"
GZIP_MAGIC = b"\x1f\x8b"
GZIP_LEVEL = 6  # level 9 costs twice the time for 1-2% smaller files


def is_gzip(path: str | os.PathLike[str]) -> bool:
    return str(path).endswith(".gz")


def display_name(path: str | os.PathLike[str]) -> str:
    return "<stdin>" if str(path) == STDIO else str(path)


def read_lines(path: str | os.PathLike[str], encoding: str = "utf-8") -> Iterator[tuple[int, str]]:
    """Yield ``(line number, line)`` pairs, 1-based, without the final ``\\n``.

    Lines are decoded one by one, so an invalid byte is reported at its own line. ``encoding``
    is UTF-8 unless a file is known to be otherwise (old German Europarl tables are Latin-1).
    """
    name = display_name(path)
    lineno = 0
    try:
        with _open_binary(path) as stream:
            for lineno, raw in enumerate(stream, 1):
                yield lineno, decode_line(raw[:-1] if raw.endswith(b"\n") else raw, name, lineno, encoding)
    except (EOFError, gzip.BadGzipFile, zlib.error) as e:
        raise FormatError(name, lineno + 1, "a complete gzip stream", got=f"{type(e).__name__}: {e}") from None


def decode_line(raw: bytes, name: str, lineno: int, encoding: str = "utf-8") -> str:
    """One line (without its ``\\n``) of the file ``name`` as text; a CR line end or an invalid byte is a
    :class:`~rerank.errors.FormatError` at line ``lineno``."""
    if raw.endswith(b"\r"):
        raise FormatError(name, lineno, "Unix line ends (\\n); convert the file with dos2unix",
                          got="a line ending in \r\n")
    try:
        return raw.decode(encoding)
    except UnicodeDecodeError as e:
        bad = raw[max(0, e.start - 20): e.end + 20]
        raise FormatError(name, lineno, f"{encoding.upper()} text",
                          got=f"byte 0x{raw[e.start]:02x} at column {e.start + 1} in {bad!r}") from None


@contextlib.contextmanager
def _open_binary(path: str | os.PathLike[str]) -> Iterator[BinaryIO]:
    """The bytes of ``path`` (``-``: stdin), gunzipped when its name ends in ``.gz`` (which must then be
    gzip) or when they start with gzip's magic bytes: a gzipped stdin or a gzipped file without the
    suffix reads as text too."""
    if str(path) == STDIO:
        stream = sys.stdin.buffer
        yield _gunzip(stream) if _starts_with(stream, GZIP_MAGIC) else stream
        return
    try:
        raw = open(path, "rb")
    except OSError as e:
        raise RerankError(f"{path}: cannot read: {e.strerror}") from None
    with raw:
        if not (is_gzip(path) or _starts_with(raw, GZIP_MAGIC)):
            yield raw
            return
        with _gunzip(raw) as stream:
            yield stream


def _gunzip(stream: BinaryIO) -> BinaryIO:
    return cast(BinaryIO, gzip.GzipFile(fileobj=stream, mode="rb"))


def _starts_with(stream: BinaryIO, magic: bytes) -> bool:
    """Whether the next bytes of ``stream`` are ``magic``, without consuming them."""
    peek = getattr(stream, "peek", None)
    if peek is not None:
        return bool(peek(len(magic))[: len(magic)] == magic)
    if stream.seekable():
        where = stream.tell()
        head = stream.read(len(magic))
        stream.seek(where)
        return head == magic
    return False


def read_text(path: str | os.PathLike[str], encoding: str = "utf-8") -> list[str]:
    """All lines of a (small) text file, such as a source or reference file."""
    return [line for _, line in read_lines(path, encoding)]


def count_lines(path: str | os.PathLike[str], encoding: str = "utf-8") -> int:
    """The number of lines of a text file, read as a stream (and checked like any other input)."""
    return sum(1 for _ in read_lines(path, encoding))


@contextlib.contextmanager
def atomic_output(path: str | os.PathLike[str], encoding: str = "utf-8") -> Iterator[TextIO]:
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
def atomic_binary_output(path: str | os.PathLike[str]) -> Iterator[BinaryIO]:
    """A binary stream that becomes ``path`` at the end of the block, as :func:`atomic_output` does."""
    if str(path) == STDIO:
        yield sys.stdout.buffer
        sys.stdout.buffer.flush()
        return
    target = check_writable(path)
    fd, tmp = _create_temporary(target)
    try:
        with os.fdopen(fd, "wb") as raw:
            if is_gzip(target):
                with gzip.GzipFile(filename="", fileobj=raw, mode="wb", compresslevel=GZIP_LEVEL, mtime=0) as binary:
                    yield cast(BinaryIO, binary)
            else:
                yield raw
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def check_writable(path: str | os.PathLike[str]) -> Path:
    """``path`` as a Path if a file can be written there (its directory exists, it is not a directory);
    commands call it for every output before their expensive work."""
    target = Path(path)
    directory = target.parent
    if not directory.is_dir():
        raise RerankError(f"{path}: cannot write: directory {str(directory)!r} does not exist")
    if target.is_dir():
        raise RerankError(f"{path}: cannot write: it is a directory")
    return target


def _create_temporary(target: Path) -> tuple[int, Path]:
    """A new file beside ``target``, open for writing, with the permissions a plain ``open`` would give
    (0666 less the umask, which the kernel applies: the umask is never read or changed)."""
    for _ in range(100):
        tmp = target.with_name(f".{target.name}.{secrets.token_hex(4)}.tmp")
        try:
            return os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666), tmp
        except FileExistsError:
            continue
        except OSError as e:
            raise RerankError(f"{target}: cannot write: {e.strerror}") from None
    raise RerankError(f"{target}: cannot write: no free temporary name beside it")
