"""The ``nmt`` feature: its labels, its values (ln p of each hypothesis), its config errors, and its use by
``rerank score-nbest`` on real Moses n-best lines."""


from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest
import torch
import yaml
from tiny_models import save_model_dir, tiny_config, tiny_model

from rerank.cli import main
from rerank.errors import ConfigError, RerankError
from rerank.features.nmt import CHANNEL_LABEL, NeuralTranslationModel
from rerank.features.registry import build_feature, build_features
from rerank.formats.nbest import read_nbest
from rerank.models.batching import pad, to_ids
from rerank.models.checkpoint import load_model
from rerank.models.config import ModelConfig
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


PAIRS = [("a man in an orange hat".split(), "un homme avec un chapeau orange".split()),
         ("a man in an orange hat".split(), "un homme .".split()),
         ("a zebra .".split(), "un zèbre .".split()),
         ("a girl".split(), []),
         ("a girl".split(), "une fille".split())]


def save(directory: Path, config: ModelConfig, src: Vocabulary, trg: Vocabulary, seed: int) -> Path:
    model = tiny_model(config, len(src), len(trg), seed=seed, dtype=torch.float32)
    return save_model_dir(directory, model, src, trg)


@pytest.fixture(scope="module")
def variants(test_data: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Random models over the toy data's words: two RNNsearch seeds, an encoder-decoder, a right-to-left RNNsearch
    and a French-to-English channel model."""
    english = Vocabulary.build([line.split() for line in (test_data / "toy.en").read_text().splitlines()], 100)
    french = Vocabulary.build([entry.tokens for entry in read_nbest(test_data / "toy.nbest")], 100)
    out = tmp_path_factory.mktemp("models")
    rnnsearch = tiny_config("rnnsearch")
    return {"rnnsearch": save(out / "rnnsearch", rnnsearch, english, french, 0),
            "rnnsearch-seed1": save(out / "rnnsearch-seed1", rnnsearch, english, french, 1),
            "encdec": save(out / "encdec", tiny_config("encdec"), english, french, 2),
            "right_to_left": save(out / "r2l", dataclasses.replace(rnnsearch, reverse_target=True), english, french,
                                  3),
            "channel": save(out / "channel", rnnsearch, french, english, 4)}


def own_log_probs(directory: Path, pairs: Sequence[tuple[Sequence[str], Sequence[str]]],
                  reverse: bool = False) -> list[float]:
    """ln p(target | source) of each pair, ``</s>`` included, as −(the model's training loss) of that pair alone."""
    loaded = load_model(directory)
    values = []
    with torch.no_grad():
        for source, target in pairs:
            src, src_len = pad(to_ids([source], loaded.src_vocab))
            trg, _ = pad(to_ids([list(target)[::-1] if reverse else target], loaded.trg_vocab))
            values.append(-float(loaded.model(src, src_len, trg)))
    return values


def feature(**settings: object) -> NeuralTranslationModel:
    return NeuralTranslationModel(NeuralTranslationModel.Config(**settings))  # type: ignore[arg-type]


def test_values_are_the_models_own_log_probabilities(variants: dict[str, Path]) -> None:
    for name in ("rnnsearch", "encdec"):
        values = feature(model=str(variants[name]), max_tokens=8, window=2).score(PAIRS)
        assert values.shape == (len(PAIRS), 1) and values.dtype == np.float64
        np.testing.assert_allclose(values[:, 0], own_log_probs(variants[name], PAIRS), rtol=1e-5, atol=1e-5)


def test_an_ensemble_scores_the_mean_of_its_models(variants: dict[str, Path]) -> None:
    ensemble = feature(model=(str(variants["rnnsearch"]), str(variants["rnnsearch-seed1"])), name="Ens0")
    assert (ensemble.name, ensemble.dims, ensemble.needs_source) == ("Ens0", 1, True)
    assert len(ensemble.scorers) == 2
    mean = (np.array(own_log_probs(variants["rnnsearch"], PAIRS)) +
            np.array(own_log_probs(variants["rnnsearch-seed1"], PAIRS))) / 2
    np.testing.assert_allclose(ensemble.score(PAIRS)[:, 0], mean, rtol=1e-5, atol=1e-5)


def test_a_right_to_left_model_reads_the_hypothesis_backwards(variants: dict[str, Path]) -> None:
    r2l = feature(model=str(variants["right_to_left"]))
    assert r2l.name == "R2L0"
    expected = own_log_probs(variants["right_to_left"], PAIRS, reverse=True)
    np.testing.assert_allclose(r2l.score(PAIRS)[:, 0], expected, rtol=1e-5, atol=1e-5)
    assert not np.allclose(expected, own_log_probs(variants["right_to_left"], PAIRS))  # the direction matters


def test_a_channel_model_scores_the_source_given_the_hypothesis(variants: dict[str, Path]) -> None:
    channel = feature(model=str(variants["channel"]), channel=True)
    assert channel.name == CHANNEL_LABEL == "Chan0"
    expected = own_log_probs(variants["channel"], [(hypothesis, source) for source, hypothesis in PAIRS])
    np.testing.assert_allclose(channel.score(PAIRS)[:, 0], expected, rtol=1e-5, atol=1e-5)


def test_per_word_follows_the_sum_or_stands_alone(variants: dict[str, Path]) -> None:
    total = np.array(own_log_probs(variants["rnnsearch"], PAIRS))
    tokens = np.array([len(hypothesis) + 1 for _, hypothesis in PAIRS])  # </s> is predicted too
    both = feature(model=str(variants["rnnsearch"]), per_word=True)
    assert both.dims == 2
    np.testing.assert_allclose(both.score(PAIRS), np.stack([total, total / tokens], axis=1), rtol=1e-5, atol=1e-5)
    alone = feature(model=str(variants["rnnsearch"]), per_word=True, sum=False)
    assert alone.dims == 1
    np.testing.assert_allclose(alone.score(PAIRS)[:, 0], total / tokens, rtol=1e-5, atol=1e-5)


def test_labels_come_from_the_model_without_loading_it(variants: dict[str, Path]) -> None:
    label = NeuralTranslationModel.label
    Config = NeuralTranslationModel.Config
    assert label(Config(model=str(variants["encdec"]))) == "RNN0"
    assert label(Config(model=(str(variants["rnnsearch"]), str(variants["encdec"])))) == "RNNsearch0"  # the first
    assert label(Config(model=str(variants["right_to_left"]))) == "R2L0"
    assert label(Config(model=str(variants["encdec"]), channel=True)) == "Chan0"
    assert label(Config(model=str(variants["encdec"]), name="NMT7")) == "NMT7"
    assert Config(model="one").models == ("one",) and Config(model=("a", "b")).models == ("a", "b")


def test_an_ensemble_of_both_directions_is_refused(variants: dict[str, Path]) -> None:
    with pytest.raises(ConfigError) as error:
        feature(model=(str(variants["rnnsearch"]), str(variants["right_to_left"])))
    assert str(error.value) == (f"nmt feature: {variants['right_to_left']} and {variants['rnnsearch']} read targets in "
                                "different directions: an ensemble's models must agree")


@pytest.mark.parametrize("settings,message", [
    ({"model": ()}, "model: name at least one model directory"),
    ({"model": "m", "precision": "fp16"}, "precision: fp32 or int8, not 'fp16'"),
    ({"model": "m", "sum": False}, "sum: false leaves no value: give per_word: true with it"),
])
def test_config_values_that_leave_no_feature(settings: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError) as error:
        NeuralTranslationModel.Config(**settings)  # type: ignore[arg-type]
    assert str(error.value) == message


def test_a_bad_scoring_size_names_the_models(variants: dict[str, Path]) -> None:
    with pytest.raises(ConfigError) as error:
        feature(model=str(variants["encdec"]), window=0)
    assert str(error.value) == f"nmt feature ({variants['encdec']}): window must be at least 1, got 0"
