"""training.subword_dropout (BPE-dropout, unigram sampling): 0 leaves the batches as they were; p > 0
segments words anew over an epoch while every pair still spells its own words, seeded by (seed, epoch,
batch, rank) so the same seed gives the same batches and a stopped run resumes to the same weights; a
sample longer than max_length keeps the fixed pieces; a word-level model is refused at config time (exit
status 2); a model trained with it loads and scores."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
import yaml

from rerank.cli import main
from rerank.config import ConfigError
from rerank.models.batching import pad, to_ids
from rerank.models.checkpoint import load_model, load_state
from rerank.models.config import SubwordConfig
from rerank.models.subwords import SubwordVocabulary
from rerank.models.vocab import EOS_ID
from rerank.training.config import load_train_config
from rerank.training.data import Batch
from rerank.training.prepare import PrepareSettings, prepare_parallel
from rerank.training.prepared import EpochPlan, PreparedCorpus
from rerank.training.subword_sampling import SubwordSampler
from rerank.training.trainer import Trainer

pytest.importorskip("sentencepiece", reason="sentencepiece is not installed (pip install -e . installs it)")

TEST_DATA = Path(__file__).resolve().parents[2] / "data"
KINDS = ["bpe", "unigram"]


@pytest.fixture(scope="module", params=KINDS)
def prepared(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The 40 pairs of the Multi30k slices 5 times, in pieces of a 300-piece model of each language."""
    tmp = tmp_path_factory.mktemp(request.param)
    paths = tmp / "train.en", tmp / "train.fr"
    for path, language in zip(paths, ("en", "fr"), strict=True):
        lines = [line for part in ("val", "test") for line in
                 (TEST_DATA / "multi30k" / f"{part}.{language}").read_text().splitlines()]
        path.write_text("\n".join(lines * 5) + "\n")
    settings = PrepareSettings(max_length=80, subwords=SubwordConfig(type=request.param, vocab_size=300))
    prepare_parallel(*paths, tmp / "prepared", settings)
    return tmp / "prepared"


def config(prepared: Path, output_dir: Path, dropout: float, **training: Any) -> Path:
    kind = PreparedCorpus(prepared, verify=False).manifest["settings"]["subwords"]["type"]
    data = {
        "model": {"architecture": "rnnsearch", "embedding_size": 8, "hidden_size": 8, "maxout_size": 4,
                  "attention": {"hidden_size": 8}, "dropout": 0.2,
                  "subwords": {"type": kind, "vocab_size": 300}},
        "data": {"prepared": str(prepared), "max_length": 80,
                 "valid": {"source": str(TEST_DATA / "toy.en"), "target": str(TEST_DATA / "toy.fr")}},
        "training": {"optimizer": "adam", "learning_rate": 0.01, "batch_size": 16, "max_updates": 2,
                     "valid_every": 2, "threads": 1, "subword_dropout": dropout, **training},
        "output_dir": str(output_dir),
    }
    path = output_dir.parent / f"{output_dir.name}.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def rows(ids: torch.Tensor, lengths: torch.Tensor) -> list[list[int]]:
    """The pieces of each row of a batch side, ``</s>`` last."""
    return [row[:n] for row, n in zip(ids.tolist(), lengths.tolist(), strict=True)]


def epoch(trainer: Trainer, number: int = 0) -> list[Batch]:
    plan = trainer.epoch_plan(number)
    return [trainer._batch(plan[b], (number, b))[0] for b in range(len(plan))]


def test_without_dropout_the_batches_are_the_prepared_ones(prepared: Path, tmp_path: Path) -> None:
    trainer = Trainer(load_train_config(config(prepared, tmp_path / "model", 0.0)))
    assert trainer.sampler is None
    plan = trainer.epoch_plan(0)
    for b, made in enumerate(epoch(trainer)):
        fixed = trainer.corpus.batch(plan[b])
        assert all(torch.equal(x, y) for x, y in zip(vars(made).values(), vars(fixed).values(), strict=True))


@pytest.mark.parametrize("reverse", [False, True])
def test_sampled_pieces_spell_the_same_words_and_differ_from_the_fixed_ones(prepared: Path, reverse: bool) -> None:
    corpus = PreparedCorpus(prepared)
    assert isinstance(corpus.src_vocab, SubwordVocabulary) and isinstance(corpus.trg_vocab, SubwordVocabulary)
    sampler = SubwordSampler(corpus.src_vocab, corpus.trg_vocab, 0.3, 80, seed=7)
    plan = EpochPlan(corpus, 16, 2, 1000, seed=7, epoch=0)
    changed = total = 0
    for b in range(len(plan)):
        fixed = corpus.batch(plan[b], reverse)
        sampled = sampler(fixed, (0, b, 0), reverse)
        for side, vocab, flip in (("src", corpus.src_vocab, False), ("trg", corpus.trg_vocab, reverse)):
            before = rows(getattr(fixed, side), getattr(fixed, f"{side}_len"))
            after = rows(getattr(sampled, side), getattr(sampled, f"{side}_len"))
            for old, new in zip(before, after, strict=True):
                assert new[-1] == EOS_ID and EOS_ID not in new[:-1] and len(new) <= 81
                assert vocab.words(new[-2::-1] if flip else new) == vocab.words(old[-2::-1] if flip else old)
                changed += new != old
                total += 1
    assert 0 < changed < total  # sampled anew, and not every sentence split differently
    torch.testing.assert_close(sampled.src_len, torch.tensor([len(r) for r in rows(sampled.src, sampled.src_len)]))


