"""Text files: gzip by suffix, stdin/stdout, line errors (CRLF, UTF-8, truncated gzip), atomic output, one run per
output, torch's archives on a full disk, outputs said written once they are there."""

from __future__ import annotations

import gzip
import io
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import another_run_writing, content, leftovers

from rerank.errors import FormatError, RerankError
from rerank.formats.files import (
    atomic_binary_output,
    atomic_output,
    check_outputs,
    committed_together,
    count_lines,
    lock_file,
    make_output_dir,
    one_run,
    output_lock,
    read_lines,
    read_text,
    when_written,
)


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


# -- one run per output


def test_a_second_run_on_one_output_is_refused_naming_the_first(tmp_path: Path) -> None:
    out = tmp_path / "t.yaml"
    with another_run_writing(out, "rerank tune -o t.yaml") as first:
        assert lock_file(out) == tmp_path / ".t.yaml.lock"
        with pytest.raises(RerankError) as refused, one_run("rerank tune -o t.yaml --seed 2"):
            check_outputs([("--output", str(out))])
    message = str(refused.value)
    assert message.startswith(f"--output {out}: cannot write: another run is writing it (rerank tune -o t.yaml: "
                              f"pid {first.pid} on ")
    assert "wait for it to end, or give another output" in message and "\n" not in message
    with one_run("rerank tune -o t.yaml"):  # the first has ended: its lock with it
        check_outputs([("--output", str(out))])
        assert lock_file(out).exists()
    assert not lock_file(out).exists() and not out.exists()


def test_a_killed_run_leaves_no_lock_behind_that_blocks(tmp_path: Path) -> None:
    out = tmp_path / "w.yaml"
    with another_run_writing(out, "rerank apply") as first:
        first.kill()
        first.wait()
    assert lock_file(out).exists()  # its file stays, but the kernel's lock ended with the process
    with one_run("rerank apply"):
        check_outputs([("--output", str(out))])
    assert not lock_file(out).exists()


def test_a_run_takes_its_own_lock_again_and_streams_need_none(tmp_path: Path) -> None:
    out = tmp_path / "model"
    os.mkfifo(tmp_path / "pipe")
    with one_run("rerank train"):
        make_output_dir(out, "output_dir")
        with output_lock(out, "output_dir"):  # the library under the command: held once more, not refused
            pass
        assert lock_file(out).exists()
        check_outputs([("--output", os.devnull), ("--json", str(tmp_path / "pipe")), ("--plot", "-")])
        assert sorted(p.name for p in tmp_path.iterdir()) == [".model.lock", "model", "pipe"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model", "pipe"]


def test_two_names_of_one_output_share_its_lock(tmp_path: Path) -> None:
    (tmp_path / "real").mkdir()
    os.symlink("real", tmp_path / "link")
    with another_run_writing(tmp_path / "real" / "o.txt", "rerank cut-nbest"):
        with pytest.raises(RerankError, match="another run is writing it"), one_run("rerank cut-nbest"):
            check_outputs([("--output", str(tmp_path / "link" / "o.txt"))])


# -- torch's archives on a full disk


SAVE_UNDER_LIMIT = """
import resource, signal, sys, torch
from rerank.errors import RerankError
from rerank.formats.files import save_torch
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write beyond the limit fails with EFBIG instead of killing
resource.setrlimit(resource.RLIMIT_FSIZE, (50_000, 50_000))
try:
    save_torch({"w": torch.zeros(100_000)}, sys.argv[1])
except RerankError as e:
    print(e)
"""


def test_a_torch_archive_too_large_for_the_file_system_is_one_clear_error(tmp_path: Path) -> None:
    """torch's writer reports a failed write as a RuntimeError ("unexpected pos 704 vs 598") without its reason: the
    reason is the system's (here "File too large", under RLIMIT_FSIZE, which needs no root), and nothing is left."""
    result = subprocess.run([sys.executable, "-c", SAVE_UNDER_LIMIT, str(tmp_path / "model.pt")],
                            capture_output=True, text=True, check=False, env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert result.returncode == 0, result.stderr
    assert result.stdout == f"{tmp_path / 'model.pt'}: cannot write: File too large\n"
    assert list(tmp_path.iterdir()) == []


# -- several outputs, said to be written once they are there


def test_outputs_written_together_are_said_written_only_once_there(tmp_path: Path) -> None:
    said: list[str] = []
    with pytest.raises(SystemExit), committed_together():
        with atomic_output(tmp_path / "t.yaml") as out:
            out.write("LM0: 1\n")
        when_written(tmp_path / "t.yaml", lambda: said.append("t.yaml"))
        raise SystemExit(143)  # SIGTERM before the renames
    assert said == [] and list(tmp_path.iterdir()) == []
    with committed_together():
        for name in ("t.yaml", "t.ini"):
            with atomic_output(tmp_path / name) as out:
                out.write("x\n")
            when_written(tmp_path / name, lambda name=name: said.append(name))
        assert said == []
    assert said == ["t.yaml", "t.ini"]


def test_a_failed_rename_of_outputs_written_together_names_those_that_are_there(tmp_path: Path) -> None:
    said: list[str] = []
    with pytest.raises(RerankError) as failed, committed_together():
        for name in ("a", "b"):
            with atomic_output(tmp_path / name) as out:
                out.write("x\n")
            when_written(tmp_path / name, lambda name=name: said.append(name))
        (tmp_path / "b").mkdir()  # made meanwhile: the second rename fails
    assert str(failed.value) == f"{tmp_path / 'b'}: cannot write: Is a directory; {tmp_path / 'a'} was written, the " \
                                "other outputs not"
    assert said == ["a"] and (tmp_path / "a").read_text() == "x\n" and leftovers(tmp_path) == []
