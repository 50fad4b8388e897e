"""Weights and configs from a pipe: every reader reads a path once, so that a named FIFO or bash's process
substitution (``--weights <(...)``) reads as the file itself does, as with ``cat``. A reader that opened the path
twice would read nothing the second time (a pipe) or wait forever (a FIFO without a writer): each run here has a
time limit."""

from __future__ import annotations

import contextlib
import gzip
import os
import re
import shlex
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from tiny_models import save_model_dir, tiny_config, tiny_model

from rerank.config import load_config
from rerank.models.vocab import SPECIALS, Vocabulary
from rerank.rescore.append import RescoreConfig

REPO = Path(__file__).resolve().parents[2]
DATA = REPO / "tests" / "data"
TUNE = DATA / "tune"
MERT = DATA / "moses-regression-tests" / "tests" / "mert.extractor-txt" / "data"
LIMIT = 120  # seconds: a second open of a FIFO waits forever
ENV = {**os.environ, "OMP_NUM_THREADS": "1"}


@pytest.fixture
def fifos(tmp_path: Path) -> Iterator[list[Path]]:
    """Named pipes made with :func:`fifo`; a writer still waiting for its reader at the end is let go."""
    made: list[Path] = []
    yield made
    for path in made:
        try:
            descriptor = os.open(path, os.O_RDONLY | os.O_NONBLOCK)  # lets a writer blocked in open() go on
        except OSError:
            continue
        os.close(descriptor)


def fifo(fifos: list[Path], path: Path, data: bytes) -> Path:
    """A named pipe at ``path`` that a thread writes ``data`` into once, when a reader opens it."""
    os.mkfifo(path)
    fifos.append(path)

    def write() -> None:
        with contextlib.suppress(BrokenPipeError), open(path, "wb") as out:
            out.write(data)

    threading.Thread(target=write, daemon=True).start()
    return path


def rerank(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "rerank", "-q", *map(str, args)], capture_output=True, text=True,
                          timeout=LIMIT, cwd=REPO, env=ENV, check=False)


def in_bash(command: str) -> subprocess.CompletedProcess[str]:
    """``command`` run by bash, whose ``<(...)`` hands rerank a pipe as /dev/fd/N."""
    return subprocess.run(["bash", "-c", command], capture_output=True, text=True, timeout=LIMIT, cwd=REPO, env=ENV,
                          check=False)


RERANK = f"{shlex.quote(sys.executable)} -m rerank -q"


@pytest.mark.parametrize("weights", [DATA / "weights.yaml", DATA / "multi30k" / "moses.ini"], ids=["yaml", "ini"])
def test_apply_reads_weights_from_a_fifo_and_a_process_substitution(weights: Path, tmp_path: Path,
                                                                    fifos: list[Path]) -> None:
    nbest = DATA / "toy.nbest"
    assert rerank("apply", nbest, "--weights", weights, "-o", tmp_path / "file.1best").returncode == 0
    piped = rerank("apply", nbest, "--weights", fifo(fifos, tmp_path / "w", weights.read_bytes()),
                   "-o", tmp_path / "fifo.1best")
    assert piped.returncode == 0, piped.stderr
    substituted = in_bash(f"{RERANK} apply {nbest} --weights <(cat {weights}) -o {tmp_path / 'bash.1best'}")
    assert substituted.returncode == 0, substituted.stderr
    expected = (tmp_path / "file.1best").read_text()
    assert len(expected.splitlines()) == 3
    assert (tmp_path / "fifo.1best").read_text() == (tmp_path / "bash.1best").read_text() == expected


def test_tune_reads_init_and_moses_ini_from_pipes(tmp_path: Path, fifos: list[Path]) -> None:
    common = ["--nbest", MERT / "nbest.1.gz", "-r", MERT / "reference", "--restarts", "1", "--seed", "3"]
    assert rerank("tune", *common, "--init", TUNE / "init.yaml", "--moses-ini", TUNE / "moses.ini",
                  "-o", tmp_path / "file.yaml").returncode == 0
    piped = rerank("tune", *common, "--init", fifo(fifos, tmp_path / "init", (TUNE / "init.yaml").read_bytes()),
                   "--moses-ini", fifo(fifos, tmp_path / "ini", (TUNE / "moses.ini").read_bytes()),
                   "-o", tmp_path / "fifo.yaml", "--output-ini", tmp_path / "fifo.moses.ini")
    assert piped.returncode == 0, piped.stderr
    words = " ".join(shlex.quote(str(arg)) for arg in common)
    substituted = in_bash(f"{RERANK} tune {words} --init <(cat {TUNE / 'init.yaml'}) -o {tmp_path / 'bash.yaml'} "
                          f"--moses-ini <(cat {TUNE / 'moses.ini'}) --output-ini {tmp_path / 'bash.moses.ini'}")
    assert substituted.returncode == 0, substituted.stderr
    assert (tmp_path / "fifo.yaml").read_text() == (tmp_path / "bash.yaml").read_text() == \
           (tmp_path / "file.yaml").read_text()
    assert (tmp_path / "fifo.moses.ini").read_text() == (tmp_path / "bash.moses.ini").read_text() == \
           (tmp_path / "file.moses.ini").read_text()
    assert "UnknownWordPenalty0= 1" in (tmp_path / "file.moses.ini").read_text()  # the copy is the whole moses.ini


def test_tune_reads_a_moses_ini_init_from_a_pipe_for_its_copy(tmp_path: Path) -> None:
    """``--init <(cat moses.ini) --output-ini``: the one read gives the starting weights and the copy's lines."""
    done = in_bash(f"{RERANK} tune --nbest {MERT / 'nbest.1.gz'} -r {MERT / 'reference'} --restarts 1 "
                   f"--init <(cat {TUNE / 'moses.ini'}) -o {tmp_path / 't.yaml'} --output-ini {tmp_path / 't.ini'}")
    assert done.returncode == 0, done.stderr
    copy = (tmp_path / "t.ini").read_text().splitlines()
    assert copy[:4] == (TUNE / "moses.ini").read_text().splitlines()[:4] and "UnknownWordPenalty0= 1" in copy


def test_translate_reads_weights_from_a_fifo(tmp_path: Path, fifos: list[Path]) -> None:
    vocabulary = Vocabulary([*SPECIALS, *sorted(set((DATA / "toy.en").read_text().split()))])
    model = save_model_dir(tmp_path / "model", tiny_model(tiny_config(), len(vocabulary), len(vocabulary)),
                           vocabulary, vocabulary)
    weights = b"[weight]\nRNNsearch0= 0.5\nWP0= -1.5\n"
    (tmp_path / "moses.ini").write_bytes(weights)
    common = ["translate", "--model", model, "-i", DATA / "toy.en", "--beam", "3", "--nbest", "3", "--threads", "1"]
    assert rerank(*common, "--weights", tmp_path / "moses.ini", "-o", tmp_path / "file.nbest").returncode == 0
    piped = rerank(*common, "--weights", fifo(fifos, tmp_path / "w", weights), "-o", tmp_path / "fifo.nbest")
    assert piped.returncode == 0, piped.stderr
    assert (tmp_path / "fifo.nbest").read_text() == (tmp_path / "file.nbest").read_text() != ""


def test_a_config_reads_from_a_fifo(tmp_path: Path, fifos: list[Path]) -> None:
    config = load_config(RescoreConfig, fifo(fifos, tmp_path / "c", b"features:\n  - kind: word-penalty\n"
                                                                        b"    name: WP1\n"))
    assert [feature["name"] for feature in config.features] == ["WP1"]


def test_tune_and_oracle_read_an_nbest_list_from_a_pipe_once(tmp_path: Path, fifos: list[Path]) -> None:
    """The list's checks against the references (style, relatedness) come from the one read that tunes."""
    nbest = gzip.decompress((MERT / "nbest.1.gz").read_bytes())
    common = ["-r", MERT / "reference", "--restarts", "1", "--seed", "3"]
    assert rerank("tune", "--nbest", MERT / "nbest.1.gz", *common, "-o", tmp_path / "file.yaml").returncode == 0
    piped = rerank("tune", "--nbest", fifo(fifos, tmp_path / "list", nbest), *common, "-o", tmp_path / "fifo.yaml")
    assert piped.returncode == 0, piped.stderr
    substituted = in_bash(f"{RERANK} tune --nbest <(zcat {MERT / 'nbest.1.gz'}) -r {MERT / 'reference'} --restarts 1 "
                          f"--seed 3 -o {tmp_path / 'bash.yaml'}")
    assert substituted.returncode == 0, substituted.stderr
    assert (tmp_path / "fifo.yaml").read_text() == (tmp_path / "bash.yaml").read_text() == \
           (tmp_path / "file.yaml").read_text()
    sample = REPO / "examples" / "data"
    oracle = in_bash(f"{RERANK} oracle <(zcat {sample / 'test.100best.gz'}) -r {sample / 'val.fr'}")
    assert oracle.returncode == 0 and "looks unrelated to" in oracle.stderr, oracle.stderr
    from_file = rerank("oracle", sample / "test.100best.gz", "-r", sample / "val.fr").stdout
    assert re.findall(r"\d+\.\d+", oracle.stdout) == re.findall(r"\d+\.\d+", from_file) != []