def test_the_same_seed_and_batch_give_the_same_pieces_and_others_do_not(prepared: Path) -> None:
    corpus = PreparedCorpus(prepared)
    assert isinstance(corpus.src_vocab, SubwordVocabulary) and isinstance(corpus.trg_vocab, SubwordVocabulary)
    fixed = corpus.batch(EpochPlan(corpus, 40, 1, 1000, seed=1, epoch=0)[0])

    def sample(seed: int, key: tuple[int, ...]) -> list[list[int]]:
        assert isinstance(corpus.src_vocab, SubwordVocabulary) and isinstance(corpus.trg_vocab, SubwordVocabulary)
        made = SubwordSampler(corpus.src_vocab, corpus.trg_vocab, 0.3, 80, seed)(fixed, key)
        return rows(made.src, made.src_len) + rows(made.trg, made.trg_len)

    first = sample(3, (0, 0, 0))
    assert sample(3, (0, 0, 0)) == first
    for other in (sample(4, (0, 0, 0)), sample(3, (1, 0, 0)), sample(3, (0, 1, 0)), sample(3, (0, 0, 1))):
        assert other != first


def test_a_sample_longer_than_max_length_keeps_the_fixed_pieces(prepared: Path) -> None:
    corpus = PreparedCorpus(prepared)
    assert isinstance(corpus.src_vocab, SubwordVocabulary) and isinstance(corpus.trg_vocab, SubwordVocabulary)
    fixed = corpus.batch(np.arange(len(corpus)))
    limit = int(fixed.src_len.max()) - 1  # the longest fixed source fits, exactly
    longer = 0
    for epoch in range(20):  # a unigram sample can be shorter than the fixed pieces too: draw until one is longer
        loose = SubwordSampler(corpus.src_vocab, corpus.trg_vocab, 0.5, 10_000, seed=1)(fixed, (epoch, 0, 0))
        tight = SubwordSampler(corpus.src_vocab, corpus.trg_vocab, 0.5, limit, seed=1)(fixed, (epoch, 0, 0))
        for old, new, kept in zip(rows(fixed.src, fixed.src_len), rows(loose.src, loose.src_len),
                                  rows(tight.src, tight.src_len), strict=True):
            assert len(kept) - 1 <= limit
            assert kept == (new if len(new) - 1 <= limit else old)
            longer += len(new) - 1 > limit
    assert longer


def test_a_word_level_model_is_refused_at_config_time(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "words.yaml"
    valid = {"source": str(TEST_DATA / "toy.en"), "target": str(TEST_DATA / "toy.fr")}
    data = {"model": {"architecture": "rnnsearch"}, "data": {"train": valid, "valid": valid},
            "training": {"subword_dropout": 0.1}, "output_dir": str(tmp_path / "out")}
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(ConfigError, match="subword_dropout .*needs model.subwords"):
        load_train_config(path)
    assert main(["-q", "train", "--config", str(path)]) == 2
    assert "needs model.subwords" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()  # refused before any work
    for bad in (1.0, -0.1, math.nan):
        data["training"]["subword_dropout"] = bad  # type: ignore[index]
        data["model"]["subwords"] = {"type": "bpe", "vocab_size": 300}  # type: ignore[index]
        path.write_text(yaml.safe_dump(data))
        with pytest.raises(ConfigError, match="subword_dropout"):
            load_train_config(path)


def test_a_model_trained_with_it_loads_scores_and_resumes_to_the_same_weights(prepared: Path, tmp_path: Path) -> None:
    """Stopped at update 3 of 6 (mid-epoch, with dropout): resumed, it ends with the weights of a run never stopped."""
    def run(name: str, updates: int) -> Path:
        path = config(prepared, tmp_path / name, 0.2, batch_size=8, max_updates=updates, valid_every=3)
        assert main(["-q", "train", "--config", str(path)]) == 0
        return tmp_path / name

    run("stopped", 3)
    resumed, whole = run("stopped", 6), run("whole", 6)
    assert load_state(resumed / "checkpoint.pt")["progress"]["updates"] == 6
    for key, value in load_state(whole / "checkpoint.pt")["model"].items():
        assert torch.equal(load_state(resumed / "checkpoint.pt")["model"][key], value), key
    loaded = load_model(whole)
    lines = (TEST_DATA / "toy.en").read_text().splitlines(), (TEST_DATA / "toy.fr").read_text().splitlines()
    src, src_len = pad(to_ids([line.split() for line in lines[0]], loaded.src_vocab))
    trg, _ = pad(to_ids([line.split() for line in lines[1]], loaded.trg_vocab))
    with torch.inference_mode():
        scores = loaded.model.score(loaded.model.encode(src, src_len), trg)
    assert scores.shape == (len(lines[0]),) and bool(torch.isfinite(scores).all()) and bool((scores < 0).all())
