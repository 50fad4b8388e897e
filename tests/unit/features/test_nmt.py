"""The nmt feature's values against each model's own training loss (−Σ ln p, an independent forward pass): one
model, an ensemble (the mean), a right-to-left model (the target read backwards), a channel model (ln p(source |
hypothesis)), the per-word value; its default labels, and the config errors it refuses."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest
import torch
from tiny_models import save_model_dir, tiny_config, tiny_model

from rerank.errors import ConfigError
from rerank.features.nmt import CHANNEL_LABEL, NeuralTranslationModel
from rerank.formats.nbest import read_nbest
from rerank.models.batching import pad, to_ids
from rerank.models.checkpoint import load_model
from rerank.models.config import ModelConfig
from rerank.models.vocab import Vocabulary

# (source words, hypothesis words); "zebra" and "zèbre" are outside the vocabularies
PAIRS = [("a man in an orange hat".split(), "un homme avec un chapeau orange".split()),
         ("a man in an orange hat".split(), "un homme .".split()),
         ("a zebra .".split(), "un zèbre .".split()),
         ("a girl".split(), []),
         ("a girl".split(), "une fille".split())]


def save(directory: Path, config: ModelConfig, src: Vocabulary, trg: Vocabulary, seed: int) -> Path:
    model = tiny_model(config, len(src), len(trg), seed=seed, dtype=torch.float32)
    return save_model_dir(directory, model, src, trg)


@pytest.fixture(scope="module")
def models(test_data: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
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


def test_values_are_the_models_own_log_probabilities(models: dict[str, Path]) -> None:
    for name in ("rnnsearch", "encdec"):
        values = feature(model=str(models[name]), max_tokens=8, window=2).score(PAIRS)
        assert values.shape == (len(PAIRS), 1) and values.dtype == np.float64
        np.testing.assert_allclose(values[:, 0], own_log_probs(models[name], PAIRS), rtol=1e-5, atol=1e-5)


def test_an_ensemble_scores_the_mean_of_its_models(models: dict[str, Path]) -> None:
    ensemble = feature(model=(str(models["rnnsearch"]), str(models["rnnsearch-seed1"])), name="Ens0")
    assert (ensemble.name, ensemble.dims, ensemble.needs_source) == ("Ens0", 1, True)
    assert len(ensemble.scorers) == 2
    mean = (np.array(own_log_probs(models["rnnsearch"], PAIRS)) +
            np.array(own_log_probs(models["rnnsearch-seed1"], PAIRS))) / 2
    np.testing.assert_allclose(ensemble.score(PAIRS)[:, 0], mean, rtol=1e-5, atol=1e-5)


def test_a_right_to_left_model_reads_the_hypothesis_backwards(models: dict[str, Path]) -> None:
    r2l = feature(model=str(models["right_to_left"]))
    assert r2l.name == "R2L0"
    expected = own_log_probs(models["right_to_left"], PAIRS, reverse=True)
    np.testing.assert_allclose(r2l.score(PAIRS)[:, 0], expected, rtol=1e-5, atol=1e-5)
    assert not np.allclose(expected, own_log_probs(models["right_to_left"], PAIRS))  # the direction matters


def test_a_channel_model_scores_the_source_given_the_hypothesis(models: dict[str, Path]) -> None:
    channel = feature(model=str(models["channel"]), channel=True)
    assert channel.name == CHANNEL_LABEL == "Chan0"
    expected = own_log_probs(models["channel"], [(hypothesis, source) for source, hypothesis in PAIRS])
    np.testing.assert_allclose(channel.score(PAIRS)[:, 0], expected, rtol=1e-5, atol=1e-5)


def test_per_word_follows_the_sum_or_stands_alone(models: dict[str, Path]) -> None:
    total = np.array(own_log_probs(models["rnnsearch"], PAIRS))
    tokens = np.array([len(hypothesis) + 1 for _, hypothesis in PAIRS])  # </s> is predicted too
    both = feature(model=str(models["rnnsearch"]), per_word=True)
    assert both.dims == 2
    np.testing.assert_allclose(both.score(PAIRS), np.stack([total, total / tokens], axis=1), rtol=1e-5, atol=1e-5)
    alone = feature(model=str(models["rnnsearch"]), per_word=True, sum=False)
    assert alone.dims == 1
    np.testing.assert_allclose(alone.score(PAIRS)[:, 0], total / tokens, rtol=1e-5, atol=1e-5)


def test_labels_come_from_the_model_without_loading_it(models: dict[str, Path]) -> None:
    label = NeuralTranslationModel.label
    Config = NeuralTranslationModel.Config
    assert label(Config(model=str(models["encdec"]))) == "RNN0"
    assert label(Config(model=(str(models["rnnsearch"]), str(models["encdec"])))) == "RNNsearch0"  # the first
    assert label(Config(model=str(models["right_to_left"]))) == "R2L0"
    assert label(Config(model=str(models["encdec"]), channel=True)) == "Chan0"
    assert label(Config(model=str(models["encdec"]), name="NMT7")) == "NMT7"
    assert Config(model="one").models == ("one",) and Config(model=("a", "b")).models == ("a", "b")


def test_an_ensemble_of_both_directions_is_refused(models: dict[str, Path]) -> None:
    with pytest.raises(ConfigError) as error:
        feature(model=(str(models["rnnsearch"]), str(models["right_to_left"])))
    assert str(error.value) == (f"nmt feature: {models['right_to_left']} and {models['rnnsearch']} read targets in "
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


def test_a_bad_scoring_size_names_the_models(models: dict[str, Path]) -> None:
    with pytest.raises(ConfigError) as error:
        feature(model=str(models["encdec"]), window=0)
    assert str(error.value) == f"nmt feature ({models['encdec']}): window must be at least 1, got 0"
