"""Mistakes that once ended in a traceback: each is one line on stderr and exit status 2, found before the work."""

from __future__ import annotations

import zipfile
from pathlib import Path

import pytest
import yaml

from rerank.cli import main

REPO = Path(__file__).resolve().parents[2]
DATA = REPO / "tests" / "data"
TOY = ["--nbest", str(DATA / "toy.nbest"), "-r", str(DATA / "toy.fr")]


def test_oracle_references_of_different_lengths(tmp_path: Path, capsys) -> None:
    short = tmp_path / "short.fr"
    short.write_text("".join(DATA.joinpath("toy.fr").read_text().splitlines(keepends=True)[:2]))
    assert main(["oracle", str(DATA / "toy.nbest"), "-r", str(DATA / "toy.fr"), "-r", str(short)]) == 2
    assert f"{short}: expected 3 lines" in capsys.readouterr().err


@pytest.mark.parametrize("command", ["oracle", "tune", "tune-config"])
def test_an_unknown_tokenizer(command: str, tmp_path: Path, capsys) -> None:
    if command == "oracle":
        argv = ["oracle", str(DATA / "toy.nbest"), "-r", str(DATA / "toy.fr"), "--tokenize", "bogus"]
    elif command == "tune":
        argv = ["tune", *TOY, "-o", str(tmp_path / "w.yaml"), "--tokenize", "bogus"]
    else:
        config = tmp_path / "tune.yaml"
        config.write_text("bleu:\n  tokenize: bogus\n")
        argv = ["tune", *TOY, "-o", str(tmp_path / "w.yaml"), "--config", str(config)]
    assert main(argv) == 2
    assert "unknown BLEU tokenizer 'bogus': expected one of none, " in capsys.readouterr().err


@pytest.mark.parametrize("features", [",,", " , "])
def test_features_without_labels(features: str, tmp_path: Path, capsys) -> None:
    assert main(["tune", *TOY, "-o", str(tmp_path / "w.yaml"), "--features", features]) == 2
    assert "--features" in capsys.readouterr().err


@pytest.mark.parametrize("content", [b"", b"garbage\n", b"\x00" * 100, "zip"])
def test_a_model_file_that_is_not_a_torch_archive(content: bytes | str, tmp_path: Path, capsys) -> None:
    model = tmp_path / "model"
    model.mkdir()
    for name in ("config.yaml", "vocab.src.txt", "vocab.trg.txt"):
        (model / name).write_bytes((REPO / "examples" / "models" / "rnnsearch" / name).read_bytes())
    if content == "zip":
        with zipfile.ZipFile(model / "model.pt", "w") as archive:
            archive.writestr("archive/data.pkl", b"not a pickle")
    else:
        assert isinstance(content, bytes)
        (model / "model.pt").write_bytes(content)
    assert main(["translate", "--model", str(model), "-i", str(DATA / "toy.en"), "-o", str(tmp_path / "out")]) == 2
    assert f"{model / 'model.pt'}: refused" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def sample_experiment(tmp_path: Path, **settings: object) -> Path:
    experiment = yaml.safe_load((REPO / "configs" / "experiments" / "sample.yaml").read_text())
    for section in ("moses", "dev", "test"):
        experiment[section] = {key: str(REPO / value) for key, value in experiment[section].items()}
    for key in ("encdec", "rnnsearch"):
        experiment[key] = str(REPO / experiment[key])
    experiment.update(output_dir=str(tmp_path / "run"), **settings)
    config = tmp_path / "experiment.yaml"
    config.write_text(yaml.safe_dump(experiment))
    return config


def test_an_experiment_output_dir_that_is_a_file(tmp_path: Path, capsys) -> None:
    (tmp_path / "run").write_text("a file\n")
    assert main(["-q", "experiment", str(sample_experiment(tmp_path))]) == 2
    assert "it is a file, not a directory" in capsys.readouterr().err


@pytest.mark.parametrize("section, key", [("test", "nbest"), ("moses", "language_model")])
def test_an_experiment_finds_a_missing_input_before_its_first_step(section: str, key: str, tmp_path: Path,
                                                                  capsys) -> None:
    config = sample_experiment(tmp_path)
    experiment = yaml.safe_load(config.read_text())
    experiment[section][key] = str(tmp_path / "absent")
    config.write_text(yaml.safe_dump(experiment))
    assert main(["-q", "experiment", str(config)]) == 2
    assert f"{section}.{key}: {tmp_path / 'absent'}" in capsys.readouterr().err
    assert not (tmp_path / "run" / "commands.sh").exists() and not (tmp_path / "run" / "models").exists()


def test_a_model_directory_that_is_a_file(tmp_path: Path, capsys) -> None:
    (tmp_path / "model").write_text("a file\n")
    config = tmp_path / "train.yaml"
    config.write_text(yaml.safe_dump({
        "model": {"architecture": "encdec", "embedding_size": 8, "hidden_size": 8, "maxout_size": 4},
        "data": {"train": {"source": str(DATA / "toy.en"), "target": str(DATA / "toy.fr")},
                 "valid": {"source": str(DATA / "toy.en"), "target": str(DATA / "toy.fr")}},
        "training": {"max_updates": 1, "threads": 1}, "output_dir": str(tmp_path / "model")}))
    assert main(["train", "--config", str(config)]) == 2
    assert "it is a file, not a directory" in capsys.readouterr().err


def test_a_tuning_work_directory_that_is_a_file(tmp_path: Path, capsys) -> None:
    (tmp_path / "work").write_text("a file\n")
    assert main(["tune", "--decoder", "true {weights_file}", "--source", str(DATA / "toy.en"), "-r",
                 str(DATA / "toy.fr"), "--init", str(DATA / "weights.yaml"), "-o", str(tmp_path / "w.yaml"),
                 "--work-dir", str(tmp_path / "work")]) == 2
    err = capsys.readouterr().err
    assert "--work-dir" in err and "it is a file, not a directory" in err


@pytest.mark.parametrize("argv", [
    ["translate", "--model", "examples/models/rnnserch", "-i", "examples/data/test.en"],
    ["score-table", "examples/data/phrase-table.gz", "--model", "examples/models/rnnserch", "-o", "{tmp}/t.gz"],
    ["score-nbest", "--model", "examples/models/rnnserch", "examples/data/test.100best.gz", "-o", "{tmp}/n.gz"],
])
def test_a_misspelt_model_directory_gets_the_closest_one(argv: list[str], tmp_path: Path, capsys,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(REPO)
    assert main([a.format(tmp=tmp_path) for a in argv]) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith("rerank: error: ") and "examples/models/rnnserch: no such " in line
    assert line.endswith(" (did you mean 'examples/models/rnnsearch'?)") and "not a model directory" not in line


def test_a_model_directory_without_a_config_is_named_so(tmp_path: Path, capsys) -> None:
    assert main(["translate", "--model", str(tmp_path), "-i", str(DATA / "toy.en")]) == 2
    assert capsys.readouterr().err == f"rerank: error: {tmp_path}: not a model directory (no config.yaml)\n"
    assert main(["translate", "--model", str(tmp_path / "absent"), "-i", str(DATA / "toy.en")]) == 2
    assert capsys.readouterr().err == f"rerank: error: {tmp_path / 'absent'}: no such directory\n"


def test_a_misspelt_input_file_gets_the_closest_one(capsys) -> None:
    assert main(["evaluate", str(DATA / "toy.1bes"), "-r", str(DATA / "toy.fr")]) == 2
    assert capsys.readouterr().err.endswith(f"cannot read: No such file or directory (did you mean "
                                            f"{str(DATA / 'toy.1best')!r}?)\n")
