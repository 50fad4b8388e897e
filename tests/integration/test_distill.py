"""`rerank distill` end to end on tiny models: the student's corpus is the teacher's 1-best (alone or beside the
references; reranked by right-to-left models where given), a run killed while it translates and again while the
student trains resumes to the outputs of a run never stopped, and bad input is refused (exit 2) before any work."""

from __future__ import annotations

import dataclasses
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch
import yaml
from tiny_models import id_vocabulary, save_model_dir, teach, tiny_config, tiny_model

from rerank.cli import main
from rerank.formats.files import read_text
from rerank.models.checkpoint import CHECKPOINT, WEIGHTS, load_state
from rerank.models.vocab import Vocabulary
from rerank.study.distill import CHUNKS, STUDENT, TRAIN_SOURCE, TRAIN_TARGET

REPO = Path(__file__).resolve().parents[2]
TOY = REPO / "tests" / "data"
SOURCES = 120  # lines of the corpus: the toy sentences, again and again, shuffled by a fixed rule
CHUNK = "4"


@pytest.fixture(autouse=True)
def keep_threads() -> Iterator[None]:
    threads = torch.get_num_threads()
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A parallel corpus of ``SOURCES`` toy pairs (cut at different words, so that they differ)."""
    directory = tmp_path_factory.mktemp("corpus")
    english, french = read_text(TOY / "toy.en"), read_text(TOY / "toy.fr")
    pairs = [(" ".join(english[i % 3].split()[: 3 + i % 7]), " ".join(french[i % 3].split()[: 3 + i % 7]))
             for i in range(SOURCES)]
    files = {"source": directory / "train.en", "target": directory / "train.fr"}
    files["source"].write_text("".join(s + "\n" for s, _ in pairs))
    files["target"].write_text("".join(t + "\n" for _, t in pairs))
    return files


def toy_model(directory: Path, seed: int, src_vocab: Vocabulary | None = None, reverse: bool = False) -> Path:
    """The toy RNNsearch of ``seed`` (reading targets right to left with ``reverse``), taught the toy pairs."""
    read = lambda name: [line.split() for line in read_text(TOY / name)]  # noqa: E731
    src_vocab = src_vocab or Vocabulary.build(read("toy.en"), 100)
    trg_vocab = Vocabulary.build(read("toy.fr"), 100)
    targets = [trg_vocab.encode(line.split()) for line in read_text(TOY / "toy.fr")]
    pairs = ([src_vocab.encode(line.split()) for line in read_text(TOY / "toy.en")],
             [target[::-1] for target in targets] if reverse else targets)
    config = dataclasses.replace(tiny_config(), reverse_target=reverse)
    model = teach(tiny_model(config, len(src_vocab), len(trg_vocab), seed=seed, dtype=torch.float32, biases={}),
                  [pairs] * 15)
    return save_model_dir(directory, model, src_vocab, trg_vocab)


@pytest.fixture(scope="module")
def teachers(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """Two members of a teacher: the toy RNNsearch of seeds 1 and 2."""
    directory = tmp_path_factory.mktemp("teachers")
    return toy_model(directory / "a", 1), toy_model(directory / "b", 2)


def student_config(tmp_path: Path, corpus: dict[str, Path], name: str = "student", **training: object) -> Path:
    """A tiny encoder-decoder (with dropout: the random state matters) trained on ``corpus``, checkpointed every 5
    updates."""
    toy = {"source": str(TOY / "toy.en"), "target": str(TOY / "toy.fr")}
    config = {
        "model": {"architecture": "encdec", "embedding_size": 16, "hidden_size": 16, "maxout_size": 8, "dropout": 0.2},
        "data": {"train": {key: str(path) for key, path in corpus.items()}, "valid": toy, "src_vocab_size": 100,
                 "trg_vocab_size": 100},
        "training": {"optimizer": "adam", "learning_rate": 0.01, "batch_size": 4, "max_epochs": 1000,
                     "max_updates": 40, "valid_every": 5, "patience": 1000, "threads": 1, "seed": 7, **training},
    }
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


def distill_argv(teachers: tuple[Path, ...], config: Path, output: Path, *options: str) -> list[str]:
    return ["distill", "--teacher", *map(str, teachers), "--config", str(config), "--output-dir", str(output),
            "--beam", "3", "--chunk-lines", CHUNK, *options]


def test_the_student_learns_the_ensemble_s_1best_beside_the_references(
        teachers: tuple[Path, Path], corpus: dict[str, Path], tmp_path: Path) -> None:
    output = tmp_path / "run"
    config = student_config(tmp_path, corpus, max_updates=10)
    assert main(["-q", *distill_argv(teachers, config, output, "--targets", "ensemble+references")]) == 0
    assert main(["-q", "translate", "--model", *map(str, teachers), "-i", str(corpus["source"]), "-o",
                 str(tmp_path / "1best"), "--beam", "3"]) == 0
    sources, references = read_text(corpus["source"]), read_text(corpus["target"])
    assert read_text(output / TRAIN_SOURCE) == sources + sources
    assert read_text(output / TRAIN_TARGET) == read_text(tmp_path / "1best") + references
    assert read_text(tmp_path / "1best") != references  # the teacher's own translations
    assert len(list((output / CHUNKS).iterdir())) == SOURCES // int(CHUNK)
    student = load_state(output / STUDENT / CHECKPOINT)
    assert student["progress"]["updates"] == 10
    assert (output / STUDENT / WEIGHTS).is_file()


def test_the_nbest_gives_each_source_its_n_best_translations(teachers: tuple[Path, Path], corpus: dict[str, Path],
                                                            tmp_path: Path) -> None:
    output = tmp_path / "run"
    config = student_config(tmp_path, corpus, max_updates=2)
    assert main(["-q", *distill_argv(teachers[:1], config, output, "--nbest", "2")]) == 0
    assert main(["-q", "translate", "--model", str(teachers[0]), "-i", str(corpus["source"]), "-o",
                 str(tmp_path / "2best"), "--beam", "3", "--nbest", "2"]) == 0
    nbest = [line.split(" ||| ")[1] for line in read_text(tmp_path / "2best")]
    assert read_text(output / TRAIN_TARGET) == nbest
    assert read_text(output / TRAIN_SOURCE) == [s for s in read_text(corpus["source"]) for _ in range(2)]


def test_right_to_left_models_rerank_the_teacher_s_beam_as_translate_reranks_it(
        teachers: tuple[Path, Path], corpus: dict[str, Path], tmp_path: Path) -> None:
    r2l = toy_model(tmp_path / "r2l", 5, reverse=True)
    output = tmp_path / "run"
    config = student_config(tmp_path, corpus, max_updates=1)
    both = ["--r2l-model", str(r2l), "--r2l-weight", "0.7"]
    assert main(["-q", *distill_argv(teachers, config, output, *both)]) == 0
    assert main(["-q", "translate", "--model", *map(str, teachers), "-i", str(corpus["source"]), "-o",
                 str(tmp_path / "1best"), "--beam", "3", *both]) == 0
    assert main(["-q", "translate", "--model", *map(str, teachers), "-i", str(corpus["source"]), "-o",
                 str(tmp_path / "alone"), "--beam", "3"]) == 0
    assert read_text(output / TRAIN_TARGET) == read_text(tmp_path / "1best")
    assert read_text(tmp_path / "1best") != read_text(tmp_path / "alone")  # the reranking changed some
    chunk = read_text(output / CHUNKS / "00000.nbest")
    assert len(chunk) == int(CHUNK) and all(" Teacher0= " in line and " R2L0= " in line for line in chunk)
    settings = yaml.safe_load((output / "distill.yaml").read_text())
    assert settings["r2l_model"] == [str(r2l)] and settings["r2l_weight"] == 0.7
    assert main(["-q", *distill_argv(teachers, config, output, "--r2l-model", str(r2l))]) == 2  # weight 0.5


def kill_when(argv: list[str], done: Path) -> None:
    """Run ``rerank ARGV`` in a process of its own and SIGKILL it as soon as ``done`` exists."""
    process = subprocess.Popen([sys.executable, "-m", "rerank", "-q", *argv], cwd=REPO, stdout=subprocess.DEVNULL,
                               stderr=subprocess.PIPE)
    try:
        while not done.exists() and process.poll() is None:
            time.sleep(0.002)
        os.kill(process.pid, signal.SIGKILL)
    finally:
        _, errors = process.communicate()
    assert process.returncode == -signal.SIGKILL, f"the run ended before it was killed: {errors.decode()}"


@pytest.mark.slow
def test_a_run_killed_while_translating_and_while_training_resumes_to_an_uninterrupted_run_s_outputs(
        teachers: tuple[Path, Path], corpus: dict[str, Path], tmp_path: Path) -> None:
    killed, whole = tmp_path / "killed", tmp_path / "whole"
    config = student_config(tmp_path, corpus)
    argv = distill_argv(teachers, config, killed)
    kill_when(argv, killed / CHUNKS / "00000.nbest")
    written = {path.name: path.stat().st_mtime_ns for path in (killed / CHUNKS).iterdir()}
    assert 0 < len(written) < SOURCES // int(CHUNK), "killed before the last chunk"
    kill_when(argv, killed / STUDENT / CHECKPOINT)
    stopped_at = load_state(killed / STUDENT / CHECKPOINT)["progress"]["updates"]
    assert 0 < stopped_at < 40
    for name, mtime in written.items():  # finished chunks are not translated again
        assert (killed / CHUNKS / name).stat().st_mtime_ns == mtime
    assert main(["-q", *argv]) == 0
    assert main(["-q", *distill_argv(teachers, config, whole)]) == 0

    for name in sorted(p.name for p in (whole / CHUNKS).iterdir()):
        assert (killed / CHUNKS / name).read_bytes() == (whole / CHUNKS / name).read_bytes(), name
    for name in (TRAIN_SOURCE, TRAIN_TARGET):
        assert (killed / name).read_bytes() == (whole / name).read_bytes()
    for name in (CHECKPOINT, WEIGHTS):
        resumed, uninterrupted = (load_state(d / STUDENT / name)["model"] for d in (killed, whole))
        assert resumed.keys() == uninterrupted.keys()
        for key, value in uninterrupted.items():
            assert torch.equal(resumed[key], value), f"{name}: {key} differs"


def test_other_settings_than_the_earlier_run_s_are_refused(teachers: tuple[Path, Path], corpus: dict[str, Path],
                                                           tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = student_config(tmp_path, corpus, max_updates=1)
    assert main(["-q", *distill_argv(teachers, config, tmp_path / "run")]) == 0
    assert main(["-q", *distill_argv(teachers, config, tmp_path / "run", "--length-penalty", "average")]) == 2
    assert "an earlier run translated with other settings (length_penalty)" in capsys.readouterr().err


def write(path: Path, lines: list[str]) -> Path:
    path.write_text("".join(line + "\n" for line in lines))
    return path


@pytest.mark.parametrize("case", ["missing teacher", "teacher of another language", "members' vocabularies differ",
                                  "references of another length", "empty source", "left-to-right r2l model",
                                  "r2l weight alone", "r2l weight above 1"])
def test_bad_input_is_refused_before_any_work(case: str, teachers: tuple[Path, Path], corpus: dict[str, Path],
                                              tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    members: tuple[Path, ...] = teachers
    data = dict(corpus)
    options: list[str] = []
    expected = {"missing teacher": "nowhere", "teacher of another language": "its source vocabulary knows 0% of the "
                "words of", "members' vocabularies differ": "its source vocabulary differs from",
                "references of another length": f"short.fr:{SOURCES}: expected as many lines as ",
                "empty source": "train.en:1: expected the training sources, one sentence per line, got 'an empty "
                                "file'",
                "left-to-right r2l model": "expected a model that reads targets right to left with --r2l-model",
                "r2l weight alone": "--r2l-weight is the weight of the --r2l-model models",
                "r2l weight above 1": "--r2l-weight: the right-to-left weight must be between 0 and 1"}[case]
    if case == "missing teacher":
        members = (tmp_path / "nowhere",)
    elif case == "teacher of another language":
        members = (toy_model(tmp_path / "other", 3, id_vocabulary()),)
    elif case == "members' vocabularies differ":
        members = (teachers[0], toy_model(tmp_path / "other", 3, id_vocabulary()))
    elif case == "references of another length":
        data["target"] = write(tmp_path / "short.fr", read_text(corpus["target"])[:-1])
        options = ["--targets", "ensemble+references"]
    elif case == "empty source":
        data["source"] = write(tmp_path / "train.en", [])
    elif case == "left-to-right r2l model":
        options = ["--r2l-model", str(teachers[1])]
    elif case == "r2l weight alone":
        options = ["--r2l-weight", "0.3"]
    else:
        options = ["--r2l-model", str(teachers[1]), "--r2l-weight", "1.5"]
    output = tmp_path / "run"
    assert main(["-q", *distill_argv(members, student_config(tmp_path, data), output, *options)]) == 2
    error = capsys.readouterr().err
    assert error.startswith("rerank: error: ") and expected in error and "Traceback" not in error
    assert not output.exists()
