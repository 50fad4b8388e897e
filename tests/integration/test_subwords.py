"""Subword models (model.subwords, BPE and unigram) beside word models: trained from text prepared with
sentencepiece, they read and write Moses tokens in every command that takes a model (scores summed over
pieces, translations joined back into tokens, attention summed back onto tokens), and a model directory
whose subword model is not its vocabulary's is refused."""

from __future__ import annotations

import gzip
import json
import math
import shutil
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import torch
import yaml

from rerank.cli import main
from rerank.formats.nbest import read_nbest
from rerank.models.batching import pad, to_ids
from rerank.models.checkpoint import load_model
from rerank.models.subwords import TRG_SUBWORDS, SubwordVocabulary
from rerank.search.alignment import attention_weights
from rerank.search.beam import SearchConfig

pytest.importorskip("sentencepiece", reason="sentencepiece is not installed (pip install -e . installs it)")


@pytest.fixture(autouse=True)
def keep_threads() -> Iterator[None]:
    threads = torch.get_num_threads()
    yield
    torch.set_num_threads(threads)


def corpus(tmp_path: Path, test_data: Path) -> tuple[Path, Path]:
    """The 40 pairs of the Multi30k slices, 10 times."""
    paths = tmp_path / "train.en", tmp_path / "train.fr"
    for path, language in zip(paths, ("en", "fr"), strict=True):
        lines = [line for part in ("val", "test") for line in
                 (test_data / "multi30k" / f"{part}.{language}").read_text().splitlines()]
        path.write_text("\n".join(lines * 10) + "\n")
    return paths


def train(tmp_path: Path, test_data: Path, subwords: dict[str, object] | None, name: str) -> Path:
    source, target = corpus(tmp_path, test_data)
    model = {"architecture": "rnnsearch", "embedding_size": 12, "hidden_size": 16, "maxout_size": 8,
             "attention": {"hidden_size": 16}}
    if subwords is not None:
        model["subwords"] = subwords
    config = {
        "model": model,
        "data": {"train": {"source": str(source), "target": str(target)},
                 "valid": {"source": str(test_data / "multi30k" / "val.en"),
                           "target": str(test_data / "multi30k" / "val.fr")},
                 "src_vocab_size": 200, "trg_vocab_size": 200},
        "training": {"optimizer": "adam", "learning_rate": 0.01, "batch_size": 20, "max_updates": 6,
                     "valid_every": 6, "threads": 1},
        "output_dir": str(tmp_path / name),
    }
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(config))
    assert main(["-q", "train", "--config", str(path)]) == 0
    return tmp_path / name


KINDS = [None, {"kind": "sentencepiece", "type": "bpe", "vocab_size": 400},
         {"kind": "sentencepiece", "type": "unigram", "vocab_size": 400}]


