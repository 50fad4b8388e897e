"""``rerank score-table --ray``: two Ray workers of a local cluster started by the test write the table that one
process writes, byte for byte; a bad line is an error with its line number and no output; without Ray,
--ray says how to install it."""

from __future__ import annotations

import sys
import zlib
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers import content, leftovers

from rerank.cli import main
from rerank.formats.shards import TABLE_SEGMENT

WORKERS = 2


@pytest.fixture(scope="module")
def ray_cluster() -> Iterator[None]:
    """A Ray instance on this machine with room for two workers of one CPU; score-table uses it."""
    ray = pytest.importorskip("ray", reason="Ray is not installed: the ray extra (CI installs it)")
    pytest.importorskip("ray.data", reason="Ray Data is not installed: the ray extra")
    ray.init(num_cpus=WORKERS, include_dashboard=False, logging_level="ERROR")
    yield
    ray.shutdown()


def segment_source() -> str:
    """A source phrase that starts a segment of a table (its CRC-32 a multiple of TABLE_SEGMENT)."""
    return next(f"a dog {i}" for i in range(1_000_000) if zlib.crc32(f"a dog {i}".encode()) % TABLE_SEGMENT == 0)


@pytest.fixture(scope="module")
def table(multi30k_slice: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The 300-line slice of the real table with 40 lines of a segment-starting source after line 140: two
    segments, each cut into windows of 50 pairs, as --window 50 asks."""
    lines = content(multi30k_slice["phrase_table"]).decode().splitlines(keepends=True)
    source = segment_source()
    inserted = [f"{source} |||{line.split('|||', 1)[1]}" for line in lines[:40]]
    path = tmp_path_factory.mktemp("table") / "table.txt"
    path.write_text("".join(lines[:140] + inserted + lines[140:]))
    return path


def score(argv: list[object], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    code = main(["score-table", *map(str, argv)])
    return code, capsys.readouterr().err


@pytest.mark.slow
@pytest.mark.usefixtures("ray_cluster")
def test_two_ray_workers_write_the_table_one_process_writes(table: Path, slice_table_model: Path, tmp_path: Path,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    options = ["--model", slice_table_model, "--window", 50, "--max-tokens", 64]
    code, err = score([table, "-o", tmp_path / "plain.gz", *options, "--threads", 1], capsys)
    assert code == 0, err
    code, err = score([table, "-o", tmp_path / "ray.gz", *options, "--ray", "--ray-workers", WORKERS], capsys)
    assert code == 0, err
    assert f"scoring on {WORKERS} Ray workers of 1 CPU each" in err and "340 pairs in" in err
    assert (tmp_path / "ray.gz").read_bytes() == (tmp_path / "plain.gz").read_bytes()
    assert len(content(tmp_path / "ray.gz").splitlines()) == 340
    assert leftovers(tmp_path) == []


@pytest.mark.slow
@pytest.mark.usefixtures("ray_cluster")
def test_a_bad_line_is_an_error_with_its_number_and_leaves_no_output(table: Path, slice_table_model: Path,
                                                                     tmp_path: Path,
                                                                     capsys: pytest.CaptureFixture[str]) -> None:
    lines = table.read_text().splitlines(keepends=True)
    lines[200] = "a broken line ||| without scores\n"
    bad = tmp_path / "bad.txt"
    bad.write_text("".join(lines))
    out = tmp_path / "out.txt"
    code, err = score([bad, "-o", out, "--model", slice_table_model, "--window", 50, "--ray"], capsys)
    assert code == 2
    assert f"{bad}:201: expected 3 to 7 fields" in err and "Traceback" not in err
    assert not out.exists() and leftovers(tmp_path) == []


@pytest.mark.slow
@pytest.mark.usefixtures("ray_cluster")
def test_a_successful_run_prints_no_error_line_of_rays(table: Path, slice_table_model: Path, tmp_path: Path,
                                                       capfd: pytest.CaptureFixture[str]) -> None:
    """Ray's core worker writes to the process's stderr itself (capfd, not capsys): its error line about restartable
    workers whose arguments are in the object store is not said, as Ray's workers are not restarted."""
    small = tmp_path / "small.txt"
    small.write_text("".join(table.read_text().splitlines(keepends=True)[:60]))
    code = main(["score-table", str(small), "-o", str(tmp_path / "ray.gz"), "--model", str(slice_table_model),
                 "--window", "50", "--ray", "--ray-workers", str(WORKERS)])
    err = capfd.readouterr().err
    assert code == 0, err
    assert "60 pairs in" in err
    assert "core_worker.cc" not in err and "max_restarts" not in err and "DeprecationWarning" not in err, err


@pytest.mark.parametrize(("argv", "message"), [
    (["--ray", "--shard", "1/2"], "--ray with --shard"),
    (["--ray-workers", "2"], "--ray-workers is for --ray"),
    (["--ray", "local", "--device", "cuda"], "give --ray-worker-gpus"),
])
def test_bad_ray_options_are_refused(argv: list[str], message: str, table: Path, slice_table_model: Path,
                                     tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, err = score([table, "-o", tmp_path / "out.gz", "--model", slice_table_model, *argv], capsys)
    assert code == 2 and message in err
    assert not (tmp_path / "out.gz").exists()


def test_without_ray_the_error_says_how_to_install_it(table: Path, slice_table_model: Path, tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str],
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "ray", None)  # import ray fails, as where it is not installed
    code, err = score([table, "-o", tmp_path / "out.gz", "--model", slice_table_model, "--ray"], capsys)
    assert code == 2 and "pip install '.[ray]' in rerank's clone" in err
    assert not (tmp_path / "out.gz").exists()
