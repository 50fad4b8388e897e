"""Reading and writing text files: gzip (read by its magic bytes or the ``.gz`` suffix, written by the
suffix), ``-`` for stdin/stdout, and the one output layer of every command: outputs checked before
the work (:func:`check_outputs`: never an input, never a directory, a device or a FIFO streamed to, a
descriptor named through /proc written in place), written atomically with their modes kept
(:func:`atomic_output`, :func:`save_torch`), several committed together (:func:`committed_together`) and said
written only once they are there (:func:`when_written`),
directories written whole (:func:`output_directory`), and the files of a work directory (:func:`work_file`).
Within a command (:func:`one_run`) every output it claims is locked until the command ends (:func:`output_lock`):
a second run that would write the same file or directory is refused, naming the first.
Nothing else in rerank opens a file for writing. The promises are listed in docs/guarantees.md.

Every reader in :mod:`rerank.formats` goes through :func:`read_lines` (or :func:`lines_of`, for a small file read
once: a weights file from a pipe), so that CRLF line ends,
invalid UTF-8 and truncated gzip streams are reported the same way everywhere: as a
:class:`~rerank.errors.FormatError` naming the file and the line.
"""

from __future__ import annotations

import contextlib
import contextvars
import errno
import fcntl
import gzip
import io
import json
import os
import re
import secrets
import shutil
import signal
import socket
import stat
import sys
import threading
import time
import zlib
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, TextIO, cast

from rerank.config import GZIP_MAGIC
from rerank.errors import FormatError, RerankError, did_you_mean_path

STDIO = "-"
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
        with open_binary(path) as stream:
            for lineno, raw in enumerate(stream, 1):
                yield lineno, decode_line(raw[:-1] if raw.endswith(b"\n") else raw, name, lineno, encoding)
    except (EOFError, gzip.BadGzipFile, zlib.error) as e:
        raise gzip_error(name, lineno + 1, e) from None


def gzip_error(name: str, lineno: int | None, error: Exception) -> FormatError:
    """The error for gzip data that ``gzip`` or ``zlib`` cannot read, in the project's words (not the library's)."""
    if isinstance(error, gzip.BadGzipFile) and lineno == 1:
        return FormatError(name, lineno, "gzip data, as the name ends in .gz", got="not a gzip file")
    got = {EOFError: "a stream that ends early (a cut file?)", gzip.BadGzipFile: "bytes that are not gzip"}
    return FormatError(name, lineno, "a complete gzip stream", got=got.get(type(error), "corrupt compressed data"))


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
def open_binary(path: str | os.PathLike[str]) -> Iterator[BinaryIO]:
    """The bytes of ``path`` (``-``: stdin), gunzipped when its name ends in ``.gz`` (which must then be
    gzip) or when they start with gzip's magic bytes: a gzipped stdin or a gzipped file without the
    suffix reads as text too."""
    if str(path) == STDIO:
        stream = sys.stdin.buffer
        yield _gunzip(stream) if _starts_with(stream, GZIP_MAGIC) else stream
        return
    try:
        raw = open(path, "rb")
    except FileNotFoundError as e:
        raise RerankError(f"{path}: cannot read: {e.strerror}{did_you_mean_path(path)}") from None
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