@pytest.fixture(scope="module", params=KINDS, ids=["words", "bpe", "unigram"])
def model_dir(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Path:
    from conftest import TEST_DATA

    return train(tmp_path_factory.mktemp("subwords"), TEST_DATA, request.param, "model")


def test_a_subword_model_spells_every_token_and_gives_it_back(model_dir: Path, test_data: Path) -> None:
    loaded = load_model(model_dir)
    if loaded.config.subwords is None:
        assert not isinstance(loaded.trg_vocab, SubwordVocabulary)
        return
    assert isinstance(loaded.src_vocab, SubwordVocabulary) and isinstance(loaded.trg_vocab, SubwordVocabulary)
    assert (model_dir / TRG_SUBWORDS).exists()
    lines = (test_data / "multi30k" / "test.fr").read_text().splitlines() + ["un zèbre ẞ <unk> ||| 東京"]
    for line in lines:
        pieces = loaded.trg_vocab.encode(line.split())
        assert loaded.trg_vocab.words(pieces) == line.split()
    assert max(len(loaded.trg_vocab.encode(line.split())) - len(line.split()) for line in lines) > 0  # pieces


def test_scores_are_the_sum_over_the_pieces_of_each_hypothesis(model_dir: Path, test_data: Path,
                                                               tmp_path: Path) -> None:
    config = tmp_path / "features.yaml"
    config.write_text(yaml.safe_dump({"features": [{"kind": "nmt", "model": str(model_dir), "name": "NMT0"}]}))
    out = tmp_path / "scored.nbest"
    nbest = test_data / "toy.nbest"
    assert main(["-q", "score-nbest", str(nbest), "--source", str(test_data / "toy.en"), "--config", str(config),
                 "-o", str(out)]) == 0
    loaded = load_model(model_dir)
    sources = (test_data / "toy.en").read_text().splitlines()
    for entry in read_nbest(out):
        src, src_len = pad(to_ids([sources[entry.sentence_id].split()], loaded.src_vocab))
        trg, _ = pad(to_ids([entry.tokens], loaded.trg_vocab))
        with torch.inference_mode():
            expected = float(loaded.model.score(loaded.model.encode(src, src_len), trg).sum())
        [value] = entry.dense[entry.layout.offsets()["NMT0"]]
        assert math.isclose(value, expected, rel_tol=1e-4, abs_tol=1e-3)


def test_translations_and_alignments_are_on_moses_tokens(model_dir: Path, test_data: Path, tmp_path: Path) -> None:
    source = test_data / "toy.en"
    out, nbest, alignments, attention = (tmp_path / name for name in ("out", "nbest", "align", "attention.jsonl"))
    assert main(["-q", "translate", "--model", str(model_dir), "-i", str(source), "-o", str(out), "--beam", "3",
                 "--alignments", str(alignments), "--attention", str(attention)]) == 0
    assert main(["-q", "translate", "--model", str(model_dir), "-i", str(source), "-o", str(nbest), "--beam", "3",
                 "--nbest", "3"]) == 0
    loaded = load_model(model_dir)
    translations = out.read_text().splitlines()
    sources = source.read_text().splitlines()
    assert len(translations) == 3 and not any("\u2581" in line for line in translations)
    firsts = {e.sentence_id: e.tokens for e in reversed(list(read_nbest(nbest)))}
    assert [firsts[i] for i in range(3)] == [t.split() for t in translations]
    for src, translation, line, record in zip(sources, translations, alignments.read_text().splitlines(),
                                              attention.read_text().splitlines(), strict=True):
        weights = np.array(json.loads(record)["attention"])
        assert weights.shape == (len(translation.split()) + 1, len(src.split()) + 1)
        assert np.allclose(weights.sum(1), 1, atol=1e-3)
        for pair in line.split():
            i, j = map(int, pair.split("-"))
            assert i < len(src.split()) and j < len(translation.split())
    target = "un homme avec un chapeau".split()
    aligned = attention_weights(loaded, sources[0].split(), target, SearchConfig(beam_size=2))
    assert aligned.weights.shape == (len(target) + 1, len(sources[0].split()) + 1)


def test_a_subword_model_that_is_not_the_vocabularys_is_refused(tmp_path: Path, test_data: Path,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    bpe = train(tmp_path, test_data, KINDS[1], "bpe")
    unigram = train(tmp_path, test_data, KINDS[2], "unigram")
    shutil.copyfile(unigram / TRG_SUBWORDS, bpe / TRG_SUBWORDS)
    capsys.readouterr()
    assert main(["-q", "translate", "--model", str(bpe), "-i", str(test_data / "toy.en"),
                 "-o", str(tmp_path / "out")]) == 2
    assert f"{bpe / TRG_SUBWORDS}: refused: its pieces are not those of {bpe / 'vocab.trg.txt'}" in \
        capsys.readouterr().err


def test_a_phrase_pairs_probability_is_the_product_over_its_pieces(model_dir: Path, test_data: Path,
                                                                   tmp_path: Path) -> None:
    table = tmp_path / "table"
    table.write_text("\n".join(gzip.decompress((test_data / "multi30k" / "phrase-table.gz").read_bytes())
                               .decode().splitlines()[:40]) + "\n")
    out = tmp_path / "scored"
    assert main(["-q", "score-table", str(table), "-o", str(out), "--model", str(model_dir)]) == 0
    loaded = load_model(model_dir)
    for line in out.read_text().splitlines():
        source, target, scores = (field.strip() for field in line.split(" ||| ")[:3])
        src, src_len = pad(to_ids([source.split()], loaded.src_vocab))
        trg, _ = pad(to_ids([target.split()], loaded.trg_vocab))
        with torch.inference_mode():
            log_p = float(loaded.model.score(loaded.model.encode(src, src_len), trg).sum())
        written = float(scores.split()[-1])
        if log_p > -80:  # far above float32's smallest numbers
            assert math.isclose(written, math.exp(log_p), rel_tol=1e-3)
        else:
            assert written < 1e-30


def test_a_failed_sentencepiece_training_names_the_text_it_learnt_from(tmp_path: Path,
                                                                       capsys: pytest.CaptureFixture[str]) -> None:
    """More distinct characters than pieces: sentencepiece refuses, and the one line names the target file and
    sentencepiece's reason, not the temporary directory's model file (removed with it); nothing is left."""
    source, target = tmp_path / "train.en", tmp_path / "train.zh"
    source.write_text("a b c\n")
    target.write_text("".join(chr(0x4E00 + i) for i in range(400)) + "\n")
    code = main(["prepare", str(source), str(target), "-o", str(tmp_path / "prepared"), "--subwords", "bpe",
                 "--subword-vocab-size", "300"])
    err = capsys.readouterr().err
    assert code == 2 and err.splitlines() == [
        f"rerank: error: {target}: sentencepiece could not learn 300 bpe subword units from a sample of 1 line: "
        "Vocabulary size is smaller than required_chars. 300 vs 661. Increase vocab_size or decrease "
        "character_coverage with --character_coverage option."]
    assert sorted(path.name for path in tmp_path.iterdir()) == ["train.en", "train.zh"]
