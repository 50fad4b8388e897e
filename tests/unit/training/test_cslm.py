"""Training a CSLM: the resume rule (a saved config read with today's defaults) as for a translation model, exact
resumption across an epoch's end, and a tiny training run through ``rerank train`` read back by the feature."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
import yaml
from helpers import TINY_LM_TEXT

from rerank.cli import main
from rerank.errors import RerankError
from rerank.features.registry import build_feature
from rerank.models.checkpoint import CHECKPOINT, WEIGHTS, load_state, save_state
from rerank.models.config import CONFIG, CSLMConfig
from rerank.models.cslm import VOCAB, load_cslm_net
from rerank.models.vocab import Vocabulary
from rerank.training.config import CSLMData, CSLMTrainConfig, CSLMTraining
from rerank.training.cslm import CSLMTrainer

TEXT = ["the cat sat on the mat", "the dog sat on the log", "a cat and a dog", "the mat and the log"] * 3


def cslm_config(tmp_path: Path, **training: object) -> CSLMTrainConfig:
    (tmp_path / "train.txt").write_text("\n".join(TEXT) + "\n")
    return CSLMTrainConfig(model=CSLMConfig(order=3, embedding_size=4, hidden_sizes=(8,)),
                           data=CSLMData(train=str(tmp_path / "train.txt"), valid=str(tmp_path / "train.txt"),
                                         min_count=1),
                           training=CSLMTraining(batch_size=8, valid_every=2, log_every=1000, **training),  # type: ignore[arg-type]
                           output_dir=str(tmp_path / "cslm"))


def test_a_cslm_run_saved_before_a_key_was_added_resumes(tmp_path: Path) -> None:
    CSLMTrainer(cslm_config(tmp_path, max_updates=2)).train()
    path = tmp_path / "cslm" / CONFIG
    saved = yaml.safe_load(path.read_text())
    del saved["model"]["dropout"], saved["data"]["max_words"]  # as a run written before these keys existed
    path.write_text(yaml.safe_dump(saved))
    resumed = CSLMTrainer(cslm_config(tmp_path, max_updates=4))
    assert resumed.progress.updates == 2
    assert resumed.train().updates == 4
    assert load_state(tmp_path / "cslm" / CHECKPOINT)["progress"]["updates"] == 4


def test_a_cslm_run_with_another_model_is_refused(tmp_path: Path) -> None:
    CSLMTrainer(cslm_config(tmp_path, max_updates=2)).train()
    path = tmp_path / "cslm" / CONFIG
    saved = yaml.safe_load(path.read_text())
    saved["model"]["order"] = 4
    path.write_text(yaml.safe_dump(saved))
    with pytest.raises(RerankError, match="holds a run with another 'model' config"):
        CSLMTrainer(cslm_config(tmp_path, max_updates=4))


VALID = ["a dog walks in the street", "the girl runs with the dog"]


def train_config(tmp_path: Path, out: str, **training: object) -> CSLMTrainConfig:
    (tmp_path / "train.txt").write_text("\n".join(TINY_LM_TEXT) + "\n")
    (tmp_path / "valid.txt").write_text("\n".join(VALID) + "\n")
    settings = {"batch_size": 16, "valid_every": 1000, "log_every": 1000, "seed": 7, **training}
    return CSLMTrainConfig(model=CSLMConfig(order=4, embedding_size=8, hidden_sizes=(16, 12), dropout=0.3),
                           data=CSLMData(train=str(tmp_path / "train.txt"), valid=str(tmp_path / "valid.txt")),
                           training=CSLMTraining(**settings),  # type: ignore[arg-type]
                           output_dir=str(tmp_path / out))


def test_training_resumes_exactly(tmp_path: Path) -> None:
    """2 updates, stop, resume to 4 (across an epoch's end, with dropout) equals 4 updates straight."""
    CSLMTrainer(train_config(tmp_path, "stopped", max_updates=2)).train()
    at_2 = torch.load(tmp_path / "stopped" / CHECKPOINT, weights_only=True)["model"]
    resumed = CSLMTrainer(train_config(tmp_path, "stopped", max_updates=4))
    assert resumed.progress.updates == 2 and len(resumed.train_rows) // 16 == 3  # 4 updates cross an epoch
    resumed.train()
    CSLMTrainer(train_config(tmp_path, "straight", max_updates=4)).train()
    a = torch.load(tmp_path / "stopped" / CHECKPOINT, weights_only=True)
    b = torch.load(tmp_path / "straight" / CHECKPOINT, weights_only=True)
    assert a["progress"]["updates"] == b["progress"]["updates"] == 4
    assert (a["progress"]["epoch"], a["progress"]["batch"]) == (b["progress"]["epoch"], b["progress"]["batch"])
    for name, value in b["model"].items():
        assert torch.equal(a["model"][name], value), name
    assert torch.equal(a["rng"], b["rng"])
    assert not all(torch.equal(at_2[k], v) for k, v in b["model"].items())  # updates 3 and 4 moved the weights


def test_a_tiny_training_run_and_the_feature(tmp_path: Path, arpa: Path) -> None:
    config = train_config(tmp_path, "cslm", max_updates=60, valid_every=20, learning_rate=0.01,
                          max_epochs=100)
    path = tmp_path / "cslm.yaml"
    path.write_text(yaml.safe_dump({"model": {"architecture": "cslm", "order": 4, "embedding_size": 8,
                                              "hidden_sizes": [16, 12], "dropout": 0.3},
                                    "data": vars(config.data), "training": vars(config.training),
                                    "output_dir": config.output_dir}))
    assert main(["-q", "train", "--config", str(path), "--threads", "1"]) == 0
    out = Path(config.output_dir)
    checkpoint = torch.load(out / CHECKPOINT, weights_only=True)
    history = [entry["valid_ppl"] for entry in checkpoint["progress"]["history"]]
    assert len(history) == 3 and min(history) < history[0]
    net, vocab = load_cslm_net(out)
    assert vocab.tokens == Vocabulary.load(out / VOCAB).tokens and "dog" in vocab and "girl" not in vocab
    feature = build_feature({"kind": "cslm", "model": str(out), "lm": str(arpa)})
    assert (feature.name, feature.dims, feature.needs_source) == ("CSLM0", 1, False)
    pairs = [([], "a dog runs in the park".split()), (["x"], "park the in runs dog a".split())]
    values = feature.score(pairs)
    assert values.shape == (2, 1) and np.all(values < 0) and values[0, 0] > values[1, 0]
    # float16 weights load as float32 with the same scores to float16's precision
    save_state({"model": {k: v.half() for k, v in net.state_dict().items()}}, out / WEIGHTS)
    half = build_feature({"kind": "cslm", "model": str(out), "lm": str(arpa), "name": "CSLM1"})
    np.testing.assert_allclose(half.score(pairs), values, atol=0.05)
