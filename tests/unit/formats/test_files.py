"""Text files: gzip by suffix, stdin/stdout, line errors (CRLF, UTF-8, truncated gzip), atomic output."""

from __future__ import annotations

import gzip
import io
import os
import stat
import sys
from pathlib import Path

import pytest
from helpers import content, leftovers

from rerank.errors import FormatError, RerankError
from rerank.formats.files import atomic_binary_output, atomic_output, count_lines, read_lines, read_text


def test_read_lines_numbers_lines_and_keeps_spaces(tmp_path: Path) -> None:
    path = tmp_path / "a.txt"
    path.write_bytes(b"one \n\n  three\n")
    assert list(read_lines(path)) == [(1, "one "), (2, ""), (3, "  three")]


def test_last_line_without_newline(tmp_path: Path) -> None:
    path = tmp_path / "a.txt"
    path.write_bytes(b"one\ntwo")
    assert read_text(path) == ["one", "two"]
    assert count_lines(path) == 2


def test_gzip_chosen_by_suffix(tmp_path: Path) -> None:
    path = tmp_path / "a.txt.gz"
    path.write_bytes(gzip.compress("élan\nvital\n".encode()))
    assert read_text(path) == ["élan", "vital"]


def test_stdin(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(b"a\nb\n")))
    assert read_text("-") == ["a", "b"]


def test_gzip_is_recognised_by_its_magic_bytes_on_stdin_and_without_suffix(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    packed = gzip.compress("a\nb é\n".encode())
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BufferedReader(io.BytesIO(packed))))
    assert read_text("-") == ["a", "b é"]
    path = tmp_path / "lines.txt"
    path.write_bytes(packed)
    assert read_text(path) == ["a", "b é"]


def test_crlf_is_an_error_at_its_line(tmp_path: Path) -> None:
    path = tmp_path / "dos.txt"
    path.write_bytes(b"fine\nwindows\r\n")
    with pytest.raises(FormatError, match=r"dos.txt:2: expected Unix line ends"):
        read_text(path)


def test_invalid_utf8_is_an_error_at_its_line(tmp_path: Path) -> None:
    path = tmp_path / "latin.txt"
    path.write_bytes(b"ok\nok\nf\xfcr\n")
    with pytest.raises(FormatError, match=r"latin.txt:3: expected UTF-8 text, got .*0xfc at column 2"):
        read_text(path)
    assert read_text(path, encoding="latin-1")[2] == "für"


def test_truncated_gzip_is_an_error(tmp_path: Path) -> None:
    data = gzip.compress(b"".join(b"line %d\n" % i for i in range(5000)))
    path = tmp_path / "cut.gz"
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(FormatError, match=r"cut.gz:\d+: expected a complete gzip stream"):
        read_text(path)


def test_not_gzip_despite_suffix(tmp_path: Path) -> None:
    path = tmp_path / "plain.gz"
    path.write_bytes(b"not compressed\n")
    with pytest.raises(FormatError, match=r"plain.gz:1: expected gzip data, as the name ends in .gz, got 'not a gzip "
                                          r"file'$"):
        read_text(path)


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(RerankError, match=r"nothing.txt: cannot read: No such file"):
        read_text(tmp_path / "nothing.txt")


@pytest.mark.parametrize("name", ["out.txt", "out.txt.gz"])
def test_atomic_output_writes_on_success(tmp_path: Path, name: str) -> None:
    path = tmp_path / name
    with atomic_output(path) as out:
        out.write("a\r\nb\n")  # \r is data, not a line end: written as is
    assert content(path) == b"a\r\nb\n"
    assert leftovers(tmp_path) == []
    assert stat.S_IMODE(path.stat().st_mode) == 0o666 & ~_umask()


def test_atomic_output_leaves_nothing_on_error(tmp_path: Path) -> None:
    path = tmp_path / "out.txt"
    with pytest.raises(ValueError):
        with atomic_output(path) as out:
            out.write("half")
            raise ValueError
    assert list(tmp_path.iterdir()) == []


def test_atomic_output_keeps_old_file_on_error(tmp_path: Path) -> None:
    path = tmp_path / "out.txt"
    path.write_text("old\n")
    with pytest.raises(ValueError):
        with atomic_output(path) as out:
            out.write("new\n")
            raise ValueError
    assert path.read_text() == "old\n"
    assert leftovers(tmp_path) == []


def test_atomic_output_missing_directory(tmp_path: Path) -> None:
    with pytest.raises(RerankError, match="does not exist"):
        with atomic_output(tmp_path / "no" / "out.txt"):
            pass


def test_atomic_output_onto_a_directory(tmp_path: Path) -> None:
    with pytest.raises(RerankError, match="cannot write: it is a directory"):
        with atomic_output(tmp_path):
            pass
    assert list(tmp_path.iterdir()) == []


def test_atomic_binary_output(tmp_path: Path) -> None:
    path = tmp_path / "a.bin"
    with atomic_binary_output(path) as out:
        out.write(b"\x00\xff")
    assert path.read_bytes() == b"\x00\xff"


def test_stdout(capsys: pytest.CaptureFixture[str]) -> None:
    with atomic_output("-") as out:
        out.write("to stdout\n")
    assert capsys.readouterr().out == "to stdout\n"


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask
