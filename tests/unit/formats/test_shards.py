"""Shards of plain and gzip files: for any N every line is in exactly one shard, in order, the ranges are
contiguous, a group (a sentence, a table segment, a block of lines) is never split, and line numbers and
errors are the file's."""

from __future__ import annotations

import gzip
import itertools
import random
from pathlib import Path

import pytest

from rerank.errors import FormatError, RerankError
from rerank.formats import shards
from rerank.formats.phrase_table import read_phrase_table
from rerank.formats.shards import (
    Boundary,
    Shard,
    ShardReader,
    line_blocks,
    nbest_blocks,
    starts_table_segment,
    table_segments,
)

COUNTS = [*range(1, 26), 64, 500]


@pytest.fixture(autouse=True)
def small_blocks(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(shards, "GZIP_BLOCK", 97)  # a gzip test file spans many blocks


def nbest_lines(seed: int, sentences: int = 30) -> list[str]:
    """An n-best list with sentences of 1 to 40 hypotheses, some ids skipped, lines of varied lengths."""
    rng = random.Random(seed)
    lines = []
    ids = sorted(rng.sample(range(sentences * 2), sentences))
    for sentence in ids:
        for h in range(rng.choice([1, 1, 2, 3, 7, 40])):
            lines.append(f"{sentence} ||| {' '.join('w' * rng.randint(1, 6) for _ in range(rng.randint(0, 12)))} "
                         f"||| F= {h} ||| {-h}")
    return lines


def table_lines(seed: int) -> list[str]:
    """A phrase table sorted by source, 1 to 6 targets per source."""
    rng = random.Random(seed)
    lines = []
    for i in range(120):
        source = f"s{i} " + "x" * rng.randint(0, 5)
        lines += [f"{source} ||| t{j} ||| 0.5 0.5 0.5 0.5 ||| 0-0 ||| 1 1 1" for j in range(rng.randint(1, 6))]
    return lines


def write(path: Path, lines: list[str], *, compressed: bool, final_newline: bool = True) -> Path:
    text = ("\n".join(lines) + ("\n" if final_newline and lines else "")).encode()
    if compressed:  # two gzip members with zero padding between them, as some tools write them
        half = len(text) // 3
        path.write_bytes(gzip.compress(text[:half]) + b"\0" * 5 + gzip.compress(text[half:]))
    else:
        path.write_bytes(text)
    return path


def read_all(path: Path, count: int, boundary: Boundary | None = None,
             numbered: bool = False) -> list[tuple[ShardReader, list[tuple[int, str]]]]:
    results = []
    for index in range(1, count + 1):
        reader = ShardReader(path, Shard(index, count), boundary=boundary, numbered=numbered)
        results.append((reader, list(reader.lines())))
    return results


def check_partition(lines: list[str], shards_read: list[tuple[ShardReader, list[tuple[int, str]]]],
                    boundary: Boundary | None) -> None:
    """The shards hold every line once, in order, with contiguous ranges, cut only at group starts."""
    joined: list[str] = []
    end = 0
    for reader, part in shards_read:
        extent = reader.extent
        assert extent.start == end and extent.lines == len(part)
        end = extent.end
        if part:
            first = part[0][0] if extent.first_line is not None else reader.lines_before() + 1
            assert first == len(joined) + 1  # the file's line number of the shard's first line
            assert [n for n, _ in part] == list(range(part[0][0], part[0][0] + len(part)))
            if joined and boundary is not None:  # the shard starts a group: none straddles
                assert boundary(joined[-1].encode(), part[0][1].encode(), first)
        joined += [line for _, line in part]
    assert joined == lines
    assert shards_read[-1][0].extent.to_end
    assert end == sum(len(line.encode()) + 1 for line in lines)  # the text's length


@pytest.mark.parametrize("compressed", [False, True], ids=["plain", "gzip"])
@pytest.mark.parametrize("seed", [1, 2])
def test_every_line_is_in_one_shard_for_any_count(tmp_path: Path, compressed: bool, seed: int) -> None:
    lines = nbest_lines(seed)
    path = write(tmp_path / "list", lines, compressed=compressed)
    for count in COUNTS:
        check_partition(lines, read_all(path, count), None)


@pytest.mark.parametrize("compressed", [False, True], ids=["plain", "gzip"])
@pytest.mark.parametrize("size", [1, 3])
def test_no_sentence_straddles_two_shards(tmp_path: Path, compressed: bool, size: int) -> None:
    lines = nbest_lines(3)
    path = write(tmp_path / "list", lines, compressed=compressed)
    boundary = nbest_blocks(size)
    empty = 0
    for count in COUNTS:
        shards_read = read_all(path, count, boundary)
        check_partition(lines, shards_read, boundary)
        blocks = [{int(line.split(" ||| ")[0]) // size for _, line in part} for _, part in shards_read]
        assert sum(len(block) for block in blocks) == len(set().union(*blocks))  # each block in one shard
        empty += sum(not part for _, part in shards_read)
    assert empty > 0  # some shards came out empty (a 40-hypothesis sentence spans several ranges)


@pytest.mark.parametrize("compressed", [False, True], ids=["plain", "gzip"])
def test_table_segments_and_numbered_line_blocks(tmp_path: Path, compressed: bool) -> None:
    lines = table_lines(4)
    path = write(tmp_path / "table", lines, compressed=compressed)
    segments = table_segments(3)
    for count in COUNTS:
        check_partition(lines, read_all(path, count, segments), segments)
    blocks = line_blocks(7)
    for count in COUNTS:
        shards_read = read_all(path, count, blocks, numbered=True)
        check_partition(lines, shards_read, blocks)
        for reader, part in shards_read:  # numbered: the file's line numbers, without counting afterwards
            assert not part or reader.extent.first_line == part[0][0] and (part[0][0] - 1) % 7 == 0


@pytest.mark.parametrize("compressed", [False, True], ids=["plain", "gzip"])
@pytest.mark.parametrize("lines", [[], ["one line"], ["a", "", "", "b"], ["x" * 5000, "y", "z" * 3000]],
                         ids=["empty", "one", "blank-lines", "long-lines"])
def test_small_and_odd_files(tmp_path: Path, compressed: bool, lines: list[str]) -> None:
    for final_newline in (True, False):
        path = write(tmp_path / "file", lines, compressed=compressed, final_newline=final_newline)
        for count in (1, 2, 3, 10):
            shards_read = read_all(path, count)
            assert [line for _, part in shards_read for _, line in part] == lines
            assert shards_read[0][0].extent.start == 0 and shards_read[-1][0].extent.to_end


def test_a_table_segment_is_what_the_scorer_windows_restart_at(tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """score-table's windows (rerank.scoring.table) and its shards cut the table at the same lines."""
    from rerank.scoring.table import _Segments

    monkeypatch.setattr(shards, "TABLE_SEGMENT", 3)
    path = write(tmp_path / "table", table_lines(5), compressed=False)
    key = _Segments("utf-8")
    numbers = [key(entry) for entry in read_phrase_table(path)]
    windows = [i for i in range(1, len(numbers)) if numbers[i] != numbers[i - 1]]
    boundary = table_segments()
    raw = path.read_bytes().splitlines()
    cuts = [i for i in range(1, len(raw)) if boundary(raw[i - 1], raw[i], i + 1)]
    assert windows == cuts and len(cuts) > 10
    assert starts_table_segment(None, b"anything")  # the first line starts the first segment


def test_shard_arguments() -> None:
    assert Shard.parse("3/8") == Shard(3, 8) and str(Shard(3, 8)) == "3/8"
    for text in ("0/8", "9/8", "3", "3/", "/8", "a/8", "3/8/1", "1/0", "-1/3", "³/8"):
        with pytest.raises(ValueError, match="expected I/N"):
            Shard.parse(text)
    for size in (0, 1, 7, 1000):
        for count in (1, 3, 7):
            ranges = [Shard(i, count).bounds(size) for i in range(1, count + 1)]
            assert ranges[0][0] == 0 and ranges[-1][1] == size
            assert all(a[1] == b[0] for a, b in itertools.pairwise(ranges))


def test_stdin_cannot_be_sharded() -> None:
    with pytest.raises(RerankError, match="stdin cannot be cut into shards"):
        ShardReader("-", Shard(1, 2))


def test_errors_name_the_files_line(tmp_path: Path) -> None:
    lines = [f"line {i}" for i in range(1, 201)]
    lines[150] += "\r"
    path = write(tmp_path / "crlf", lines, compressed=False)
    reader = ShardReader(path, Shard(2, 2))
    with pytest.raises(FormatError) as error, reader.file_line_numbers():
        list(reader.lines())
    assert error.value.lineno == 151 and "dos2unix" in str(error.value)
    gz = write(tmp_path / "crlf.gz", lines, compressed=True)
    with pytest.raises(FormatError, match=r"crlf.gz:151: expected Unix line ends"):
        list(ShardReader(gz, Shard(2, 2)).lines())


def test_a_cut_gzip_file_is_an_error_for_the_shard_that_reads_its_end(tmp_path: Path) -> None:
    path = write(tmp_path / "cut.gz", [f"line {i}" for i in range(2000)], compressed=True)
    data = path.read_bytes()
    path.write_bytes(data[: len(data) - 40])
    list(ShardReader(path, Shard(1, 4)).lines())  # the first shard stops before the cut
    with pytest.raises(FormatError, match="a complete gzip stream"):
        list(ShardReader(path, Shard(4, 4)).lines())
