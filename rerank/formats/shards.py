"""Shards: contiguous parts of a text file, the unit of work of cluster jobs (``--shard I/N``).

Shard ``I/N`` is 1-based (``1/8`` ... ``8/8``: Slurm's and SGE's array task ids; ``torchrun`` ranks are
``RANK+1``). It starts at byte ``size·(I-1)/N`` of the file, moved forward to the next line that starts
a group, and ends where shard ``I+1`` starts: the ranges come from the file's size alone, without a
counting pass. A plain file is read from there (seek); a gzip file cannot seek: it is decompressed
from the start, and a line's place is the block of :data:`GZIP_BLOCK` compressed bytes whose
decompression gave the newline before it; the blocks before the shard are only scanned for line
ends, and the shard stops reading after its last line. For any N every line belongs to exactly one
shard; a shard may be empty.

The groups are what a command processes together, so that a shard's batches are those of an
unsharded run and its output the same bytes (batched float32 arithmetic depends on what shares a
batch): for a phrase table, segments that start at a source phrase whose CRC-32 is a multiple of
:data:`TABLE_SEGMENT` (:func:`table_segments`: a content-defined cut, found the same way from any
starting point); for an n-best list, blocks of sentences by id (:func:`nbest_blocks`: a sentence
never straddles two shards); for a source text, blocks of lines by number (:func:`line_blocks`).

A command run on a shard writes its output as usual and then, atomically, a manifest beside it
(``OUT.shard.yaml``): the input's size and fingerprint, the command's settings, the shard's range of
the (decompressed) input, and the output's size and SHA-256. :func:`merge_shards` checks that the
outputs of shards 1..N are all there, complete, made from the same input with the same settings and
contiguous, and writes their concatenation: what an unsharded run writes.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import zlib
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

import yaml

from rerank.config import GZIP_MAGIC, load_yaml
from rerank.errors import FormatError, RerankError, brief
from rerank.formats.files import (
    STDIO,
    atomic_binary_output,
    atomic_output,
    check_output,
    decode_line,
    display_name,
    gzip_error,
    is_gzip,
    open_binary,
)

GZIP_BLOCK = 1 << 16  # compressed bytes inflated at a time: the granularity of a gzip file's shard ranges
TABLE_SEGMENT = 4096  # a phrase table's segments start at a source whose CRC-32 is a multiple of it: ~4096 sources
MANIFEST_SUFFIX = ".shard.yaml"
FINGERPRINT_BYTES = 1 << 16  # hashed at each end of the input, with its size
CHUNK = 1 << 20
MAX_SHARDS = 100_000  # N of --shard I/N, at most: far more than a cluster's array jobs
WHITESPACE = " \t\n\r\x0b\x0c"  # what bytes.strip() strips

# Whether a line (its bytes without "\n" and its number in the file) starts a group, after the line before it.
Boundary = Callable[[bytes, bytes, int], bool]
Settings = Mapping[str, object]


def table_segments(modulus: int | None = None) -> Boundary:
    """A phrase table's segments: a line starts one when its source phrase differs from the line before's and
    its CRC-32 is a multiple of ``modulus`` (default :data:`TABLE_SEGMENT`); see :func:`starts_table_segment`."""
    def boundary(previous: bytes, line: bytes, lineno: int) -> bool:
        source = line.split(b"|||", 1)[0].strip()
        return starts_table_segment(previous.split(b"|||", 1)[0].strip(), source, modulus)
    return boundary


def starts_table_segment(previous: bytes | None, source: bytes, modulus: int | None = None) -> bool:
    """Whether a phrase-table line with the source phrase ``source`` (bytes, whitespace stripped) starts a
    segment after a line with the source ``previous`` (None: the first line of the file)."""
    return previous is None or (source != previous and zlib.crc32(source) % (modulus or TABLE_SEGMENT) == 0)


def nbest_block(line: bytes, size: int) -> int | bytes:
    """The block of ``size`` sentence ids (``id // size``) of an n-best line (its id field, when not a number)."""
    field = line.split(b"|||", 1)[0].strip()
    return int(field) // size if field.isdigit() else field


def nbest_blocks(size: int) -> Boundary:
    """An n-best list's blocks of sentences: ids ``[k·size, (k+1)·size)``, whole sentences."""
    return lambda previous, line, lineno: nbest_block(previous, size) != nbest_block(line, size)


def line_blocks(size: int) -> Boundary:
    """Blocks of ``size`` lines: lines ``k·size + 1`` to ``(k+1)·size`` of the file."""
    return lambda previous, line, lineno: (lineno - 1) % size == 0


@dataclass(frozen=True)
class Shard:
    """Part ``index`` (1-based) of ``count``."""

    index: int
    count: int

    def __post_init__(self) -> None:
        if self.count > MAX_SHARDS:
            raise ValueError(f"expected I/N with N at most {MAX_SHARDS:,}, got {self.index}/{self.count}")
        if not 1 <= self.index <= self.count:
            raise ValueError(f"expected I/N with 1 <= I <= N (1-based: 1/{max(self.count, 1)} is the first), "
                             f"got {self.index}/{self.count}")

    @classmethod
    def parse(cls, text: str) -> Shard:
        """``"3/8"`` -> ``Shard(3, 8)``; anything else is a ValueError that says what is expected."""
        index, sep, count = text.strip().partition("/")
        if not (sep and index.isascii() and index.isdigit() and count.isascii() and count.isdigit()):
            raise ValueError(f"expected I/N, e.g. 3/8 for part 3 of 8 (1-based), got {brief(text)}")
        return cls(int(index), int(count))

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"

    def bounds(self, size: int) -> tuple[int, int]:
        """The shard's range ``[start, end)`` of ``size`` bytes."""
        return size * (self.index - 1) // self.count, size * self.index // self.count


@dataclass(frozen=True)
class Extent:
    """What a shard held of its input: offsets of the (decompressed) text, and its lines."""

    start: int  # where its first line starts (an empty shard: where the next shard's starts)
    end: int  # after its last line
    lines: int
    first_line: int | None  # the file's number of its first line, where known without counting
    to_end: bool  # the shard read the input to its end


# A line as a reader places it: (place, offset in the text, bytes without the "\n"). The place is the byte
# offset (plain file) or the block (gzip) that decides its shard; places never decrease along the file.
Placed = tuple[int, int, bytes]


class ShardReader:
    """The lines of one shard of a file, read once; :attr:`extent` says what the shard held, afterwards.

    ``boundary`` says which lines start a group (default: every line); a shard holds whole groups.
    Line numbers are the file's own in a gzip file, in a plain file's first shard, and with ``numbered``
    (which counts the lines before the shard in a plain file); elsewhere they count from the shard's
    first line, and :meth:`file_line_numbers` gives the errors that pass through it the file's numbers.
    """

    def __init__(self, path: str | os.PathLike[str], shard: Shard, *, boundary: Boundary | None = None,
                 numbered: bool = False):
        if str(path) == STDIO:
            raise RerankError(f"--shard {shard}: stdin cannot be cut into shards; give the input as a file")
        self.path = path
        self.name = display_name(path)
        self.shard = shard
        self.boundary = boundary
        self.numbered = numbered
        self._extent: Extent | None = None
        self._start: int | None = None  # offset of the shard's first line, once read
        self._first_line = 0  # its number (in the file, or 1 where the numbers are relative)
        self._lines_before: int | None = None  # lines of the file before the first one the reader gives
        self._relative = False  # line numbers count from the shard's first line
        self._previous: bytes | None = None  # the line before the first one the reader gives
        self._total = 0  # the text's length, once read to the end

    @property
    def extent(self) -> Extent:
        if self._extent is None:
            raise RuntimeError(f"{self.name}: shard {self.shard} has not been read to its end")
        return self._extent

    def lines(self, encoding: str = "utf-8") -> Iterator[tuple[int, str]]:
        """``(line number, line)`` pairs without the final ``\\n``, checked as
        :func:`~rerank.formats.files.read_lines` checks them."""
        for lineno, raw in self.raw_lines():
            yield lineno, decode_line(raw, self.name, lineno, encoding)

    def raw_lines(self) -> Iterator[tuple[int, bytes]]:
        """``(line number, bytes)`` pairs of the shard, without the final ``\\n``."""
        try:
            raw = open(self.path, "rb")
        except OSError as e:
            raise RerankError(f"{self.path}: cannot read: {e.strerror}") from None
        with raw:
            size = os.fstat(raw.fileno()).st_size
            compressed = is_gzip(self.path) or raw.read(len(GZIP_MAGIC)) == GZIP_MAGIC
            raw.seek(0)
            start, end = self.shard.bounds(size)
            if compressed:  # the blocks j with start <= j·block < end
                block = GZIP_BLOCK
                start, end = -(-start // block), -(-end // block)
                yield from self._owned(self._gzip(raw, start, block), start, end)
            else:
                yield from self._owned(self._plain(raw, start), start, end)

    def lines_before(self) -> int:
        """The number of lines of the file before the shard's first (counted in a plain file's later shards)."""
        if self._start is None:
            raise RuntimeError(f"{self.name}: shard {self.shard} has no first line yet")
        return self._first_line - 1 if not self._relative else _count_lines(self.path, self._start)

    @contextlib.contextmanager
    def file_line_numbers(self) -> Iterator[None]:
        """Errors about this file that pass through the block get the file's line numbers."""
        try:
            yield
        except FormatError as e:
            if not self._relative or e.path != self.name or e.lineno is None or self._start is None:
                raise
            raise FormatError(e.path, e.lineno + self.lines_before(), e.expected, e.got) from None

    def _plain(self, raw: BinaryIO, start: int) -> Iterator[Placed]:
        offset = 0
        if start > 0:
            raw.seek(start - 1)
            if raw.read(1) != b"\n":
                raw.readline()
            offset = raw.tell()
        if offset == 0:
            self._lines_before = 0
        elif self.numbered:
            self._lines_before = _count_lines(self.path, offset)
        self._previous = _line_before(raw, offset) if offset > 0 else None
        raw.seek(offset)
        for line in raw:
            yield offset, offset, line[:-1] if line.endswith(b"\n") else line
            offset += len(line)
        self._total = offset

    def _gzip(self, raw: BinaryIO, first_block: int, block: int) -> Iterator[Placed]:
        pending, placed = b"", 0  # the line being read, and the block that placed it
        offset = lines = 0  # where ``pending`` starts in the text; the complete lines before it
        try:
            for j, out in enumerate(_inflate(raw, block, self.name)):
                if j < first_block:  # before the shard: only follow the line ends
                    last = out.rfind(b"\n")
                    if last < 0:
                        pending += out
                        continue
                    before = out.rfind(b"\n", 0, last)
                    self._previous = out[before + 1:last] if before >= 0 else pending + out[:last]
                    lines += out.count(b"\n")
                    offset += len(pending) + last + 1
                    pending, placed = out[last + 1:], j
                    continue
                if self._lines_before is None:
                    self._lines_before = lines
                pieces = (pending + out).split(b"\n")
                for i, body in enumerate(pieces[:-1]):
                    yield (placed if i == 0 else j), offset, body
                    offset += len(body) + 1
                if len(pieces) > 1:
                    placed = j
                pending = pieces[-1]
            if self._lines_before is None:
                self._lines_before = lines
            if pending:
                yield placed, offset, pending
                offset += len(pending)
        except zlib.error as e:
            raise gzip_error(self.name, None, e) from None
        self._total = offset

    def _owned(self, lines: Iterator[Placed], low: int, high: int) -> Iterator[tuple[int, bytes]]:
        """The lines placed in ``[low, high)`` less the rest of a group begun before ``low``, and the rest of
        the shard's last group."""
        starts = self.boundary
        seen = count = base = 0
        state = "before"  # -> "skipping" the rest of a group begun before the shard -> "in" it
        last: bytes | None = None  # the previous line read
        stopped: int | None = None
        for place, offset, body in lines:
            seen += 1
            if seen == 1:
                last = self._previous
                base = self._lines_before if self._lines_before is not None else 0
            lineno = base + seen
            if state == "before":
                if place < low:
                    last = body
                    continue
                state = "skipping"
            if state == "skipping":
                if not (last is None or starts is None or starts(last, body, lineno)):
                    last = body
                    continue
                state = "in"
            if place >= high and (count == 0 or starts is None or starts(last or b"", body, lineno)):
                stopped = offset
                break
            if self._start is None:
                self._start = offset
                self._relative = self._lines_before is None
                if self._relative:  # number the lines from the shard's first
                    base = 1 - seen
                    lineno = 1
                self._first_line = lineno
            count += 1
            last = body
            yield lineno, body
        end = stopped if stopped is not None else self._total
        first = self._first_line if self._start is not None and not self._relative else None
        self._extent = Extent(self._start if self._start is not None else end, end, count, first, stopped is None)


def _count_lines(path: str | os.PathLike[str], offset: int) -> int:
    """The number of newlines in the first ``offset`` bytes of a plain file."""
    newlines = 0
    with open(path, "rb") as raw:
        while offset > 0 and (chunk := raw.read(min(CHUNK, offset))):
            newlines += chunk.count(b"\n")
            offset -= len(chunk)
    return newlines


def _line_before(raw: BinaryIO, offset: int) -> bytes:
    """The line that ends with the newline at ``offset - 1``, without it."""
    pieces: list[bytes] = []
    here = offset - 1
    while here > 0:
        low = max(0, here - CHUNK)
        raw.seek(low)
        chunk = raw.read(here - low)
        cut = chunk.rfind(b"\n")
        if cut >= 0:
            pieces.append(chunk[cut + 1:])
            break
        pieces.append(chunk)
        here = low
    return b"".join(reversed(pieces))


def _inflate(raw: BinaryIO, block: int, name: str) -> Iterator[bytes]:
    """The decompressed bytes of each ``block`` compressed bytes of a gzip file (members one after another,
    zero padding between them allowed, as gzip reads them); a member cut short is an error."""
    decompressor = zlib.decompressobj(wbits=31)
    between = True  # no member begun: the end of the file may come
    while data := raw.read(block):
        out: list[bytes] = []
        while data:
            if between:
                data = data.lstrip(b"\0")
                if not data:
                    break
                decompressor, between = zlib.decompressobj(wbits=31), False
            out.append(decompressor.decompress(data))
            data = b""
            if decompressor.eof:
                data, between = decompressor.unused_data, True
        yield b"".join(out)
    if not between:
        raise FormatError(name, None, "a complete gzip stream", got="a file that ends inside a gzip member")


# ---------------------------------------------------------------------------------------------- manifests

def manifest_path(output: str | os.PathLike[str]) -> Path:
    """Where the manifest of a shard's output goes: beside it, ``OUT.shard.yaml``."""
    return Path(f"{output}{MANIFEST_SUFFIX}")


# What a command's parsed arguments hold besides its options: never a setting of its output.
PLUMBING = frozenset({"command", "run", "outputs", "inputs", "quiet", "shard", "shard_input", "shard_same_output"})


def manifest_outputs(outputs: Sequence[tuple[str, str | os.PathLike[str] | None]]
                     ) -> list[tuple[str, str | os.PathLike[str] | None]]:
    """The manifests a --shard run writes beside its outputs, as ``(option, path)`` pairs for
    :func:`~rerank.formats.files.check_outputs`: checked like any output, so that a manifest never lands on an
    input (a config named ``OUT.shard.yaml``)."""
    return [(f"{option} (its manifest)", manifest_path(path)) for option, path in outputs
            if path is not None and str(path) != STDIO]


def open_shard(args: Any, boundary: Boundary | None = None, *, numbered: bool = False) -> ShardReader:
    """The reader of ``args.shard`` of the command's input (the option ``add_shard_argument`` names), once the
    command's outputs (``args.outputs``) are checked for a --shard run: each a file, its old manifest removed
    (so that a run that stops leaves none)."""
    shard: Shard = args.shard
    reader = ShardReader(getattr(args, args.shard_input), shard, boundary=boundary, numbered=numbered)
    for option, output in _outputs(args):
        if str(output) == STDIO:
            raise RerankError(f"--shard {shard}: give every output a file name ({option} is stdout): its manifest "
                              "goes beside it")
        check_output(manifest_path(output))
        try:
            manifest_path(output).unlink()
        except FileNotFoundError:
            pass
        except OSError as e:
            raise RerankError(f"{manifest_path(output)}: cannot remove the old manifest: {e.strerror}") from None
    return reader


def shard_settings(args: Any, **resolved: object) -> dict[str, object]:
    """What a shard manifest records of the command's settings: every option of ``args`` but the input, the
    outputs and those the command declares do not change its output (``add_shard_argument(same_output=...)``),
    with ``resolved`` values (a default taken from a config) over them. An option a command gains is recorded
    without a word, so that shards made with different values of it are never joined."""
    skipped = PLUMBING | set(args.outputs) | {args.shard_input} | set(args.shard_same_output)
    settings = {key: _plain(value) for key, value in sorted(vars(args).items()) if key not in skipped}
    settings.update((key, _plain(value)) for key, value in resolved.items())
    return settings


def write_manifests(args: Any, reader: ShardReader, kinds: Mapping[str, str], **resolved: object) -> None:
    """The manifests of a finished --shard run: one beside each output the command wrote (``kinds``: option dest
    → the kind of output), with :func:`shard_settings`."""
    settings = shard_settings(args, **resolved)
    for dest, kind in kinds.items():
        output = getattr(args, dest)
        if output is not None:
            write_manifest(output, reader, command=args.command, kind=kind, settings=settings)


def _outputs(args: Any) -> list[tuple[str, str]]:
    return [(f"--{dest.replace('_', '-')}", getattr(args, dest)) for dest in args.outputs
            if getattr(args, dest, None) is not None]


def _plain(value: object) -> object:
    """A setting as YAML writes and reads it back the same: lists stay lists, anything else not plain is text."""
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    if isinstance(value, (list, tuple)):
        return [_plain(item) for item in value]
    return str(value)


def fingerprint(path: str | os.PathLike[str]) -> dict[str, Any]:
    """The input's size and the SHA-256 of its first and last 64 KiB: the same file, wherever it was copied."""
    with open(path, "rb") as raw:
        size = os.fstat(raw.fileno()).st_size
        digest = hashlib.sha256(str(size).encode())
        digest.update(raw.read(FINGERPRINT_BYTES))
        raw.seek(max(0, size - FINGERPRINT_BYTES))
        digest.update(raw.read(FINGERPRINT_BYTES))
    return {"size": size, "sha256": digest.hexdigest()}


def file_digest(path: str | os.PathLike[str]) -> tuple[int, str]:
    """A file's size and SHA-256."""
    digest = hashlib.sha256()
    size = 0
    with open(path, "rb") as raw:
        while chunk := raw.read(CHUNK):
            digest.update(chunk)
            size += len(chunk)
    return size, digest.hexdigest()


def write_manifest(output: str | os.PathLike[str], reader: ShardReader, *, command: str, kind: str,
                   settings: Settings) -> None:
    """The manifest of a finished shard output (written after it, atomically)."""
    extent = reader.extent
    size, digest = file_digest(output)
    manifest = {
        "command": command, "kind": kind, "shard": str(reader.shard),
        "input": {"path": os.path.abspath(reader.path), **fingerprint(reader.path)},
        "settings": dict(settings),
        "range": {"start": extent.start, "end": extent.end, "lines": extent.lines, "first_line": extent.first_line,
                  "to_end": extent.to_end},
        "output": {"bytes": size, "sha256": digest},
    }
    with atomic_output(manifest_path(output)) as out:
        yaml.safe_dump(manifest, out, sort_keys=False, allow_unicode=True)


@dataclass(frozen=True)
class ShardOutput:
    """A shard's output and what its manifest says."""

    path: Path
    shard: Shard
    command: str
    kind: str
    input: dict[str, Any]
    settings: dict[str, Any]
    start: int
    end: int
    to_end: bool
    size: int
    sha256: str

    @classmethod
    def read(cls, path: str | os.PathLike[str]) -> ShardOutput:
        manifest = manifest_path(path)
        if not Path(path).is_file():
            raise RerankError(f"{path}: no such file")
        if not manifest.is_file():
            raise RerankError(f"{path}: no manifest {manifest.name} beside it: its shard did not finish (run it "
                              "again), or it is not the output of a --shard run")
        data = load_yaml(manifest)

        def field(*keys: str, kind: type | tuple[type, ...] = int) -> Any:
            value = data
            for key in keys:
                value = value.get(key) if isinstance(value, dict) else None
            if not isinstance(value, kind) or isinstance(value, bool) and kind is int:
                raise FormatError(str(manifest), None, f"{'.'.join(keys)} in a shard manifest written by rerank",
                                  got=value if isinstance(value, str) else brief(value))
            return value
        text = field("shard", kind=str)
        try:
            shard = Shard.parse(text)
        except ValueError:
            raise FormatError(str(manifest), None, f"shard: I/N with 1 <= I <= N <= {MAX_SHARDS:,}",
                              got=text) from None
        return cls(Path(path), shard, field("command", kind=str), field("kind", kind=str), field("input", kind=dict),
                   field("settings", kind=dict), field("range", "start"), field("range", "end"),
                   field("range", "to_end", kind=bool), field("output", "bytes"), field("output", "sha256", kind=str))

    def describe_input(self) -> str:
        return f"{self.input.get('path')} ({self.input.get('size')} bytes)"


def check_shards(paths: Sequence[str | os.PathLike[str]]) -> list[ShardOutput]:
    """The shard outputs ``paths``, in shard order, once checked: shards 1..N of one run, each there once and
    complete, of the same input with the same settings, contiguous, each output as its manifest says."""
    if not paths:
        raise RerankError("no shard outputs given")
    outputs = [ShardOutput.read(path) for path in paths]
    first = outputs[0]
    for other in outputs[1:]:
        for what, a, b in (("the output of", first.command, other.command), ("the kind of output", first.kind,
                                                                             other.kind)):
            if a != b:
                raise RerankError(f"{other.path} is {what} {b!r}, {first.path} of {a!r}: give the outputs of one run")
        if other.shard.count != first.shard.count:
            raise RerankError(f"{other.path} is shard {other.shard}, {first.path} shard {first.shard}: the shards "
                              "of one run have the same N")
        if (other.input.get("size"), other.input.get("sha256")) != (first.input.get("size"), first.input.get("sha256")):
            raise RerankError(f"{other.path} is a shard of another input, {other.describe_input()}, than "
                              f"{first.path}, {first.describe_input()}")
        for key in sorted(set(first.settings) | set(other.settings)):
            if first.settings.get(key) != other.settings.get(key):
                raise RerankError(f"{other.path} was made with {key}={brief(other.settings.get(key))}, {first.path} "
                                  f"with {key}={brief(first.settings.get(key))}: give the outputs of one run")
    by_index: dict[int, ShardOutput] = {}
    for output in outputs:
        if output.shard.index in by_index:
            raise RerankError(f"{by_index[output.shard.index].path} and {output.path} are both shard {output.shard}")
        by_index[output.shard.index] = output
    count = first.shard.count
    missing = [index for index in range(1, count + 1) if index not in by_index]
    if missing:
        shown = ", ".join(f"{i}/{count}" for i in missing[:10]) + (f" and {len(missing) - 10:,} more"
                                                                   if len(missing) > 10 else "")
        raise RerankError(f"shard{'s' if len(missing) > 1 else ''} {shown} missing: {len(outputs)} of {count} shard "
                          "outputs given")
    ordered = [by_index[index] for index in range(1, count + 1)]
    expected = 0
    for output in ordered:
        if output.start != expected:
            raise RerankError(f"{output.path}: shard {output.shard} starts at byte {output.start} of the input, but "
                              f"the shard before it ends at byte {expected}: the shards were cut differently "
                              "(by different versions of rerank?)")
        expected = output.end
    if not ordered[-1].to_end:
        raise RerankError(f"{ordered[-1].path}: the last shard did not read its input to the end")
    for output in ordered:
        size, digest = file_digest(output.path)
        if (size, digest) != (output.size, output.sha256):
            raise RerankError(f"{output.path} is not the file its manifest describes ({size} bytes, "
                              f"{output.size} in the manifest): it changed after its shard finished; run shard "
                              f"{output.shard} again")
    return ordered


def merge_shards(paths: Sequence[str | os.PathLike[str]], output: str | os.PathLike[str]) -> list[ShardOutput]:
    """Check the shard outputs ``paths`` (:func:`check_shards`) and write their text, in shard order, to
    ``output`` (atomically; gzip if its name ends in ``.gz``); returns them in order."""
    target = os.path.abspath(output)
    for path in paths:
        if os.path.abspath(path) in (target, os.path.abspath(manifest_path(output))):
            raise RerankError(f"{output}: the merged output cannot be one of the shard outputs")
    ordered = check_shards(paths)
    with atomic_binary_output(output) as out:
        for shard in ordered:
            with open_binary(shard.path) as text:
                shutil.copyfileobj(text, out, CHUNK)
        out.flush()  # as atomic_output's text stream does when it closes: the same gzip bytes
    return ordered


