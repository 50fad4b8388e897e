"""Right-to-left models, channel models, ensembles and per-word scores: each is what it claims to be,
in training, in forced decoding (the ``nmt`` feature) and in search (``rerank translate``)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest
import torch
import yaml
from tiny_models import save_model_dir, search_ids, taught_model, tiny_config, tiny_model

from rerank.cli import main
from rerank.errors import ConfigError, RerankError
from rerank.features.registry import build_feature
from rerank.models.architectures import build_model
from rerank.models.checkpoint import WEIGHTS, load_model, load_state
from rerank.models.ensemble import ensemble
from rerank.models.vocab import Vocabulary
from rerank.scoring.pairs import Scorer

WORDS = "a b c d e f g h".split()
PAIRS = [("a b c".split(), "d e f g".split()), ("a b c".split(), "d e".split()), ("h g".split(), "f".split()),
         ("b".split(), "h h a".split())]


def vocabulary() -> Vocabulary:
    return Vocabulary.build([WORDS], 100)


def model_dir(directory: Path, seed: int = 0, reverse: bool = False) -> Path:
    vocab = vocabulary()
    config = dataclasses.replace(tiny_config("rnnsearch"), reverse_target=reverse)
    model = tiny_model(config, len(vocab), len(vocab), seed=seed, dtype=torch.float32)
    return save_model_dir(directory, model, vocab, vocab)


def reversed_twin(directory: Path, out: Path) -> Path:
    """The model of ``directory`` with its targets read right to left: the same weights."""
    loaded = load_model(directory)
    twin = build_model(dataclasses.replace(loaded.config, reverse_target=True), len(loaded.src_vocab),
                       len(loaded.trg_vocab))
    twin.load_state_dict(loaded.model.state_dict())
    return save_model_dir(out, twin, loaded.src_vocab, loaded.trg_vocab)


def nmt(**config: object) -> np.ndarray:
    return build_feature({"kind": "nmt", **config}).score(PAIRS)


def test_a_right_to_left_model_scores_the_reversed_target(tmp_path: Path) -> None:
    forward = model_dir(tmp_path / "l2r")
    backward = reversed_twin(forward, tmp_path / "r2l")
    reversed_pairs = [(source, target[::-1]) for source, target in PAIRS]
    np.testing.assert_allclose(list(Scorer.load(backward).score(PAIRS)),
                               list(Scorer.load(forward).score(reversed_pairs)), rtol=1e-6)
    feature = build_feature({"kind": "nmt", "model": str(backward)})
    assert feature.name == "R2L0"


def write_corpus(directory: Path, reverse: bool) -> dict[str, str]:
    directory.mkdir(parents=True, exist_ok=True)
    sources = [" ".join(s) for s, _ in PAIRS] * 3
    targets = [" ".join(t[::-1] if reverse else t) for _, t in PAIRS] * 3
    (directory / "src").write_text("\n".join(sources) + "\n")
    (directory / "trg").write_text("\n".join(targets) + "\n")
    return {"source": str(directory / "src"), "target": str(directory / "trg")}


@pytest.mark.usefixtures("keep_threads")
def test_training_right_to_left_is_training_on_reversed_targets(tmp_path: Path) -> None:
    """An R2L model trained on a corpus has the weights of a left-to-right model trained on the corpus
    with its targets reversed (same seed, same batches, dropout included)."""
    runs = {}
    for name, reverse_model, reverse_data in (("r2l", True, False), ("l2r", False, True)):
        corpus = write_corpus(tmp_path / f"data-{name}", reverse_data)
        config = {
            "model": {"architecture": "rnnsearch", "embedding_size": 8, "hidden_size": 8, "maxout_size": 4,
                      "attention": {"hidden_size": 8}, "dropout": 0.2, "reverse_target": reverse_model},
            "data": {"train": corpus, "valid": dict(corpus), "src_vocab_size": 50, "trg_vocab_size": 50},
            "training": {"optimizer": "adam", "learning_rate": 0.01, "batch_size": 4, "max_updates": 6,
                         "valid_every": 3, "threads": 1, "seed": 5},
            "output_dir": str(tmp_path / name),
        }
        path = tmp_path / f"{name}.yaml"
        path.write_text(yaml.safe_dump(config))
        assert main(["-q", "train", "--config", str(path)]) == 0
        runs[name] = load_state(tmp_path / name / WEIGHTS)["model"]
    assert runs["r2l"].keys() == runs["l2r"].keys()
    for key in runs["r2l"]:
        torch.testing.assert_close(runs["r2l"][key], runs["l2r"][key])


@pytest.fixture
def keep_threads() -> object:
    threads = torch.get_num_threads()
    yield
    torch.set_num_threads(threads)


def test_the_channel_scores_the_source_given_the_hypothesis(tmp_path: Path) -> None:
    model = model_dir(tmp_path / "fr-en")
    channel = build_feature({"kind": "nmt", "model": str(model), "channel": True})
    assert channel.name == "Chan0"
    swapped = [(target, source) for source, target in PAIRS]
    np.testing.assert_allclose(channel.score(PAIRS)[:, 0], list(Scorer.load(model).score(swapped)), rtol=1e-6)


def test_per_word_is_the_sum_over_predicted_tokens(tmp_path: Path) -> None:
    model = str(model_dir(tmp_path / "m"))
    values = nmt(model=model, per_word=True)
    assert values.shape == (len(PAIRS), 2)
    np.testing.assert_allclose(values[:, 0], nmt(model=model)[:, 0])
    np.testing.assert_allclose(values[:, 1], values[:, 0] / [len(t) + 1 for _, t in PAIRS])
    channel = nmt(model=model, channel=True, per_word=True)
    np.testing.assert_allclose(channel[:, 1], channel[:, 0] / [len(s) + 1 for s, _ in PAIRS])


def test_the_per_word_value_alone_is_one_value(tmp_path: Path) -> None:
    model = str(model_dir(tmp_path / "m"))
    alone = nmt(model=model, per_word=True, sum=False)
    assert alone.shape == (len(PAIRS), 1)
    np.testing.assert_allclose(alone[:, 0], nmt(model=model, per_word=True)[:, 1])
    with pytest.raises(ConfigError, match="sum: false leaves no value"):
        build_feature({"kind": "nmt", "model": model, "sum": False})


def test_an_ensemble_scores_the_mean_of_its_models(tmp_path: Path) -> None:
    first, second = str(model_dir(tmp_path / "a", seed=1)), str(model_dir(tmp_path / "b", seed=2))
    np.testing.assert_array_equal(nmt(model=[first]), nmt(model=first))
    np.testing.assert_allclose(nmt(model=[first, first]), nmt(model=first), rtol=1e-12)
    np.testing.assert_allclose(nmt(model=[first, second]), (nmt(model=first) + nmt(model=second)) / 2, rtol=1e-12)
    assert build_feature({"kind": "nmt", "model": [first, second]}).name == "RNNsearch0"


def test_an_ensemble_refuses_models_that_disagree(tmp_path: Path) -> None:
    forward = model_dir(tmp_path / "l2r")
    backward = reversed_twin(forward, tmp_path / "r2l")
    with pytest.raises(ConfigError, match="different directions"):
        build_feature({"kind": "nmt", "model": [str(forward), str(backward)]})
    with pytest.raises(ConfigError, match="at least one model"):
        build_feature({"kind": "nmt", "model": []})
    with pytest.raises(RerankError, match="cannot be searched as one"):
        ensemble([load_model(forward), load_model(backward)])
    other = Vocabulary.build([WORDS + ["z"]], 100)
    odd = tiny_model(tiny_config("rnnsearch"), len(other), len(other), dtype=torch.float32)
    save_model_dir(tmp_path / "odd", odd, other, other)
    with pytest.raises(RerankError, match="vocabulary differs"):
        ensemble([load_model(forward), load_model(tmp_path / "odd")])


SOURCES = [[4, 5, 6], [7, 8], [9, 10, 11, 12, 13]]


def test_a_right_to_left_search_writes_left_to_right(tmp_path: Path) -> None:
    """Decoding with an R2L model gives the reversed outputs of the same weights read left to right
    (the left-to-right twin's search over reversed targets is the same search)."""
    model = taught_model(tiny_config("rnnsearch"), updates=30)
    backward = build_model(dataclasses.replace(model.config, reverse_target=True), model.src_vocab_size,
                           model.trg_vocab_size).to(torch.float64).eval()
    backward.load_state_dict(model.state_dict())
    forward_outputs, backward_outputs = search_ids(model, SOURCES), search_ids(backward, SOURCES)
    for forward_hypotheses, backward_hypotheses in zip(forward_outputs, backward_outputs, strict=True):
        assert [tokens[::-1] for tokens, _ in forward_hypotheses] == [tokens for tokens, _ in backward_hypotheses]


def test_translate_with_an_ensemble_from_the_command_line(tmp_path: Path) -> None:
    first, second = model_dir(tmp_path / "a", seed=1), model_dir(tmp_path / "b", seed=2)
    source = tmp_path / "src"
    source.write_text("a b c\nh g\n")
    out = tmp_path / "out"
    assert main(["-q", "translate", "--model", str(first), str(second), "-i", str(source), "-o", str(out),
                 "--beam", "3", "--nbest", "2", "--max-ratio", "1.5"]) == 0
    lines = out.read_text().splitlines()
    assert len(lines) == 4 and all(" RNNsearch0= " in line for line in lines)
    pairs = [(line_source.split(), line.split(" ||| ")[1].split())
             for line_source, line in zip(["a b c", "a b c", "h g", "h g"], lines, strict=True)]
    feature = build_feature({"kind": "nmt", "model": [str(first), str(second)]})
    np.testing.assert_allclose(feature.score(pairs)[:, 0], [float(line.split(" ||| ")[3]) for line in lines],
                               atol=1e-4)
