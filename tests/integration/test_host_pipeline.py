"""The host's threads beside the model (reading and parsing ahead, formatting and gzip behind) write the same
bytes as one thread does, for ``score-table``, ``score-nbest`` and ``translate``, plain and gzipped; a bad
line read by the reading thread is still one clear error, exit 2, with nothing written, and SIGTERM stops the
threads with nothing left behind."""

from __future__ import annotations

import gzip
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from rerank.cli import main

REPO = Path(__file__).resolve().parents[2]
MODELS = REPO / "examples" / "models"


def both(tmp_path: Path, command: list[object], output: str) -> tuple[bytes, bytes]:
    """The bytes ``command`` writes to ``output`` with the threads and without (``--no-overlap``)."""
    written = []
    for name, extra in (("overlap", []), ("serial", ["--no-overlap"])):
        path = tmp_path / name / output
        path.parent.mkdir()
        assert main(["-q", *map(str, command), "-o", str(path), *extra]) == 0
        written.append(path.read_bytes())
    return written[0], written[1]


@pytest.mark.parametrize(("model", "output", "options"), [
    ("encdec", "scored.gz", ["--window", 40, "--max-tokens", 64]),
    ("rnnsearch", "scored", ["--precision", "int8", "--window", 7]),
])
def test_score_table_writes_the_same_bytes(tmp_path: Path, multi30k_slice: dict[str, Path], model: str,
                                          output: str, options: list[object]) -> None:
    overlapped, serial = both(tmp_path, ["score-table", multi30k_slice["phrase_table"], "--model", MODELS / model,
                                         "--threads", 1, *options], output)
    assert overlapped == serial
    text = gzip.decompress(serial) if output.endswith(".gz") else serial
    assert text.count(b"\n") == 300


def test_score_nbest_writes_the_same_bytes(tmp_path: Path, multi30k_slice: dict[str, Path]) -> None:
    overlapped, serial = both(tmp_path, ["score-nbest", multi30k_slice["nbest"], "--source",
                                         multi30k_slice["source"], "--model", MODELS / "encdec", "--word-penalty",
                                         "--batch-sentences", 3, "--max-tokens", 512, "--threads", 1],
                              "scored.100best.gz")
    assert overlapped == serial
    lines = gzip.decompress(serial).decode().splitlines()
    assert len(lines) == len(gzip.decompress(multi30k_slice["nbest"].read_bytes()).decode().splitlines())
    assert "RNN0= " in lines[0] and "WP1= " in lines[0]


def test_translate_writes_the_same_bytes(tmp_path: Path, multi30k_slice: dict[str, Path]) -> None:
    command: list[object] = ["translate", "--model", MODELS / "rnnsearch", "-i", multi30k_slice["source"],
                             "--beam", 3, "--nbest", 2, "--batch-size", 4, "--threads", 1]
    overlapped, serial = both(tmp_path, command, "out.nbest.gz")
    assert overlapped == serial and gzip.decompress(serial).count(b"\n") == 40
    # in batches of at most 60 source tokens: every sentence's translations, in input order
    tokens = tmp_path / "tokens.nbest"
    assert main(["-q", *map(str, command), "--batch-tokens", "60", "-o", str(tokens)]) == 0
    ids = [int(line.split(" ||| ")[0]) for line in tokens.read_text().splitlines()]
    assert ids == [i for i in range(20) for _ in range(2)]


def test_a_bad_line_read_ahead_is_a_clear_error(tmp_path: Path, multi30k_slice: dict[str, Path],
                                                capsys: pytest.CaptureFixture[str]) -> None:
    lines = gzip.decompress(multi30k_slice["phrase_table"].read_bytes()).decode().splitlines()
    lines[250] = "a line without fields"  # line 251
    table = tmp_path / "table.gz"
    table.write_bytes(gzip.compress(("\n".join(lines) + "\n").encode()))
    out = tmp_path / "scored.gz"
    code = main(["-q", "score-table", str(table), "-o", str(out), "--model", str(MODELS / "encdec"), "--window", "20",
                 "--threads", "1"])
    err = capsys.readouterr().err
    assert code == 2 and "table.gz:251:" in err and "Traceback" not in err
    assert not out.exists() and list(tmp_path.iterdir()) == [table]


def test_sigterm_while_the_reader_waits_on_stdin_leaves_nothing(tmp_path: Path,
                                                                  multi30k_slice: dict[str, Path]) -> None:
    out = tmp_path / "scored.gz"
    process = subprocess.Popen([sys.executable, "-m", "rerank", "-q", "score-table", "-", "-o", str(out), "--model",
                                str(MODELS / "encdec"), "--threads", "1"], stdin=subprocess.PIPE, cwd=REPO)
    try:
        assert process.stdin is not None
        process.stdin.write(gzip.decompress(multi30k_slice["phrase_table"].read_bytes()))
        process.stdin.flush()  # stdin stays open: the reading thread waits for more
        deadline = time.monotonic() + 60
        while not list(tmp_path.glob(".scored.gz.*.tmp")):
            assert time.monotonic() < deadline and process.poll() is None, "the temporary output never appeared"
            time.sleep(0.05)
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=30) == 128 + signal.SIGTERM
    finally:
        process.kill()
    assert list(tmp_path.iterdir()) == []
