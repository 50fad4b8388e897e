"""What a new user meets first: bad settings refused when read, outputs checked before the work, and
messages that name the file and read cleanly (no doubled backslashes, no terminal escapes, "1 value")."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
import torch
import yaml
from tampering import Payload
from tiny_models import save_model_dir, tiny_config, tiny_model

from rerank.cli import main
from rerank.models.checkpoint import CHECKPOINT
from rerank.models.vocab import Vocabulary

REPO = Path(__file__).resolve().parents[2]
TEST_DATA = REPO / "tests" / "data"
SAMPLE = REPO / "examples" / "data"


def run(argv: list[object], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    status = main([str(a) for a in argv])
    return status, capsys.readouterr().err


def training_config(tmp_path: Path, **changes: dict[str, object]) -> Path:
    toy = {"source": str(TEST_DATA / "toy.en"), "target": str(TEST_DATA / "toy.fr")}
    config: dict[str, dict[str, object] | str] = {
        "model": {"architecture": "encdec", "embedding_size": 8, "hidden_size": 8, "maxout_size": 4},
        "data": {"train": toy, "valid": dict(toy), "src_vocab_size": 50, "trg_vocab_size": 50},
        "training": {"optimizer": "adam", "learning_rate": 0.01, "batch_size": 2, "max_updates": 2, "valid_every": 1,
                     "threads": 1},
        "output_dir": str(tmp_path / "model"),
    }
    for section, values in changes.items():
        section_values = config[section]
        assert isinstance(section_values, dict)
        section_values.update(values)
    path = tmp_path / "train.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


@pytest.mark.parametrize("section, key, value, expected", [
    ("training", "learning_rate", -1, "training.learning_rate: expected a number above 0, got -1"),
    ("training", "learning_rate", 0, "training.learning_rate: expected a number above 0, got 0"),
    ("model", "hidden_size", 0, "model.hidden_size: expected an integer of at least 1, got 0"),
    ("model", "embedding_size", -4, "model.embedding_size: expected an integer of at least 1, got -4"),
    ("training", "max_updates", -5, "training.max_updates: expected an integer of at least 1, got -5"),
    ("training", "max_minutes", -1, "training.max_minutes: expected a number above 0, got -1"),
    ("data", "src_vocab_size", 0, "data.src_vocab_size: expected an integer of at least 1, got 0"),
    ("model", "dropout", 1.5, "model.dropout: expected a number below 1, got 1.5"),
])
def test_training_values_are_range_checked_when_read(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                     section: str, key: str, value: float, expected: str) -> None:
    config = training_config(tmp_path, **{section: {key: value}})
    status, err = run(["train", "--config", config], capsys)
    assert status == 2
    assert err == f"rerank: error: {config}: {expected}\n"
    assert not (tmp_path / "model").exists()


def test_a_run_that_failed_before_its_first_update_does_not_block_the_corrected_one(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    missing = {"source": str(tmp_path / "nothing.en"), "target": str(TEST_DATA / "toy.fr")}
    status, err = run(["train", "--config", training_config(tmp_path, data={"valid": missing})], capsys)
    assert status == 2 and "nothing.en: cannot read" in err
    corrected = training_config(tmp_path, model={"hidden_size": 12}, data={"src_vocab_size": 30})
    assert run(["train", "--config", corrected], capsys)[0] == 0
    assert (tmp_path / "model" / CHECKPOINT).exists()


def test_an_output_in_a_missing_directory_fails_before_the_work(tmp_path: Path,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    started = time.monotonic()
    status, err = run(["tune", "--nbest", SAMPLE / "val.100best.gz", "-r", SAMPLE / "val.fr",
                       "--init", SAMPLE / "moses.ini", "-o", tmp_path / "no" / "dir" / "w.yaml"], capsys)
    assert status == 2
    assert err == f"rerank: error: {tmp_path / 'no' / 'dir' / 'w.yaml'}: cannot write: directory " \
                  f"'{tmp_path / 'no' / 'dir'}' does not exist\n"
    assert time.monotonic() - started < 2.0  # the lists were not even read


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    vocab = Vocabulary.build([(TEST_DATA / "toy.en").read_text().split(), (TEST_DATA / "toy.fr").read_text().split()],
                             100)
    model = tiny_model(tiny_config("rnnsearch"), len(vocab), len(vocab), dtype=torch.float32)
    return save_model_dir(tmp_path_factory.mktemp("model"), model, vocab, vocab)


def test_a_neural_feature_without_source_and_duplicate_labels_fail_before_any_model_loads(
        model_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    import rerank.scoring.pairs

    def no_loading(*args: object, **kwargs: object) -> None:
        raise AssertionError("a model was loaded")

    monkeypatch.setattr(rerank.scoring.pairs.Scorer, "load", no_loading)
    config = tmp_path / "rescore.yaml"
    config.write_text(yaml.safe_dump({"features": [{"kind": "nmt", "model": str(model_dir)}]}))
    status, err = run(["score-nbest", TEST_DATA / "toy.nbest", "--config", config, "-o", tmp_path / "out"], capsys)
    assert (status, err) == (2, "rerank: error: feature(s) RNNsearch0 need the source text: give --source\n")
    config.write_text(yaml.safe_dump({"features": [{"kind": "nmt", "model": str(model_dir)},
                                                   {"kind": "word-penalty", "name": "RNNsearch0"}]}))
    status, err = run(["score-nbest", TEST_DATA / "toy.nbest", "--source", TEST_DATA / "toy.en", "--config", config,
                       "-o", tmp_path / "out"], capsys)
    assert (status, err) == (2, f"rerank: error: {config}: feature label(s) used twice: RNNsearch0\n")


def test_a_moses_ini_without_weights_is_named(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    ini = tmp_path / "moses.ini"
    ini.write_text("[feature]\nWordPenalty\n")
    status, err = run(["apply", SAMPLE / "val.100best.gz", "--weights", ini, "-o", tmp_path / "out"], capsys)
    assert (status, err) == (2, f"rerank: error: {ini}: a moses.ini without weights: expected a [weight] "
                                "section (or old [weight-x] sections)\n")


def test_a_weights_file_is_read_by_its_content_not_its_name(tmp_path: Path,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    ini_named_yaml = tmp_path / "weights.yaml"
    ini_named_yaml.write_bytes((SAMPLE / "moses.ini").read_bytes())
    yaml_named_ini = tmp_path / "weights.ini"
    yaml_named_ini.write_text("LM0: 1\n")
    assert run(["apply", SAMPLE / "val.100best.gz", "--weights", ini_named_yaml, "-o", tmp_path / "a"], capsys)[0] == 0
    assert (tmp_path / "a").read_bytes() == (SAMPLE / "val.1best").read_bytes()
    status, _ = run(["apply", SAMPLE / "val.100best.gz", "--weights", yaml_named_ini, "--missing-weight", "0",
                     "-o", tmp_path / "b"], capsys)
    assert status == 0


def test_all_weights_zero_warns(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    status, err = run(["apply", SAMPLE / "val.100best.gz", "--weight", "LM0=0", "--missing-weight", "0",
                       "-o", tmp_path / "out"], capsys)
    assert status == 0
    assert "every weight of the features of" in err and "is 0: each sentence keeps its first hypothesis" in err


def test_messages_read_cleanly(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    dos = tmp_path / "dos.fr"
    dos.write_bytes(b"un homme\r\n")
    status, err = run(["evaluate", "-r", dos, dos], capsys)
    assert status == 2 and err.endswith("got 'a line ending in \\r\\n'\n") and "\\\\" not in err
    status, err = run(["apply", SAMPLE / "val.100best.gz", "--weight", "LM0=1,2", "-o", tmp_path / "out"], capsys)
    assert status == 2 and "LM0 has 1 value in the n-best list but 2 weights" in err


def test_torchs_refusal_reaches_the_user_without_terminal_escapes(model_dir: Path, tmp_path: Path,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad"
    bad.mkdir()
    for name in os.listdir(model_dir):
        (bad / name).write_bytes((model_dir / name).read_bytes())
    torch.save({"weights": Payload(tmp_path / "ran")}, bad / "model.pt")
    status, err = run(["translate", "--model", bad, "-i", TEST_DATA / "toy.en", "-o", tmp_path / "out"], capsys)
    assert status == 2 and "refused" in err
    assert "\x1b" not in err and not (tmp_path / "ran").exists()