def lines_of(data: bytes, name: str, encoding: str = "utf-8") -> list[str]:
    """The lines of ``data``, the bytes of the file ``name`` already read (a small file read once: a pipe cannot be
    read twice), checked as :func:`read_lines` checks a file's."""
    raw_lines = data.split(b"\n")
    if raw_lines[-1] == b"":
        raw_lines.pop()
    return [decode_line(raw, name, lineno, encoding) for lineno, raw in enumerate(raw_lines, 1)]


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
    end, so a crash or a bad input line never leaves half a file behind. ``-`` is stdout; a device
    or a FIFO is written to, never replaced; a symbolic link is written through (the file it
    points to is replaced, the link stays). An existing file keeps its permission bits. Inside
    :func:`committed_together`, the rename waits for the end of that block. A ``.gz`` suffix
    writes gzip.
    """
    if str(path) == STDIO or own_descriptor(path) == STDOUT_FD:
        sys.stdout.flush()
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
    output = check_output(path)
    if output.descriptor is not None:
        with _writing(path), _descriptor(output.descriptor) as raw, _compressed(raw, output.target) as binary:
            yield binary
        return
    if output.stream:
        with _writing(path), open(output.target, "wb") as raw, _compressed(raw, output.target) as binary:
            yield binary
        return
    # SIGTERM and Ctrl-C wait while the file is made, so that the one that stops rerank comes inside the try
    # that removes the file on the way out
    held = signal.pthread_sigmask(signal.SIG_BLOCK, UNWINDING_SIGNALS)
    try:
        fd, tmp = _create_temporary(output.target)
    except BaseException:
        signal.pthread_sigmask(signal.SIG_SETMASK, held)
        raise
    try:
        signal.pthread_sigmask(signal.SIG_SETMASK, held)
        with _writing(path):
            if output.mode is not None:
                os.fchmod(fd, output.mode)
            with os.fdopen(fd, "wb") as raw, _compressed(raw, output.target) as binary:
                yield binary
        pending = _PENDING.get()
        if pending is None:
            _commit(tmp, output.target, str(path))
        else:
            pending.append((tmp, output.target, str(path)))
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


@contextlib.contextmanager
def committed_together() -> Iterator[None]:
    """Hold back the renames of the atomic outputs written inside the block until it ends without an
    exception, then make them all at once: a command's several outputs (weights and moses.ini, a table
    and its moses.ini, a translation and its alignments) appear together or not at all. Nested blocks
    join the outermost one."""
    if _PENDING.get() is not None:
        yield
        return
    pending: list[tuple[Path, Path, str]] = []
    notes: list[tuple[str, Callable[[], None]]] = []
    tokens = _PENDING.set(pending), _NOTES.set(notes)
    try:
        yield
    except BaseException:
        for tmp, _, _ in pending:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)
        raise
    finally:
        _PENDING.reset(tokens[0])
        _NOTES.reset(tokens[1])
    # SIGTERM and Ctrl-C wait for the renames, so that one between two of them cannot leave half the outputs, and
    # for the notes of what was written, so that what is said to be written is there
    held = signal.pthread_sigmask(signal.SIG_BLOCK, UNWINDING_SIGNALS)
    try:
        written: list[str] = []
        for i, (tmp, target, name) in enumerate(pending):
            try:
                _commit(tmp, target, name)
            except BaseException as e:
                for later, _, _ in pending[i + 1:]:
                    with contextlib.suppress(FileNotFoundError):
                        os.unlink(later)
                _say_written(notes, written)
                if written and isinstance(e, RerankError):
                    raise RerankError(f"{e}; {', '.join(written)} {'was' if len(written) == 1 else 'were'} written, "
                                      "the other outputs not") from None
                raise
            written.append(name)
        _say_written(notes, written)
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, held)


def when_written(path: str | os.PathLike[str], note: Callable[[], None]) -> None:
    """Call ``note`` (which says that ``path`` was written) once the atomic output ``path`` is in place: at once,
    or, inside :func:`committed_together`, when its renames have made it; never for a file that is not there (an
    error or a signal before the renames). Call it after the write (a stream is written at once)."""
    pending, notes = _PENDING.get(), _NOTES.get()
    if pending is None or notes is None or str(path) not in {name for _, _, name in pending}:
        note()
    else:
        notes.append((str(path), note))


def _say_written(notes: list[tuple[str, Callable[[], None]]], written: list[str]) -> None:
    for name, note in notes:
        if name in written:
            note()


_PENDING: contextvars.ContextVar[list[tuple[Path, Path, str]] | None] = contextvars.ContextVar(
    "rerank_pending_outputs", default=None)
_NOTES: contextvars.ContextVar[list[tuple[str, Callable[[], None]]] | None] = contextvars.ContextVar(
    "rerank_pending_notes", default=None)
DISK_ERRORS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EROFS})
UNWINDING_SIGNALS = frozenset({signal.SIGTERM, signal.SIGINT})  # rerank unwinds on these (see rerank.cli)


@contextlib.contextmanager
def _writing(path: str | os.PathLike[str]) -> Iterator[None]:
    """A full disk (ENOSPC, a quota, /dev/full), a file too large or a read-only file system while writing
    ``path`` is a :class:`~rerank.errors.RerankError` naming it."""
    try:
        yield
    except OSError as e:
        if e.errno not in DISK_ERRORS:
            raise
        raise RerankError(f"{path}: cannot write: {e.strerror}") from None


@contextlib.contextmanager
def _compressed(raw: BinaryIO, target: Path) -> Iterator[BinaryIO]:
    if not is_gzip(target):
        yield raw
        return
    with gzip.GzipFile(filename="", fileobj=raw, mode="wb", compresslevel=GZIP_LEVEL, mtime=0) as binary:
        yield cast(BinaryIO, binary)


def _commit(tmp: Path, target: Path, name: str) -> None:
    try:
        os.replace(tmp, target)
    except OSError as e:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise RerankError(f"{name}: cannot write: {e.strerror}") from None


@dataclass(frozen=True)
class Output:
    """Where an output goes: ``target`` is the file written (a symbolic link's target); a ``stream``
    (stdout, a device, a FIFO) is written to in place; ``mode`` is an existing file's permission bits."""

    path: str
    target: Path
    stream: bool
    mode: int | None
    identity: tuple[int, int] | None  # (st_dev, st_ino) of the existing file
    descriptor: int | None = None  # a file descriptor of rerank's own, named through /proc (/dev/stdout)

    @property
    def to_stdout(self) -> bool:
        return self.path == STDIO or self.descriptor == STDOUT_FD


STDOUT_FD, STDERR_FD = 1, 2
OWN_DESCRIPTOR = re.compile(r"/proc/(?:self|thread-self|(\d+)(?:/task/\d+)?)/fd/(\d+)")
MAX_LINK_HOPS = 40  # as the kernel's limit on symbolic links followed in one path


def through_proc(path: str | os.PathLike[str]) -> str | None:
    """The path under /proc that ``path`` reaches when its symbolic links are followed one by one
    (``/dev/stdout`` reaches ``/proc/self/fd/1``), or None when it reaches none. A link in /proc/PID/fd names
    an open file, not a path: writing "through" it must write to the descriptor, never replace its file."""
    remaining = [part for part in os.path.abspath(path).split("/") if part]
    current = "/"
    hops = 0
    while remaining:
        part = remaining.pop(0)
        if part == "..":
            current = os.path.dirname(current)
            continue
        if part == ".":
            continue
        candidate = os.path.join(current, part)
        if candidate == "/proc":
            return "/".join([candidate, *remaining])
        if hops < MAX_LINK_HOPS and os.path.islink(candidate):
            hops += 1
            target = os.readlink(candidate)
            remaining = [p for p in target.split("/") if p] + remaining
            if target.startswith("/"):
                current = "/"
            continue
        current = candidate
    return None


def own_descriptor(path: str | os.PathLike[str]) -> int | None:
    """The file descriptor of this process that ``path`` names (``/dev/stdout``, ``/dev/fd/3``,
    ``/proc/self/fd/1``), or None; a path that reaches another part of /proc is a
    :class:`~rerank.errors.RerankError`."""
    if str(path) == STDIO:
        return None
    proc = through_proc(path)
    if proc is None:
        return None
    match = OWN_DESCRIPTOR.fullmatch(proc)
    if match is None or match.group(1) not in (None, str(os.getpid())):
        raise RerankError(f"{path}: cannot write: it names {proc}, which is not one of rerank's own open files "
                          "(give a file, a device, a FIFO, /dev/stdout or -)")
    descriptor = int(match.group(2))
    try:
        os.fstat(descriptor)
    except OSError as e:
        raise RerankError(f"{path}: cannot write: file descriptor {descriptor}: {e.strerror}") from None
    return descriptor


@contextlib.contextmanager
def _descriptor(descriptor: int) -> Iterator[BinaryIO]:
    """The open file ``descriptor`` as a binary stream written in place (at its offset, in its mode: a shell's
    ``>>`` keeps appending), flushed but not closed at the end."""
    if descriptor in (STDOUT_FD, STDERR_FD):
        text = sys.stdout if descriptor == STDOUT_FD else sys.stderr
        text.flush()
        yield text.buffer
        text.buffer.flush()
        return
    with os.fdopen(os.dup(descriptor), "wb") as raw:
        yield raw


def check_output(path: str | os.PathLike[str]) -> Output:
    """``path`` as an :class:`Output` if rerank can write it: a new file in an existing, writable directory, a
    regular file it may write, a device or a FIFO (written to, never replaced), or ``-``; a symbolic link is
    followed. A directory, a socket, a missing or read-only directory is a :class:`~rerank.errors.RerankError`.
    Commands check every output this way before their work starts (:func:`check_outputs`)."""
    name = str(path)
    if name == STDIO:
        return Output(name, Path(name), True, None, None)
    descriptor = own_descriptor(path)
    if descriptor is not None:
        return Output(name, Path(name), True, None, None, descriptor)
    try:
        info: os.stat_result | None = os.stat(path)
    except FileNotFoundError:
        info = None
    except OSError as e:
        raise RerankError(f"{path}: cannot write: {e.strerror}") from None
    if info is not None and (stat.S_ISCHR(info.st_mode) or stat.S_ISBLK(info.st_mode) or stat.S_ISFIFO(info.st_mode)):
        if not os.access(path, os.W_OK):
            raise RerankError(f"{path}: cannot write: permission denied")
        return Output(name, Path(path), True, None, None)
    if info is not None and stat.S_ISDIR(info.st_mode):
        raise RerankError(f"{path}: cannot write: it is a directory")
    if info is not None and not stat.S_ISREG(info.st_mode):
        raise RerankError(f"{path}: cannot write: it is neither a regular file, a device nor a FIFO")
    target = Path(os.path.realpath(path))
    directory = target.parent
    if not directory.is_dir():
        raise RerankError(f"{path}: cannot write: directory {str(directory)!r} does not exist")
    if not os.access(directory, os.W_OK | os.X_OK):
        raise RerankError(f"{path}: cannot write: directory {str(directory)!r} is not writable")
    if info is not None and not os.access(target, os.W_OK):
        raise RerankError(f"{path}: cannot write: the file is read-only")
    mode = info.st_mode & 0o777 if info is not None else None  # read and write bits: never set-user-ID
    return Output(name, target, False, mode, (info.st_dev, info.st_ino) if info is not None else None)


def check_outputs(outputs: Iterable[tuple[str, str | os.PathLike[str] | None]],
                  inputs: Iterable[str | os.PathLike[str] | None] = ()) -> list[Output]:
    """Check a command's outputs, given as ``(option, path)`` pairs (``None``: not asked for), before it starts:
    each with :func:`check_output`, no two the same file (nor both stdout), and none the same file as one of
    ``inputs`` (the same device and inode, whatever the names: a hard link or a symbolic link is the same file).
    A directory among the inputs (a model directory) stands for the files in it."""
    checked = [(option, check_output(path)) for option, path in outputs if path is not None]
    to_stdout = [option for option, output in checked if output.to_stdout]
    if len(to_stdout) > 1:
        raise RerankError(f"{' and '.join(to_stdout)} both write to stdout: give all but one of them a file")
    read: dict[tuple[int, int], str] = {}
    for path in inputs:
        if path is None or str(path) == STDIO:
            continue
        for name in _files_of(path):
            with contextlib.suppress(OSError):
                info = os.stat(name)
                if stat.S_ISREG(info.st_mode):
                    read.setdefault((info.st_dev, info.st_ino), str(name))
    seen: dict[object, str] = {}
    for option, output in checked:
        if output.stream:
            continue
        if output.identity is not None and output.identity in read:
            source = read[output.identity]
            same = "" if os.path.abspath(source) == os.path.abspath(output.path) else f" (the same file as {source})"
            raise RerankError(f"{option} {output.path}: it is also an input{same}; rerank never writes over "
                              "its input: give another output file")
        key: object = output.identity or output.target
        if key in seen:
            raise RerankError(f"{option} {output.path}: the same file as {seen[key]}: give each output its own file")
        seen[key] = f"{option} {output.path}"
        seen[output.target] = seen[key]
    for option, output in sorted(checked, key=lambda item: lock_file(item[1].target)):  # one order: one winner
        if not output.stream:
            claim(output.target, f"{option} {output.path}")
    return [output for _, output in checked]


def make_output_dir(path: str | os.PathLike[str], what: str, claimed: bool = True) -> Path:
    """The directory ``path`` (``what`` names it in errors: ``output_dir``, ``--work-dir``), made with its parents
    if it does not exist, and ``claimed`` for this run (:func:`claim`) before anything is written into it; a file
    in its place, or a directory that cannot be made, is a :class:`~rerank.errors.RerankError`."""
    directory = Path(path)
    if directory.exists() and not directory.is_dir():
        raise RerankError(f"{what} {path}: it is a file, not a directory")
    try:
        directory.parent.mkdir(parents=True, exist_ok=True)
        if claimed:  # before the directory is made: a run refused makes nothing
            claim(directory, f"{what} {path}")
        directory.mkdir(exist_ok=True)
    except OSError as e:
        raise RerankError(f"{what} {path}: cannot make the directory: {e.strerror}") from None
    return directory


@contextlib.contextmanager
def output_directory(path: str | os.PathLike[str], what: str, inputs: Iterable[str | os.PathLike[str]] = (),
                     replaceable: Callable[[Path], bool] = lambda directory: True) -> Iterator[Path]:
    """A directory written as one output (a model directory, prepared data): the block writes into a new
    directory beside ``path``, which becomes ``path`` when the block ends without an exception; an error, a full
    disk or a signal leaves nothing. ``what`` names it in errors. ``path`` must not be one of ``inputs`` (the same
    device and inode: a bind mount or a link to it is the same directory); an existing directory is replaced
    (whole) only where ``replaceable`` says so, when checked first and again at the end (a run beside this one
    that made it meanwhile)."""
    target = Path(path)
    check_output_directory(path, what, inputs, replaceable)
    parent = Path(os.path.abspath(target)).parent
    make_output_dir(parent, f"the directory of {path}", claimed=False)
    with output_lock(target, f"{path} ({what})"):
        yield from _directory_written(path, target, parent, what, replaceable)


def _directory_written(path: str | os.PathLike[str], target: Path, parent: Path, what: str,
                       replaceable: Callable[[Path], bool]) -> Iterator[Path]:
    """The new directory of :func:`output_directory`, renamed to ``target`` when the block ends well."""
    work = parent / f".{target.name}.{secrets.token_hex(4)}.tmp"
    held = signal.pthread_sigmask(signal.SIG_BLOCK, UNWINDING_SIGNALS)  # as in atomic_binary_output
    try:
        os.mkdir(work)
    except OSError as e:
        signal.pthread_sigmask(signal.SIG_SETMASK, held)
        raise RerankError(f"{path}: cannot write {what}: {e.strerror}") from None
    try:
        signal.pthread_sigmask(signal.SIG_SETMASK, held)
        yield work
        _commit_directory(work, target, what, replaceable)
    except RerankError as e:  # a file of the new directory that could not be written: named where the user looks
        if str(work) not in str(e):
            raise
        raise RerankError(f"{str(e).replace(str(work), str(target))}; nothing was kept") from None
    except OSError as e:
        where = f" ({Path(e.filename).name})" if e.filename else ""
        reason = e.strerror or f"a write stopped short ({e}): is the disk full?"
        raise RerankError(f"{path}: cannot write {what}{where}: {reason}; nothing was kept") from None
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _commit_directory(work: Path, target: Path, what: str, replaceable: Callable[[Path], bool]) -> None:
    if not os.path.lexists(target):
        os.rename(work, target)
        return
    if not replaceable(target):
        raise RerankError(f"{target}: cannot write {what}: the directory was made meanwhile (by another run?); "
                          "nothing was kept")
    old = target.with_name(f".{target.name}.{secrets.token_hex(4)}.old")
    os.rename(target, old)
    os.rename(work, target)
    shutil.rmtree(old, ignore_errors=True)


def work_file(path: str | os.PathLike[str], append: bool = False) -> BinaryIO:
    """A file of a work directory opened for writing in place (emptied first, or ``append``-ed to): a log, what a
    child process writes for rerank to read back, a part of a directory that :func:`output_directory` commits
    whole. Not atomic: its content counts only once the step that writes it has finished."""
    try:
        return open(path, "ab" if append else "wb")
    except OSError as e:
        raise RerankError(f"{path}: cannot write: {e.strerror}") from None


def work_text(path: str | os.PathLike[str], append: bool = False) -> TextIO:
    """:func:`work_file` as UTF-8 text with ``\\n`` line ends."""
    return io.TextIOWrapper(work_file(path, append), encoding="utf-8", newline="\n")


def discard_stdout() -> None:
    """Point file descriptor 1 at /dev/null: what stdout still buffers, after a write to it failed, goes nowhere."""
    with contextlib.suppress(OSError):
        os.dup2(os.open(os.devnull, os.O_WRONLY), STDOUT_FD)


def check_output_directory(path: str | os.PathLike[str], what: str, inputs: Iterable[str | os.PathLike[str]] = (),
                           replaceable: Callable[[Path], bool] = lambda directory: True) -> os.stat_result | None:
    """Check ``path`` as :func:`output_directory` does, before the work starts; its ``stat`` if it exists."""
    info = _stat(Path(path))
    if info is not None and not stat.S_ISDIR(info.st_mode):
        raise RerankError(f"{path}: cannot write {what}: it is a file, not a directory")
    if os.path.isdir(Path(os.path.abspath(path)).parent):
        claim(path, f"{path} ({what})")
    for source in inputs:
        source_info = _stat(Path(source))
        if info is not None and source_info is not None and os.path.samestat(info, source_info):
            raise RerankError(f"{path}: cannot write {what}: it is also an input ({source}); rerank never writes "
                              "over its input: give a new directory")
    if info is not None and not replaceable(Path(path)):
        raise RerankError(f"{path}: cannot write {what}: the directory holds another run's files; give a new "
                          "directory")
    return info


def save_torch(state: object, path: str | os.PathLike[str]) -> None:
    """``torch.save`` of ``state`` as an atomic output (:func:`atomic_binary_output`): a kill never leaves half
    an archive, and a write that fails (a full disk, a file too large, an I/O error) is a
    :class:`~rerank.errors.RerankError` naming ``path`` and the system's reason, as every other output's."""
    import torch

    with atomic_binary_output(path) as out:
        writer = _FailureKept(out)
        try:
            torch.save(state, cast(BinaryIO, writer))
        except RuntimeError as e:  # torch's archive writer reports a failed write so, its cause lost
            if writer.failure is None and "writ" not in str(e):
                raise
            reason = writer.failure.strerror if writer.failure is not None else None
            raise RerankError(f"{path}: cannot write: {reason or str(e).splitlines()[0]}") from None
        if writer.failure is not None:
            raise RerankError(f"{path}: cannot write: {writer.failure.strerror}")


class _FailureKept:
    """A binary stream that keeps the :class:`OSError` of a failed write (torch's archive writer turns it into a
    ``RuntimeError`` without the system's reason: "unexpected pos 704 vs 598")."""

    def __init__(self, stream: BinaryIO):
        self.stream = stream
        self.failure: OSError | None = None

    def write(self, data: bytes) -> int:
        try:
            return self.stream.write(data)
        except OSError as e:
            self.failure = self.failure or e
            raise

    def flush(self) -> None:
        try:
            self.stream.flush()
        except OSError as e:
            self.failure = self.failure or e
            raise


def _stat(path: Path) -> os.stat_result | None:
    try:
        return os.stat(path)
    except OSError:
        return None


def _files_of(path: str | os.PathLike[str]) -> list[str]:
    """``path``, and the files in it when it is a directory (a model directory)."""
    if os.path.isdir(path):
        with contextlib.suppress(OSError):
            return [entry.path for entry in os.scandir(path)]
        return []
    return [str(path)]


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


# -- one run per output

LOCK_SUFFIX = ".lock"
LOCK_ATTEMPTS = 10  # a lock file removed by its holder between our open and our flock: open it again
DETAILS_WAIT = (0.05, 10)  # a holder that has just taken its lock writes its details: wait so long, so often
_HELD: dict[Path, tuple[int, int]] = {}  # the lock files this process holds: their descriptors and users
_HELD_GUARD = threading.Lock()
_CLAIMS: contextvars.ContextVar[contextlib.ExitStack | None] = contextvars.ContextVar("rerank_claims", default=None)
_COMMAND: contextvars.ContextVar[str] = contextvars.ContextVar("rerank_command", default="rerank")


@contextlib.contextmanager
def one_run(command: str) -> Iterator[None]:
    """A command's run (``command``: its command line, which a second run is told): the outputs it claims in the
    block (:func:`check_outputs`, :func:`check_output_directory`, :func:`make_output_dir`) stay locked until the
    block ends, however it ends."""
    with contextlib.ExitStack() as claims:
        tokens = _CLAIMS.set(claims), _COMMAND.set(command)
        try:
            yield
        finally:
            _CLAIMS.reset(tokens[0])
            _COMMAND.reset(tokens[1])


def claim(path: str | os.PathLike[str], name: str) -> None:
    """Lock the output ``path`` (a file or a directory; ``name`` names it in errors: ``--output t.yaml``,
    ``output_dir models/a``) until the run (:func:`one_run`) ends; outside a run, nothing."""
    claims = _CLAIMS.get()
    if claims is not None:
        claims.enter_context(output_lock(path, name))


def lock_file(path: str | os.PathLike[str]) -> Path:
    """The lock file of the output ``path``: ``.NAME.lock`` beside the file or directory it names (its symbolic
    links followed, so that every name of one output has one lock); an existing directory in a directory that
    cannot be written (a user's directory in a shared one) has it inside, as ``.rerank.lock``."""
    target = Path(os.path.realpath(path))
    if target.is_dir() and not os.access(target.parent, os.W_OK | os.X_OK):
        return target / f".rerank{LOCK_SUFFIX}"
    return target.with_name(f".{target.name}{LOCK_SUFFIX}")


@contextlib.contextmanager
def output_lock(path: str | os.PathLike[str], name: str) -> Iterator[None]:
    """Hold the lock of the output ``path`` (``name`` names it in errors) for the block: ``fcntl.flock`` on
    :func:`lock_file`, which records this run (its command, process id, host and time) and is removed at the end.
    Another run holding it is a :class:`~rerank.errors.RerankError` naming that run. A lock is the kernel's: it
    ends with its process, so a killed run's lock file never blocks the next. Taken again by this process, it
    is held once more (a command, and the library function it calls)."""
    lock = lock_file(path)
    with _HELD_GUARD:
        held = _HELD.get(lock)
        if held is not None:
            _HELD[lock] = (held[0], held[1] + 1)
    if held is None:
        descriptor = _acquire(lock, name)
        with _HELD_GUARD:
            _HELD[lock] = (descriptor, 1)
    try:
        yield
    finally:
        with _HELD_GUARD:
            descriptor, users = _HELD.pop(lock)
            if users > 1:
                _HELD[lock] = (descriptor, users - 1)
        if users == 1:
            with contextlib.suppress(OSError):
                os.unlink(lock)  # while it is still held: a run that opened it meanwhile sees it gone
            os.close(descriptor)


def _acquire(lock: Path, name: str) -> int:
    """A descriptor of ``lock``, locked by this process, which the lock file names."""
    for _ in range(LOCK_ATTEMPTS):
        descriptor = _open_lock(lock, name)
        try:
            fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _holder(descriptor)
            os.close(descriptor)
            raise RerankError(f"{name}: cannot write: another run is writing it ({holder}); wait for it to end, "
                              "or give another output") from None
        except OSError as e:
            os.close(descriptor)
            raise RerankError(f"{name}: cannot write: cannot lock {lock}: {e.strerror}") from None
        try:
            current = os.stat(lock)
        except FileNotFoundError:
            current = None
        if current is not None and os.path.samestat(os.fstat(descriptor), current):
            details = {"command": _COMMAND.get(), "pid": os.getpid(), "host": socket.gethostname(),
                       "since": time.strftime("%Y-%m-%d %H:%M:%S %Z")}
            with contextlib.suppress(OSError):  # a lock file of another user's, opened read-only: held all the same
                os.ftruncate(descriptor, 0)
                os.pwrite(descriptor, (json.dumps(details) + "\n").encode("utf-8"), 0)
            return descriptor
        os.close(descriptor)  # its holder removed it as it ended: take the new one
    raise RerankError(f"{name}: cannot write: cannot lock {lock}: it keeps being replaced")


def _open_lock(lock: Path, name: str) -> int:
    try:
        return os.open(lock, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o666)
    except PermissionError:
        with contextlib.suppress(OSError):
            return os.open(lock, os.O_RDONLY | os.O_CLOEXEC)  # another user's lock file: flock needs no writing
        raise RerankError(f"{name}: cannot write: cannot make its lock file {lock}: permission denied") from None
    except OSError as e:
        raise RerankError(f"{name}: cannot write: cannot make its lock file {lock}: {e.strerror}") from None


def _holder(descriptor: int) -> str:
    """The run that holds a lock, as its lock file records it (written just after it took the lock)."""
    pause, tries = DETAILS_WAIT
    for _ in range(tries):
        with contextlib.suppress(OSError, ValueError, KeyError, TypeError):
            details = json.loads(os.pread(descriptor, 65536, 0).decode("utf-8"))
            return (f"{details['command']}: pid {details['pid']} on {details['host']}, since "
                    f"{details['since']}")
        time.sleep(pause)
    return "a run that has not said which"
