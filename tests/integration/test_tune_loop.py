"""The decoder in the loop: ``rerank tune --decoder`` with a stand-in decoder whose output depends on the weights."""

from __future__ import annotations

import gzip
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from rerank.cli import main
from rerank.errors import RerankError
from rerank.tune.loop import DecoderCommand, weights_overwrite

FIXTURES = Path(__file__).resolve().parents[1] / "data" / "tune"
DECODER = f"{shlex.quote(sys.executable)} {shlex.quote(str(FIXTURES / 'toy_decoder.py'))}"


@pytest.fixture
def tuning_set(regression_slice, tmp_path):
    """Moses' regression n-best list as the decoder's search space, its references, a 10-line source."""
    data = regression_slice / "tests/mert.extractor-txt/data"
    source = tmp_path / "dev.src"
    source.write_text("".join(f"source sentence {i}\n" for i in range(10)))
    return {"space": data / "nbest.1.gz", "reference": data / "reference", "source": source}


def tune(tmp_path, tuning_set, decoder: str, *extra: str) -> int:
    return main(["tune", "--decoder", decoder, "--source", str(tuning_set["source"]),
                 "-r", str(tuning_set["reference"]), "--init", str(FIXTURES / "init.yaml"),
                 "-o", str(tmp_path / "tuned.yaml"), "--work-dir", str(tmp_path / "work"),
                 "--nbest-size", "20", "--restarts", "5", *extra])


def test_the_loop_converges_and_keeps_every_iteration(tmp_path, tuning_set, capsys):
    decoder = (f"{DECODER} --space {tuning_set['space']} --nbest-size {{nbest_size}} "
               "--weight-overwrite {weights_overwrite}")
    assert tune(tmp_path, tuning_set, decoder) == 0
    out = capsys.readouterr().out
    rows = [line.split() for line in out.splitlines() if line[:9].strip().isdigit()]
    assert "converged" in out and 2 <= len(rows) < 25
    assert float(rows[-1][3]) == 0 or float(rows[-1][4]) < 1e-5  # the last change is below the threshold
    assert float(rows[-1][1]) > float(rows[0][1]) + 5             # the decoder's BLEU went up (20.4 at the start)
    hypotheses = [int(row[3]) for row in rows]
    assert hypotheses == sorted(hypotheses)                         # n-best lists accumulate
    work = tmp_path / "work"
    for i in range(1, len(rows) + 1):
        assert (work / f"run{i}.weights.yaml").exists() and (work / f"run{i}.decoder.log").exists()
        with gzip.open(work / f"run{i}.best20.out.gz", "rt") as f:
            assert f.readline().startswith("0 ||| ")
    tuned = yaml.safe_load((tmp_path / "tuned.yaml").read_text())
    assert list(tuned) == ["d", "lm", "tm", "w"]
    last = yaml.safe_load((work / f"run{len(rows)}.weights.yaml").read_text())
    flat = [v for value in tuned.values() for v in (value if isinstance(value, list) else [value])]
    used = [v for value in last.values() for v in (value if isinstance(value, list) else [value])]
    assert flat == pytest.approx(used, abs=1e-5)  # converged: the last decoder run used the final weights


