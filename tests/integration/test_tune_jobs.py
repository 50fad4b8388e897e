"""``rerank tune --decoder --jobs N``: the decoder runs on N parts of the source at once, locally or through a
submit command, and the loop sees the n-best lists, and tunes the weights, that one decoder run gives."""

from __future__ import annotations

import gzip
import os
import shlex
import sys
import time
from pathlib import Path

import pytest
import torch
import yaml
from helpers import sample_moses_ini
from tiny_models import save_model_dir, teach, tiny_config, tiny_model

from rerank.cli import main
from rerank.models.vocab import Vocabulary

FIXTURES = Path(__file__).resolve().parents[1] / "data" / "tune"
DECODER = f"{shlex.quote(sys.executable)} {shlex.quote(str(FIXTURES / 'toy_decoder.py'))}"
SENTENCES = 10
SEARCH = "--nbest-size {nbest_size} --weight-overwrite {weights_overwrite}"


@pytest.fixture
def tuning_set(regression_slice: Path, tmp_path: Path) -> dict[str, Path]:
    """Moses' regression n-best list as the toy decoder's search space, its references, a 10-line source."""
    data = regression_slice / "tests/mert.extractor-txt/data"
    source = tmp_path / "dev.src"
    source.write_text("".join(f"source sentence {i}\n" for i in range(SENTENCES)))
    return {"space": data / "nbest.1.gz", "reference": data / "reference", "source": source}


def tune(tuning_set: dict[str, Path], directory: Path, decoder: str, *extra: str) -> int:
    directory.mkdir(exist_ok=True)
    return main(["-q", "tune", "--decoder", decoder, "--source", str(tuning_set["source"]),
                 "-r", str(tuning_set["reference"]), "--init", str(FIXTURES / "init.yaml"),
                 "-o", str(directory / "tuned.yaml"), "--work-dir", str(directory / "work"),
                 "--nbest-size", "20", "--restarts", "3", "--iterations", "3", *extra])


def nbest_lists(work: Path) -> dict[str, bytes]:
    return {path.name: gzip.decompress(path.read_bytes()) for path in sorted(work.glob("run*.best20.out.gz"))}


@pytest.mark.parametrize("jobs", [3, 25])
def test_jobs_give_the_nbest_lists_and_weights_of_one_decoder_run(tmp_path: Path, tuning_set: dict[str, Path],
                                                                   jobs: int) -> None:
    decoder = f"{DECODER} --space {tuning_set['space']} {SEARCH}"
    assert tune(tuning_set, tmp_path / "one", decoder) == 0
    assert tune(tuning_set, tmp_path / "parts", decoder, "--jobs", str(jobs)) == 0

    one, parts = nbest_lists(tmp_path / "one" / "work"), nbest_lists(tmp_path / "parts" / "work")
    assert len(one) >= 2 and parts == one  # same iterations, same n-best lists, byte for byte
    assert (tmp_path / "parts" / "tuned.yaml").read_text() == (tmp_path / "one" / "tuned.yaml").read_text()
    ids = [int(line.split(b" ||| ")[0]) for line in one["run1.best20.out.gz"].splitlines()]
    assert sorted(set(ids)) == list(range(SENTENCES)) and ids == sorted(ids)

    count = min(jobs, SENTENCES)  # no empty parts: at most one per sentence
    work = tmp_path / "parts" / "work"
    sources = [(work / f"source.part{k}-of-{count}").read_text() for k in range(1, count + 1)]
    assert "".join(sources) == tuning_set["source"].read_text() and all(sources)
    for k in range(1, count + 1):
        assert (work / f"run1.part{k}.sh").exists()
        assert (work / f"run1.part{k}.decoder.log").read_text().startswith("translated ")
    assert not list(work.glob("*.nbest"))  # the parts' lists are joined, then removed


def test_parts_through_a_submit_command_with_files(tmp_path: Path, tuning_set: dict[str, Path]) -> None:
    decoder = (f"{DECODER} --space {tuning_set['space']} --nbest-size {{nbest_size}} --weights {{weights_file}} "
               "--nbest {nbest} --input {source}")
    submitted = tmp_path / "submitted"
    # a stand-in for "qsub -sync y -b y {command}": it records the job, runs it, and exits with its status
    submit = f"echo {{command}} >> {shlex.quote(str(submitted))} && {{command}}"
    assert tune(tuning_set, tmp_path / "one", decoder) == 0
    assert tune(tuning_set, tmp_path / "parts", decoder, "--jobs", "4", "--submit", submit) == 0
    assert nbest_lists(tmp_path / "parts" / "work") == nbest_lists(tmp_path / "one" / "work")
    jobs = submitted.read_text().splitlines()
    iterations = len(nbest_lists(tmp_path / "one" / "work"))
    assert len(jobs) == 4 * iterations
    # the parts are submitted at once: their lines may come in any order
    assert sorted(jobs[:4]) == [f"sh {tmp_path / 'parts' / 'work' / f'run1.part{k}.sh'}" for k in range(1, 5)]


