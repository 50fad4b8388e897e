"""A stopped ``rerank tune --decoder`` run resumes where it stopped: the finished iterations are not decoded
again and the result is the one an uninterrupted run gives; --range and --decoder-flags reach MERT and the
decoder."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

import pytest

from rerank.cli import build_parser, main
from rerank.commands.tune import resolved_config

FIXTURES = Path(__file__).resolve().parents[1] / "data" / "tune"
DECODER = f"{shlex.quote(sys.executable)} {shlex.quote(str(FIXTURES / 'toy_decoder.py'))}"


@pytest.fixture
def tuning_set(regression_slice: Path, tmp_path: Path) -> dict[str, Path]:
    data = regression_slice / "tests/mert.extractor-txt/data"
    source = tmp_path / "dev.src"
    source.write_text("".join(f"source sentence {i}\n" for i in range(10)))
    return {"space": data / "nbest.1.gz", "reference": data / "reference", "source": source}


def tune(tuning_set: dict[str, Path], output: Path, work: Path, *extra: str) -> int:
    calls = work.parent / f"{work.name}.calls"
    decoder = (f"echo run >> {shlex.quote(str(calls))} && {DECODER} --space {tuning_set['space']} "
               "--nbest-size {nbest_size}")
    return main(["tune", "--decoder", decoder, "--decoder-flags", "--weight-overwrite {weights_overwrite}",
                 "--source", str(tuning_set["source"]), "-r", str(tuning_set["reference"]),
                 "--init", str(FIXTURES / "init.yaml"), "-o", str(output), "--work-dir", str(work),
                 "--nbest-size", "20", "--restarts", "5", *extra])


def test_a_stopped_run_resumes_to_the_uninterrupted_result(tmp_path: Path, tuning_set: dict[str, Path]) -> None:
    assert tune(tuning_set, tmp_path / "whole.yaml", tmp_path / "whole", "--iterations", "4") == 0
    assert tune(tuning_set, tmp_path / "part.yaml", tmp_path / "part", "--iterations", "2") == 0
    (tmp_path / "part" / "run2.tuned.yaml").unlink()  # stopped while optimising after the second decoder run
    assert tune(tuning_set, tmp_path / "part.yaml", tmp_path / "part", "--iterations", "4") == 0
    assert (tmp_path / "part.yaml").read_text() == (tmp_path / "whole.yaml").read_text()
    runs = len(list((tmp_path / "whole").glob("run*.tuned.yaml")))
    assert (tmp_path / "part.calls").read_text().count("run") == runs  # no iteration was decoded twice


def test_a_work_directory_of_another_loop_is_refused(tmp_path: Path, tuning_set: dict[str, Path],
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    assert tune(tuning_set, tmp_path / "a.yaml", tmp_path / "work", "--iterations", "1") == 0
    assert tune(tuning_set, tmp_path / "a.yaml", tmp_path / "work", "--iterations", "1", "--seed", "9") == 2
    assert "holds a tuning run with another seed" in capsys.readouterr().err


def test_range_sets_the_bounds_of_mert_random_restarts(tmp_path: Path) -> None:
    args = build_parser().parse_args(["tune", "--nbest", "x", "-r", "y", "-o", "w.yaml", "--range", "w:-1..0",
                                      "--range", "LM0:0..0.5"])
    assert resolved_config(args).mert.feature_bounds == {"w": (-1.0, 0.0), "LM0": (0.0, 0.5)}


def test_a_bad_range_is_refused(tmp_path: Path, tuning_set: dict[str, Path],
                                capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        tune(tuning_set, tmp_path / "w.yaml", tmp_path / "work", "--range", "w:1..-1")
    assert "the low end is above the high end" in capsys.readouterr().err
