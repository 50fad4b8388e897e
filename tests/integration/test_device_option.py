"""Every command that runs a model takes --device (the experiment its ``device`` key, the nmt feature
its ``device`` option), and a device this machine lacks is one clean error (exit 2), not a traceback."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from tiny_models import save_model_dir, tiny_config, tiny_model

from rerank.cli import main
from rerank.errors import RerankError
from rerank.models.vocab import Vocabulary
from rerank.study.config import load_experiment
from rerank.study.experiment import Experiment


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    src_vocab = Vocabulary.build([[f"s{i}" for i in range(26)]], 26)
    trg_vocab = Vocabulary.build([[f"t{i}" for i in range(21)]], 21)
    model = tiny_model(tiny_config("rnnsearch"), dtype=torch.float32)
    return save_model_dir(tmp_path_factory.mktemp("model") / "rnnsearch", model, src_vocab, trg_vocab)


def commands(model_dir: Path, tmp_path: Path) -> dict[str, list[str]]:
    source = tmp_path / "src.txt"
    source.write_text("s1 s2 s3\n")
    features = tmp_path / "features.yaml"
    features.write_text(f"features:\n  - {{kind: nmt, model: {model_dir}, device: DEVICE}}\n")
    nbest = tmp_path / "in.nbest"
    nbest.write_text("0 ||| t1 t2 ||| F0= -1 ||| -1\n")
    table = tmp_path / "phrase-table"
    table.write_text("s1 ||| t1 ||| 0.5 0.5 0.5 0.5 ||| 0-0 ||| 1 1 1\n")
    return {
        "train": ["train", "--config", str(tmp_path / "no-such-config.yaml"), "--device", "DEVICE"],
        "translate": ["translate", "--model", str(model_dir), "-i", str(source), "-o", str(tmp_path / "out.txt"),
                      "--device", "DEVICE"],
        "align": ["align", "--model", str(model_dir), "--source", "s1 s2", "--target", "t1", "-o",
                  str(tmp_path / "a.png"), "--device", "DEVICE"],
        "score-table": ["score-table", str(table), "-o", str(tmp_path / "table.gz"), "--model", str(model_dir),
                        "--device", "DEVICE"],
        "score-nbest": ["score-nbest", str(nbest), "--source", str(source), "--config", str(features), "-o",
                        str(tmp_path / "scored.nbest")],
    }


@pytest.mark.parametrize("command", ["train", "translate", "align", "score-table", "score-nbest"])
@pytest.mark.parametrize("device,message", [("tpu", "unknown device 'tpu'"),
                                            ("cuda", "this machine has no CUDA GPU")])
def test_a_missing_device_is_one_clean_error(model_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                             command: str, device: str, message: str) -> None:
    if device == "cuda" and torch.cuda.is_available():
        pytest.skip("this machine has a CUDA GPU")
    argv = commands(model_dir, tmp_path)[command]
    if command == "score-nbest":
        features = Path(argv[argv.index("--config") + 1])
        features.write_text(features.read_text().replace("DEVICE", device))
    code = main([device if a == "DEVICE" else a for a in argv])
    err = capsys.readouterr().err
    assert code == 2, err
    assert message in err and "Traceback" not in err


def test_the_experiment_checks_its_device_before_its_first_step(tmp_path: Path) -> None:
    config = tmp_path / "experiment.yaml"
    config.write_text(f"""output_dir: {tmp_path / "out"}
encdec: {tmp_path}
rnnsearch: {tmp_path}
moses: {{ini: moses.ini, language_model: lm.arpa}}
dev: {{source: dev.en, reference: dev.fr, nbest: dev.nbest}}
test: {{source: test.en, reference: test.fr, nbest: test.nbest}}
device: tpu
""")
    with pytest.raises(RerankError, match="unknown device 'tpu'"):
        Experiment(load_experiment(config)).run()
    assert not (tmp_path / "out" / "commands.sh").exists()


def test_translate_on_the_cpu_device_names_it_explicitly(model_dir: Path, tmp_path: Path,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    argv = [("cpu" if a == "DEVICE" else a) for a in commands(model_dir, tmp_path)["translate"]]
    assert main(argv) == 0, capsys.readouterr().err
    assert (tmp_path / "out.txt").read_text().count("\n") == 1
