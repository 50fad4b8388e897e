"""Model directories: a saved model loads back unchanged, and a tampered or mismatched weights file is
refused with one clear error, without running anything it contains; a save onto a full device is one error."""

from __future__ import annotations

import os
import pickle
from pathlib import Path

import pytest
import torch
import yaml
from tampering import Payload
from tiny_models import save_model_dir, tiny_config, tiny_model

from rerank.errors import RerankError
from rerank.models.batching import pad
from rerank.models.checkpoint import CONFIG, WEIGHTS, load_model, load_state, save_state
from rerank.models.seq2seq import Seq2Seq
from rerank.models.vocab import EOS_ID, Vocabulary

SOURCES = [[5, 6, 7, EOS_ID], [8, EOS_ID]]
TARGETS = [[4, 9, EOS_ID], [10, 11, 12, EOS_ID]]


def scores(model: Seq2Seq) -> torch.Tensor:
    src, src_len = pad(SOURCES)
    trg, _ = pad(TARGETS)
    with torch.inference_mode():
        return model.score(model.encode(src, src_len), trg)


@pytest.fixture
def model_dir(tmp_path: Path) -> Path:
    vocab = Vocabulary.build([[f"w{i}" for i in range(26)]], 26)
    return save_model_dir(tmp_path / "model", tiny_model(tiny_config("rnnsearch"), dtype=torch.float32), vocab, vocab)


def test_a_saved_model_loads_back_unchanged(tmp_path: Path) -> None:
    vocab = Vocabulary.build([[f"w{i}" for i in range(26)]], 26)
    model = tiny_model(tiny_config("rnnsearch", decoder="luong", input_feeding=True), 30, 30, dtype=torch.float32)
    loaded = load_model(save_model_dir(tmp_path / "model", model, vocab, vocab))
    assert loaded.architecture == "rnnsearch" and not loaded.model.training
    assert loaded.src_vocab.tokens == vocab.tokens
    torch.testing.assert_close(scores(loaded.model), scores(model), rtol=0, atol=0)


@pytest.mark.filterwarnings("ignore:Detected pickle protocol")
def test_a_pickle_that_would_run_code_is_refused_unrun(model_dir: Path, tmp_path: Path) -> None:
    marker = tmp_path / "code-ran"
    torch.save({"model": Payload(marker)}, model_dir / WEIGHTS)
    with pytest.raises(RerankError, match=rf"{WEIGHTS}: refused: not a plain weights file"):
        load_model(model_dir)
    assert not marker.exists()
    with open(model_dir / WEIGHTS, "wb") as f:  # a bare pickle, not even a torch file
        pickle.dump(Payload(marker), f)
    with pytest.raises(RerankError, match="refused"):
        load_model(model_dir)
    assert not marker.exists()


def test_weights_that_do_not_fit_the_config_are_refused(model_dir: Path) -> None:
    config = yaml.safe_load((model_dir / CONFIG).read_text())
    config["model"]["hidden_size"] = 24
    (model_dir / CONFIG).write_text(yaml.safe_dump(config))
    with pytest.raises(RerankError, match=r"do not fit the model in config.yaml \(wrong shape: "):
        load_model(model_dir)


def test_weights_of_another_architecture_are_refused(model_dir: Path) -> None:
    config = yaml.safe_load((model_dir / CONFIG).read_text())
    config["model"]["architecture"] = "encdec"
    (model_dir / CONFIG).write_text(yaml.safe_dump(config))
    with pytest.raises(RerankError, match=r"do not fit the model .*missing: .*unexpected: "):
        load_model(model_dir)


@pytest.mark.parametrize("content", [{"model": torch.zeros(3)}, {"model": {"encoder.rnn.weight": [1.0, 2.0]}},
                                     torch.zeros(3), {"weights": {}}],
                         ids=["tensor-not-dict", "list-not-tensor", "no-dict", "no-model-key"])
def test_a_file_that_is_not_a_state_dict_is_refused(model_dir: Path, content: object) -> None:
    torch.save(content, model_dir / WEIGHTS)
    with pytest.raises(RerankError, match=WEIGHTS):
        load_model(model_dir)


def test_truncated_and_missing_files_are_refused(model_dir: Path) -> None:
    data = (model_dir / WEIGHTS).read_bytes()
    (model_dir / WEIGHTS).write_bytes(data[: len(data) // 2])
    with pytest.raises(RerankError, match="refused"):
        load_state(model_dir / WEIGHTS)
    (model_dir / WEIGHTS).unlink()
    with pytest.raises(RerankError, match="no such file"):
        load_model(model_dir)
    with pytest.raises(RerankError, match="not a model directory"):
        load_model(model_dir.parent)


def test_a_save_to_a_full_device_is_one_error(tmp_path: Path) -> None:
    """torch.save through the output layer onto a full disk: one RerankError naming the file."""
    if os.geteuid() != 0:
        pytest.skip("a private /dev/full node needs root")
    import stat

    full = tmp_path / "full"
    os.mknod(full, stat.S_IFCHR | 0o666, os.makedev(1, 7))
    with pytest.raises(RerankError, match=f"{full}: cannot write"):
        save_state({"model": {"w": torch.zeros(1000)}}, full)