def test_nbest_file_source_file_and_weights_file(tmp_path, tuning_set, capsys):
    decoder = (f"{DECODER} --space {tuning_set['space']} --weights {{weights_file}} --nbest {{nbest}} "
               "--input {source}")
    assert tune(tmp_path, tuning_set, decoder, "--iterations", "2", "--optimizer", "pro") == 0
    work = tmp_path / "work"
    assert (work / "run1.best20.out.gz").exists() and (work / "run1.out").exists()
    assert "iteration" in capsys.readouterr().out
    # run 1 decodes with the starting weights, run 2 with those tuned on run 1's list; each n-best list is
    # what the decoder writes for its weights file, run again by hand
    def flat(path: Path) -> list[float]:
        """The weights of a weights file, or of an iteration's record (under ``weights``), in order."""
        data = yaml.safe_load(path.read_text())
        return [v for value in data.get("weights", data).values()
                for v in (value if isinstance(value, list) else [value])]

    assert flat(work / "run1.weights.yaml") == pytest.approx(flat(FIXTURES / "init.yaml"))
    assert flat(work / "run2.weights.yaml") == pytest.approx(flat(work / "run1.tuned.yaml"), abs=1e-9)
    assert flat(work / "run2.weights.yaml") != pytest.approx(flat(work / "run1.weights.yaml"))
    for run in (1, 2):
        again = tmp_path / f"again{run}.nbest"
        subprocess.run([sys.executable, str(FIXTURES / "toy_decoder.py"), "--space", str(tuning_set["space"]),
                        "--weights", str(work / f"run{run}.weights.yaml"), "--nbest", str(again),
                        "--input", str(tuning_set["source"])], check=True)
        assert gzip.decompress((work / f"run{run}.best20.out.gz").read_bytes()) == again.read_bytes()
    assert flat(tmp_path / "tuned.yaml") == pytest.approx(flat(work / "run2.tuned.yaml"), abs=1e-9)


def test_a_failing_decoder_is_a_clear_error(tmp_path, tuning_set, capsys):
    decoder = "echo 'cannot load the phrase table' >&2; exit 3 # {weights_overwrite}"
    assert tune(tmp_path, tuning_set, decoder) == 2
    err = capsys.readouterr().err
    assert "the decoder failed with exit status 3 in iteration 1" in err
    assert "cannot load the phrase table" in err


def test_a_decoder_writing_no_nbest_list(tmp_path, tuning_set, capsys):
    assert tune(tmp_path, tuning_set, "true {weights_overwrite}") == 2
    assert "wrote no n-best list" in capsys.readouterr().err


def test_placeholders_are_quoted_for_the_shell():
    weights = {"LM0": (0.5,), "TranslationModel0": (0.1, -0.2)}
    assert weights_overwrite(weights) == "LM0= 0.5 TranslationModel0= 0.1 -0.2"
    plain = DecoderCommand("moses -weight-overwrite {weights_overwrite}")
    quoted = DecoderCommand("moses -weight-overwrite '{weights_overwrite}' | awk '{print $1}'")
    values = {"weights_overwrite": weights_overwrite(weights)}
    assert plain.render(values) == "moses -weight-overwrite 'LM0= 0.5 TranslationModel0= 0.1 -0.2'"
    assert quoted.render(values) == "moses -weight-overwrite 'LM0= 0.5 TranslationModel0= 0.1 -0.2' | awk '{print $1}'"
    assert plain.reads_stdin and not plain.writes_nbest_file


@pytest.mark.parametrize("template, message", [
    ("moses -n-best-list -", "must pass the weights"),
    ("moses -weight-overwrite {weight_overwrite}", "unknown placeholder {weight_overwrite}"),
])
def test_bad_decoder_commands(template, message):
    with pytest.raises(RerankError, match=message):
        DecoderCommand(template)


def test_the_first_decoder_run_is_checked_against_the_references(tmp_path, capsys):
    """Another set's references of the right length: the first decoder run's list is compared with them, and a
    warning names both files; the right references give none."""
    sample = Path(__file__).resolve().parents[2] / "examples" / "data"
    source = tmp_path / "test.src"
    source.write_text("".join(f"source sentence {i}\n" for i in range(250)))
    decoder = (f"{DECODER} --space {sample / 'test.100best.gz'} --nbest-size {{nbest_size}} "
               "--weight-overwrite {weights_overwrite}")
    for references, warned in ((sample / "val.fr", True), (sample / "test.fr", False)):
        work = tmp_path / references.name
        work.mkdir()
        assert main(["tune", "--decoder", decoder, "--source", str(source), "-r", str(references), "--init",
                     str(sample / "moses.ini"), "-o", str(work / "tuned.yaml"), "--work-dir", str(work / "work"),
                     "--nbest-size", "5", "--restarts", "1", "--iterations", "1"]) == 0
        err = capsys.readouterr().err
        assert ("looks unrelated to" in err and str(references) in err and "run1.best5.out" in err) == warned, err
