"""A model with every option of the recipe, trained end to end from text with a joint BPE vocabulary:
its scores are per Moses hypothesis (the sum over its pieces of the model's ln p, never the smoothed
loss), its averaged checkpoints make a model that scores and translates, and a run with tied source and
target embeddings on two vocabularies is refused before training."""

from __future__ import annotations

import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch
import yaml

from rerank.cli import main
from rerank.formats.nbest import read_nbest
from rerank.models.batching import pad, to_ids
from rerank.models.checkpoint import load_model
from rerank.models.seq2seq import token_log_probs


@pytest.fixture(autouse=True)
def keep_threads() -> Iterator[None]:
    threads = torch.get_num_threads()
    yield
    torch.set_num_threads(threads)


def write_config(tmp_path: Path, test_data: Path, name: str, joint: bool = True) -> Path:
    paths = tmp_path / "train.en", tmp_path / "train.fr"
    for path, language in zip(paths, ("en", "fr"), strict=True):
        lines = [line for part in ("val", "test") for line in
                 (test_data / "multi30k" / f"{part}.{language}").read_text().splitlines()]
        path.write_text("\n".join(lines * 10) + "\n")
    config: dict[str, Any] = {
        "model": {"architecture": "rnnsearch", "embedding_size": 12, "hidden_size": 16, "maxout_size": 12,
                  "attention": {"hidden_size": 16}, "embedding_dropout": 0.1, "hidden_dropout": 0.2,
                  "word_dropout": 0.1, "layer_norm": True, "transition_depth": 2, "tie_target_embeddings": True,
                  "tie_source_target_embeddings": True,
                  "subwords": {"type": "bpe", "vocab_size": 500, "joint": joint}},
        "data": {"train": {"source": str(paths[0]), "target": str(paths[1])},
                 "valid": {"source": str(test_data / "multi30k" / "val.en"),
                           "target": str(test_data / "multi30k" / "val.fr")}},
        "training": {"optimizer": "adam", "learning_rate": 0.01, "batch_size": 20, "max_updates": 6,
                     "valid_every": 2, "threads": 1, "warmup_updates": 3, "label_smoothing": 0.1,
                     "keep_checkpoints": 2},
        "output_dir": str(tmp_path / name),
    }
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


def test_a_recipe_model_scores_each_hypothesis_as_the_sum_over_its_pieces(tmp_path: Path, test_data: Path) -> None:
    assert main(["-q", "train", "--config", str(write_config(tmp_path, test_data, "model"))]) == 0
    model_dir = tmp_path / "model"
    loaded = load_model(model_dir)
    assert loaded.src_vocab.tokens == loaded.trg_vocab.tokens
    model = loaded.model
    assert model.encoder.embed.lookup.weight is model.embed.lookup.weight is model.output_layer.weight  # type: ignore[union-attr]
    features = tmp_path / "features.yaml"
    features.write_text(yaml.safe_dump({"features": [{"kind": "nmt", "model": str(model_dir), "name": "NMT0"}]}))
    out = tmp_path / "scored.nbest"
    assert main(["-q", "score-nbest", str(test_data / "toy.nbest"), "--source", str(test_data / "toy.en"),
                 "--config", str(features), "-o", str(out)]) == 0
    sources = (test_data / "toy.en").read_text().splitlines()
    entries = list(read_nbest(out))
    assert any(len(loaded.trg_vocab.encode(entry.tokens)) > len(entry.tokens) for entry in entries)  # pieces
    for entry in entries:
        src, src_len = pad(to_ids([sources[entry.sentence_id].split()], loaded.src_vocab))
        trg, _ = pad(to_ids([entry.tokens], loaded.trg_vocab))
        with torch.inference_mode():
            logits = model.logits(src, src_len, trg)
        expected = float(token_log_probs(logits, trg).sum())  # the model's ln p of every piece, and </s>
        [value] = entry.dense[entry.layout.offsets()["NMT0"]]
        assert math.isclose(value, expected, rel_tol=1e-4, abs_tol=1e-3)
    assert main(["-q", "average", str(model_dir), str(tmp_path / "averaged"), "--last", "2"]) == 0
    translation = tmp_path / "out"
    assert main(["-q", "translate", "--model", str(tmp_path / "averaged"), "-i", str(test_data / "toy.en"),
                 "-o", str(translation), "--beam", "2"]) == 0
    assert len(translation.read_text().splitlines()) == len(sources)


def test_tied_source_and_target_embeddings_without_a_joint_vocabulary_are_refused(tmp_path: Path,
                                                                                   test_data: Path) -> None:
    assert main(["-q", "train", "--config", str(write_config(tmp_path, test_data, "two", joint=False))]) == 2
    assert not (tmp_path / "two" / "model.pt").exists()
