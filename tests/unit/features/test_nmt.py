"""The ``nmt`` feature: its labels, its values (ln p of each hypothesis), its config errors, and its use by
``rerank score-nbest`` on real Moses n-best lines."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
import yaml
from tiny_models import save_model_dir, tiny_config, tiny_model

from rerank.cli import main
from rerank.errors import ConfigError, RerankError
from rerank.features.registry import build_feature, build_features
from rerank.formats.nbest import read_nbest
from rerank.models.vocab import Vocabulary
from rerank.scoring.pairs import Scorer


def model_dir(directory: Path, test_data: Path, architecture: str) -> Path:
    """A random model whose vocabularies are the words of the toy source and n-best list."""
    src_vocab = Vocabulary.build([line.split() for line in (test_data / "toy.en").read_text().splitlines()], 100)
    trg_vocab = Vocabulary.build([entry.tokens for entry in read_nbest(test_data / "toy.nbest")], 100)
    model = tiny_model(tiny_config(architecture), len(src_vocab), len(trg_vocab), dtype=torch.float32)
    return save_model_dir(directory / architecture, model, src_vocab, trg_vocab)


@pytest.fixture(scope="module")
def models(test_data: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    directory = tmp_path_factory.mktemp("models")
    return {architecture: model_dir(directory, test_data, architecture) for architecture in ("encdec", "rnnsearch")}


@pytest.mark.parametrize("architecture,label", [("encdec", "RNN0"), ("rnnsearch", "RNNsearch0")])
def test_default_labels_follow_the_architecture(models: dict[str, Path], architecture: str, label: str) -> None:
    feature = build_feature({"kind": "nmt", "model": str(models[architecture])})
    assert (feature.name, feature.dims, feature.needs_source) == (label, 1, True)
    assert build_feature({"kind": "nmt", "model": str(models[architecture]), "name": "NMT2"}).name == "NMT2"


def test_values_are_the_scorers_log_probabilities(models: dict[str, Path]) -> None:
    pairs = [("a man".split(), "un homme .".split()), ("a man".split(), "un homme".split()),
             ("a girl .".split(), "une fille .".split())]
    feature = build_feature({"kind": "nmt", "model": str(models["rnnsearch"]), "max_tokens": 4, "window": 2})
    values = feature.score(pairs)
    assert values.shape == (3, 1) and values.dtype == np.float64
    np.testing.assert_allclose(values[:, 0], list(Scorer.load(models["rnnsearch"]).score(pairs)), rtol=1e-6)


def test_precision_int8_scores_near_fp32(models: dict[str, Path]) -> None:
    pairs = [("a man".split(), "un homme .".split()), ("a girl .".split(), "une fille .".split())]
    fp32 = build_feature({"kind": "nmt", "model": str(models["rnnsearch"])}).score(pairs)
    int8 = build_feature({"kind": "nmt", "model": str(models["rnnsearch"]), "precision": "int8"}).score(pairs)
    assert not np.array_equal(int8, fp32)
    # 0.1 nats per token (see tests/unit/models/test_int8_against_fp32.py)
    np.testing.assert_allclose(int8, fp32, rtol=0, atol=0.1 * 4)


def test_config_errors(models: dict[str, Path], tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="max_tokens must be at least 1"):
        build_feature({"kind": "nmt", "model": str(models["encdec"]), "max_tokens": 0})
    with pytest.raises(ConfigError, match="label 'RNN_0'"):
        build_feature({"kind": "nmt", "model": str(models["encdec"]), "name": "RNN_0"})
    with pytest.raises(ConfigError, match="missing required key 'nmt.model'"):
        build_feature({"kind": "nmt"})
    with pytest.raises(RerankError, match="not a model directory"):
        build_feature({"kind": "nmt", "model": str(tmp_path)})
    with pytest.raises(ConfigError, match="used twice: RNN0"):
        build_features([{"kind": "nmt", "model": str(models["encdec"])}] * 2)
    with pytest.raises(ConfigError, match="precision: fp32 or int8, not 'int4'"):
        build_feature({"kind": "nmt", "model": str(models["encdec"]), "precision": "int4"})


def test_score_nbest_appends_both_models(models: dict[str, Path], test_data: Path, tmp_path: Path,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    config = tmp_path / "rescore.yaml"
    config.write_text(yaml.safe_dump({"features": [{"kind": "nmt", "model": str(models["encdec"])},
                                                   {"kind": "nmt", "model": str(models["rnnsearch"])}]}))
    out = tmp_path / "scored.nbest"
    code = main(["score-nbest", str(test_data / "toy.nbest"), "--source", str(test_data / "toy.en"),
                 "--config", str(config), "-o", str(out)])
    assert code == 0, capsys.readouterr().err
    entries = list(read_nbest(out))
    assert entries[0].layout.labels[-2:] == ("RNN0", "RNNsearch0")
    sources = (test_data / "toy.en").read_text().splitlines()
    pairs = [(sources[e.sentence_id].split(), e.tokens) for e in entries]
    for column, architecture in ((-2, "encdec"), (-1, "rnnsearch")):
        expected = list(Scorer.load(models[architecture]).score(pairs))
        np.testing.assert_allclose([e.dense[column] for e in entries], expected, rtol=1e-5, atol=1e-4)