def test_a_failing_part_is_an_error_naming_it(tmp_path: Path, tuning_set: dict[str, Path],
                                              capsys: pytest.CaptureFixture[str]) -> None:
    decoder = (f"if grep -q 'sentence 7' {{source}}; then echo 'cannot translate sentence 7' >&2; exit 5; fi; "
               f"{DECODER} --space {tuning_set['space']} --weight-overwrite {{weights_overwrite}} --input {{source}}")
    assert tune(tuning_set, tmp_path, decoder, "--jobs", "2") == 2
    err = capsys.readouterr().err
    assert "exit status 5 on part 2 of 2 (sentences 5-9) in iteration 1" in err
    assert "cannot translate sentence 7" in err and "run1.part2.decoder.log" in err
    assert not (tmp_path / "tuned.yaml").exists() and not (tmp_path / "work" / "run1.best20.out.gz").exists()


def test_the_first_failing_part_stops_the_others(tmp_path: Path, tuning_set: dict[str, Path],
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    decoder = (f"if grep -q 'sentence 0' {{source}}; then sleep 60; fi; if grep -q 'sentence 7' {{source}}; then "
               f"exit 4; fi; {DECODER} --space {tuning_set['space']} --weight-overwrite {{weights_overwrite}}")
    started = time.monotonic()
    assert tune(tuning_set, tmp_path, decoder, "--jobs", "2") == 2
    assert time.monotonic() - started < 30  # part 1 was stopped, not waited for
    assert "exit status 4 on part 2 of 2" in capsys.readouterr().err


@pytest.mark.parametrize("submit, fail, message", [
    ("{command} > /dev/null 2>&1 & true", "", "ended without finishing"),  # returns at once: qsub without -sync
    ("{command}; true", "exit 3", "exit status 3 on part 1 of 2"),  # a scheduler that hides the job's status
])
def test_a_submit_command_that_hides_the_job(tmp_path: Path, tuning_set: dict[str, Path], submit: str, fail: str,
                                             message: str, capsys: pytest.CaptureFixture[str]) -> None:
    decoder = (f"if grep -q 'sentence 2' {{source}}; then {fail or 'true'}; fi; sleep 0.5; "
               f"{DECODER} --space {tuning_set['space']} --weight-overwrite {{weights_overwrite}}")
    assert tune(tuning_set, tmp_path, decoder, "--jobs", "2", "--submit", submit) == 2
    assert message in capsys.readouterr().err
    time.sleep(1.5)  # the jobs left running in the background end


def test_a_part_with_ids_beyond_its_lines_is_an_error(tmp_path: Path, tuning_set: dict[str, Path],
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    # a decoder that numbers its output from the whole source, not from its input
    decoder = f"{DECODER} --space {tuning_set['space']} --weight-overwrite {{weights_overwrite}} --input {{source}}"
    decoder += " | sed 's/^[0-9]*/7/'"
    assert tune(tuning_set, tmp_path, decoder, "--jobs", "3") == 2
    err = capsys.readouterr().err
    assert "run1.part1.nbest:1: expected a sentence id below 3, the number of lines of part 1 of 3" in err
    assert "got '7'" in err


@pytest.mark.parametrize("flags, message", [
    (["--nbest", "x.gz", "--jobs", "2"], "--jobs and --submit are for --decoder"),
    (["--decoder", "true {weights_file}", "--source", "SRC", "--submit", "qsub -b y"], "must hold {command}"),
])
def test_bad_jobs_flags(tmp_path: Path, tuning_set: dict[str, Path], capsys: pytest.CaptureFixture[str],
                        flags: list[str], message: str) -> None:
    flags = [str(tuning_set["source"]) if flag == "SRC" else flag for flag in flags]
    assert main(["tune", *flags, "-r", str(tuning_set["reference"]), "--init", str(FIXTURES / "init.yaml"),
                 "-o", str(tmp_path / "tuned.yaml")]) == 2
    assert message in capsys.readouterr().err


def test_a_stopped_parallel_run_resumes(tmp_path: Path, tuning_set: dict[str, Path]) -> None:
    decoder = f"{DECODER} --space {tuning_set['space']} {SEARCH}"
    assert tune(tuning_set, tmp_path / "one", decoder) == 0
    assert tune(tuning_set, tmp_path / "parts", decoder, "--jobs", "2", "--iterations", "1") == 0
    assert tune(tuning_set, tmp_path / "parts", decoder, "--jobs", "3") == 0  # another N: the same lists
    assert nbest_lists(tmp_path / "parts" / "work") == nbest_lists(tmp_path / "one" / "work")
    tuned = [yaml.safe_load((tmp_path / run / "tuned.yaml").read_text()) for run in ("one", "parts")]
    assert tuned[0] == tuned[1]


# ------------------------------------------------------------------------------------------- real decoders

@pytest.fixture(scope="module")
def rnnsearch(multi30k_slice: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """20 Multi30k val pairs and an RNNsearch that has half learnt them, with weights to start from."""
    directory = tmp_path_factory.mktemp("tune_jobs")
    files = {"source": multi30k_slice["val_source"], "reference": multi30k_slice["val_reference"]}
    sentences = {side: [line.split() for line in path.read_text(encoding="utf-8").splitlines()]
                 for side, path in files.items()}
    src_vocab, trg_vocab = (Vocabulary.build(sentences[side], 1000) for side in ("source", "reference"))
    pairs = ([src_vocab.encode(s) for s in sentences["source"]], [trg_vocab.encode(s) for s in sentences["reference"]])
    model = teach(tiny_model(tiny_config(), len(src_vocab), len(trg_vocab), dtype=torch.float32, biases={}),
                  [pairs] * 35)
    files["model"] = save_model_dir(directory / "rnnsearch", model, src_vocab, trg_vocab)
    files["init"] = directory / "init.yaml"
    files["init"].write_text("RNNsearch0: 1\nWP0: 0\n")
    return files


@pytest.mark.slow
def test_our_decoder_in_parts_gives_the_lists_and_weights_of_one_run(rnnsearch: dict[str, Path],
                                                                     tmp_path: Path) -> None:
    # One sentence per batch: a batch's float32 arithmetic depends on what shares it, and the parts' batches
    # would otherwise hold other sentences than the whole source's.
    decoder = (f"{shlex.quote(sys.executable)} -m rerank translate --model {shlex.quote(str(rnnsearch['model']))} "
               "-i {source} --beam 4 --nbest {nbest_size} --weights {weights_file} --threads 1 --batch-size 1 "
               "-o {nbest}")
    for name, jobs in (("one", "1"), ("parts", "2")):
        (tmp_path / name).mkdir()
        assert main(["-q", "tune", "--decoder", decoder, "--source", str(rnnsearch["source"]),
                     "-r", str(rnnsearch["reference"]), "--init", str(rnnsearch["init"]),
                     "-o", str(tmp_path / name / "tuned.yaml"), "--work-dir", str(tmp_path / name / "work"),
                     "--nbest-size", "4", "--restarts", "2", "--iterations", "2", "--jobs", jobs]) == 0
    one = {path.name: gzip.decompress(path.read_bytes()) for path in (tmp_path / "one" / "work").glob("*.gz")}
    parts = {path.name: gzip.decompress(path.read_bytes()) for path in (tmp_path / "parts" / "work").glob("*.gz")}
    assert len(one) == 2 and parts == one
    assert (tmp_path / "parts" / "tuned.yaml").read_text() == (tmp_path / "one" / "tuned.yaml").read_text()
    assert (tmp_path / "parts" / "work" / "source.part2-of-2").read_text() == "".join(
        rnnsearch["source"].read_text(encoding="utf-8").splitlines(keepends=True)[10:])


MOSES_BIN = Path(__file__).resolve().parents[3] / "shared" / "tools" / "moses" / "bin"
EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "data"


@pytest.mark.skipif(not all(os.access(MOSES_BIN / tool, os.X_OK) for tool in ("moses",)),
                    reason=f"the Moses decoder not found in {MOSES_BIN}")
def test_moses_in_parts_gives_the_lists_and_weights_of_one_run(tmp_path: Path) -> None:
    """The sample system (examples/data) on its first 6 val sentences, its phrase table filtered to them."""
    source_lines = (EXAMPLES / "val.en").read_text(encoding="utf-8").splitlines(keepends=True)[:6]
    source, reference = tmp_path / "val.en", tmp_path / "val.fr"
    source.write_text("".join(source_lines), encoding="utf-8")
    reference.write_text("".join((EXAMPLES / "val.fr").read_text(encoding="utf-8").splitlines(keepends=True)[:6]),
                         encoding="utf-8")
    moses_ini = sample_moses_ini(tmp_path, [line.rstrip("\n") for line in source_lines])
    decoder = (f"{shlex.quote(str(MOSES_BIN / 'moses'))} -f {shlex.quote(str(moses_ini))} -threads 1 "
               "-n-best-list {nbest} {nbest_size} distinct -weight-overwrite {weights_overwrite}")
    for name, jobs in (("one", "1"), ("parts", "2")):
        (tmp_path / name).mkdir()
        assert main(["-q", "tune", "--decoder", decoder, "--source", str(source), "-r", str(reference),
                     "--moses-ini", str(moses_ini), "-o", str(tmp_path / name / "tuned.yaml"),
                     "--work-dir", str(tmp_path / name / "work"), "--nbest-size", "10", "--restarts", "2",
                     "--iterations", "2", "--seed", "1", "--jobs", jobs]) == 0
    one = {path.name: gzip.decompress(path.read_bytes()) for path in (tmp_path / "one" / "work").glob("*.gz")}
    parts = {path.name: gzip.decompress(path.read_bytes()) for path in (tmp_path / "parts" / "work").glob("*.gz")}
    assert len(one) == 2 and parts == one
    assert {int(line.split(b" ||| ")[0]) for line in one["run1.best10.out.gz"].splitlines()} == set(range(6))
    assert (tmp_path / "parts" / "tuned.yaml").read_text() == (tmp_path / "one" / "tuned.yaml").read_text()
    assert (tmp_path / "parts" / "tuned.moses.ini").read_text() == (tmp_path / "one" / "tuned.moses.ini").read_text()
