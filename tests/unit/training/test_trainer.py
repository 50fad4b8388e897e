"""The trainer's rules on a tiny model with scripted validation results: early stopping after ``patience``
validations without improvement, the learning-rate decay after each of them, the model of the best
validation kept as model.pt, the ``max_minutes`` budget (on a clock the test moves), and a phrase table
read as its distinct pairs, each visited once an epoch. Batches made ahead by the loader's thread are the
epoch plan's; training under bf16 autocast runs; a run in token batches stopped mid-epoch resumes to the
weights of one never stopped."""

from __future__ import annotations

import gzip
import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
import yaml
from helpers import assert_resumes_mid_epoch

import rerank.training.prepare as prepare
import rerank.training.trainer as trainer_module
from rerank.cli import main
from rerank.config import from_dict, to_dict, with_overrides
from rerank.errors import RerankError
from rerank.models.checkpoint import CHECKPOINT, WEIGHTS, load_state
from rerank.models.vocab import UNK_ID
from rerank.training.config import TrainConfig
from rerank.training.prepare import PrepareSettings, prepare_parallel
from rerank.training.prepared import EpochPlan, PreparedCorpus
from rerank.training.trainer import BatchLoader, Trainer

TEST_DATA = Path(__file__).resolve().parents[2] / "data"
TOY = {"source": str(TEST_DATA / "toy.en"), "target": str(TEST_DATA / "toy.fr")}


def config(tmp_path: Path, data: dict[str, object] | None = None, **training: object) -> TrainConfig:
    return from_dict(TrainConfig, {
        "model": {"architecture": "encdec", "embedding_size": 8, "hidden_size": 8, "maxout_size": 4},
        "data": {"train": TOY, "valid": TOY, "src_vocab_size": 50, "trg_vocab_size": 50, **(data or {})},
        "training": {"optimizer": "adam", "learning_rate": 0.01, "batch_size": 1, "valid_every": 1,
                     "max_epochs": 1000, "threads": 1, "log_every": 1000, **training},
        "output_dir": str(tmp_path / "model")})


class ScriptedValidation:
    """Stands in for validation_perplexity: the planned perplexities in turn, recording at each call the
    model's weights and the optimiser's learning rate."""

    def __init__(self, plan: list[float]):
        self.plan: Iterator[float] = iter(plan)
        self.weights: list[dict[str, torch.Tensor]] = []
        self.learning_rates: list[float] = []
        self.trainer: Trainer | None = None

    def __call__(self, model: torch.nn.Module, *args: object, **kwargs: object) -> float:
        self.weights.append({k: v.detach().clone() for k, v in model.state_dict().items()})
        assert self.trainer is not None
        self.learning_rates.append(self.trainer.optimizer.param_groups[0]["lr"])
        return next(self.plan)


def scripted(monkeypatch: pytest.MonkeyPatch, trainer: Trainer, plan: list[float]) -> ScriptedValidation:
    validation = ScriptedValidation(plan)
    validation.trainer = trainer
    monkeypatch.setattr(trainer_module, "validation_perplexity", validation)
    return validation


def test_patience_stops_and_the_best_validation_model_is_kept(tmp_path, monkeypatch):
    trainer = Trainer(config(tmp_path, patience=3))
    validation = scripted(monkeypatch, trainer, [20.0, 12.0, 15.0, 11.0, 13.0, 11.5, 11.0, 30.0, 1.0])
    progress = trainer.train()
    # the fourth validation (11.0) is the best; three without improvement after it (11.0 is no improvement)
    assert progress.updates == 7 and progress.finished == "stopped early: no improvement in 3 validations"
    assert progress.best_ppl == 11.0 and progress.bad_validations == 3
    assert [h["valid_ppl"] for h in progress.history] == [20.0, 12.0, 15.0, 11.0, 13.0, 11.5, 11.0]
    kept = load_state(trainer.out / WEIGHTS)["model"]
    best = validation.weights[3]
    assert kept.keys() == best.keys()
    assert all(torch.equal(kept[name], best[name]) for name in best)
    assert not all(torch.equal(kept[name], validation.weights[-1][name]) for name in best)  # training moved on


def test_keep_weights_last_keeps_the_last_validations_weights(tmp_path, monkeypatch):
    """keep_weights: last (validation watches, cannot choose): model.pt is the last validation's weights, while
    patience still counts validations without improvement."""
    trainer = Trainer(config(tmp_path, patience=3, keep_weights="last"))
    validation = scripted(monkeypatch, trainer, [20.0, 12.0, 15.0, 13.0, 14.0])
    progress = trainer.train()
    assert progress.updates == 5 and progress.best_ppl == 12.0
    kept, last = load_state(trainer.out / WEIGHTS)["model"], validation.weights[-1]
    assert all(torch.equal(kept[name], last[name]) for name in last)
    assert not all(torch.equal(kept[name], validation.weights[1][name]) for name in last)


def test_the_learning_rate_decays_after_each_validation_without_improvement(tmp_path, monkeypatch):
    trainer = Trainer(config(tmp_path, patience=10, lr_decay=0.5, max_updates=6))
    validation = scripted(monkeypatch, trainer, [10.0, 11.0, 9.0, 9.5, 9.5, 8.0])
    progress = trainer.train()
    # the rate each validation sees, set by the ones before it: halved after 11.0, 9.5 and 9.5
    assert validation.learning_rates == pytest.approx([0.01, 0.01, 0.005, 0.005, 0.0025, 0.00125])
    assert progress.learning_rate == pytest.approx(0.00125)
    assert trainer.optimizer.param_groups[0]["lr"] == pytest.approx(0.00125)
    assert progress.finished == "reached max_updates 6" and progress.best_ppl == 8.0


def test_no_decay_when_lr_decay_is_1(tmp_path, monkeypatch):
    trainer = Trainer(config(tmp_path, patience=10, max_updates=3))
    validation = scripted(monkeypatch, trainer, [10.0, 11.0, 12.0])
    trainer.train()
    assert validation.learning_rates == [0.01, 0.01, 0.01]


def test_max_minutes_stops_on_the_clock(tmp_path, monkeypatch):
    """Each update takes 25 s on the test's clock: a budget of 2 minutes stops after the fifth (125 s)."""
    trainer = Trainer(config(tmp_path, max_minutes=2.0, valid_every=1000))
    now = [1000.0]
    monkeypatch.setattr(trainer_module.time, "monotonic", lambda: now[0])
    update = trainer._update

    def slow_update(indices: np.ndarray, *prepared: Any) -> tuple[float, int]:
        now[0] += 25.0
        return update(indices, *prepared)

    monkeypatch.setattr(trainer, "_update", slow_update)
    scripted(monkeypatch, trainer, [5.0])
    progress = trainer.train()
    assert progress.finished == "reached max_minutes 2" and progress.updates == 5
    assert progress.seconds == pytest.approx(125.0)
    assert [h["updates"] for h in progress.history] == [5.0]  # validated once, when it stopped


@pytest.mark.parametrize("chunk", [2, prepare.CHUNK_PAIRS])  # 2: the repeats are found in earlier chunks too
def test_a_phrase_table_is_read_as_its_distinct_pairs_each_visited_once_an_epoch(tmp_path, monkeypatch, chunk):
    monkeypatch.setattr(prepare, "CHUNK_PAIRS", chunk)
    lines = ["un chien ||| a dog ||| 0.5 0.4 0.3 0.2 ||| ||| \n",
             "un chien ||| a dog ||| 0.1 0.1 0.1 0.1 ||| ||| \n",       # the same pair again: read once
             "un chat ||| a cat ||| 0.5 0.4 0.3 0.2 ||| ||| \n",
             "un chat ||| a cat dog ||| 0.5 0.4 0.3 0.2 ||| ||| \n",
             "le chien ||| the dog ||| 0.5 0.4 0.3 0.2 ||| ||| \n",
             "un chat ||| a cat ||| 0.2 0.2 0.2 0.2 ||| ||| \n"]        # and again, further down
    table = tmp_path / "phrase-table.gz"
    table.write_bytes(gzip.compress("".join(lines).encode()))
    trainer = Trainer(config(tmp_path, {"train": None, "phrase_table": str(table)}, batch_size=1, max_epochs=2))
    batch = trainer.corpus.batch(np.arange(len(trainer.corpus)))   # each side followed by </s>
    pairs = [(" ".join(trainer.src_vocab.decode(batch.src[row, : batch.src_len[row] - 1].tolist())),
              " ".join(trainer.trg_vocab.decode(batch.trg[row, : batch.trg_len[row] - 1].tolist())))
             for row in range(len(trainer.corpus))]
    assert pairs == [("un chien", "a dog"), ("un chat", "a cat"), ("un chat", "a cat dog"), ("le chien", "the dog")]
    visited: list[int] = []
    update = trainer._update

    def recording_update(indices: np.ndarray, *prepared: Any) -> tuple[float, int]:
        visited.extend(int(i) for i in indices)
        return update(indices, *prepared)

    monkeypatch.setattr(trainer, "_update", recording_update)
    scripted(monkeypatch, trainer, [5.0] * 8)
    progress = trainer.train()
    assert progress.finished == "reached max_epochs 2" and progress.updates == 8
    assert sorted(visited[:4]) == [0, 1, 2, 3] and sorted(visited[4:]) == [0, 1, 2, 3]


def test_the_loader_makes_the_plans_batches_ahead(tmp_path: Path, test_data: Path) -> None:
    src, trg = test_data / "multi30k" / "val.en", test_data / "multi30k" / "val.fr"
    prepare_parallel(src, trg, tmp_path / "prepared", PrepareSettings(shard_pairs=7))
    corpus = PreparedCorpus(tmp_path / "prepared")

    def plans(epoch: int) -> EpochPlan:
        return EpochPlan(corpus, 3, 2, 6, seed=4, epoch=epoch)

    loader = BatchLoader(plans, lambda indices, _: (corpus.batch(indices), 1), torch.device("cpu"))
    try:
        for epoch, batch in [(0, 0), (0, 1), (0, 2), (0, 5), (0, 6), (1, 0), (1, 1)]:  # (0, 5): a restart
            indices, (made, weight) = loader.get(epoch, batch, len(plans(epoch)))
            assert np.array_equal(indices, plans(epoch)[batch]) and weight == 1
            assert torch.equal(made.trg, corpus.batch(indices).trg)
    finally:
        loader.close()


@pytest.mark.parametrize("architecture", ["encdec", "rnnsearch"])
def test_training_in_bf16_autocast(tmp_path: Path, test_data: Path, architecture: str) -> None:
    toy = {"source": str(test_data / "toy.en"), "target": str(test_data / "toy.fr")}
    config = {
        "model": {"architecture": architecture, "embedding_size": 8, "hidden_size": 8, "maxout_size": 4,
                  "attention": {"hidden_size": 8}},
        "data": {"train": toy, "valid": dict(toy)},
        "training": {"optimizer": "adam", "batch_size": 2, "max_updates": 3, "valid_every": 3, "threads": 1,
                     "precision": "bf16"},
        "output_dir": str(tmp_path / "model"),
    }
    path = tmp_path / "bf16.yaml"
    path.write_text(yaml.safe_dump(config))
    assert main(["-q", "train", "--config", str(path)]) == 0
    progress = load_state(tmp_path / "model" / CHECKPOINT)["progress"]
    assert progress["updates"] == 3 and math.isfinite(progress["best_ppl"])


def test_a_run_in_token_batches_stopped_mid_epoch_resumes_to_the_same_weights(
        tmp_path: Path, test_data: Path, token_corpus: PreparedCorpus) -> None:
    """Token batches of at most 150 padded tokens from pools of 96 pairs: stopped at update 7, the run goes on
    to update 30 (pools later) as one never stopped."""
    def run(name: str, updates: int) -> Path:
        config = {
            "model": {"architecture": "encdec", "embedding_size": 8, "hidden_size": 8, "maxout_size": 4,
                      "dropout": 0.3},
            "data": {"prepared": str(token_corpus.directory),
                     "valid": {"source": str(test_data / "toy.en"), "target": str(test_data / "toy.fr")}},
            "training": {"optimizer": "adam", "learning_rate": 0.01, "batch_size": 8, "bucket_window": 3,
                         "pool_pairs": 96, "batch_tokens": 150, "max_updates": updates, "valid_every": 7,
                         "threads": 1},
            "output_dir": str(tmp_path / name),
        }
        path = tmp_path / f"{name}.yaml"
        path.write_text(yaml.safe_dump(config))
        assert main(["-q", "train", "--config", str(path)]) == 0
        return tmp_path / name / "checkpoint.pt"

    assert_resumes_mid_epoch(run)


def test_a_run_fine_tuned_from_a_model_starts_from_its_weights_and_ids(tmp_path: Path, test_data: Path,
                                                                       capsys: pytest.CaptureFixture[str]) -> None:
    """training.init_from: the data (other words, other sizes asked) are prepared with the model's vocabularies,
    the run starts from its weights; a model whose weights do not fit the config's is refused before any data
    are prepared, and so are data prepared with other vocabularies."""
    assert main(["-q", "train", "--config", write(tmp_path / "a.yaml", config(tmp_path, max_updates=3))]) == 0
    model = tmp_path / "model"
    assert main(["-q", "train", "--config", write(tmp_path / "b.yaml", config(tmp_path, max_updates=4,
                                                                            keep_weights="last")),
                 "--init-from", str(model), "--output-dir", str(tmp_path / "more")]) == 0
    assert "(reached max_updates 4); model.pt: the last weights (perplexity " in capsys.readouterr().out
    assert (tmp_path / "more" / "vocab.src.txt").read_bytes() == (model / "vocab.src.txt").read_bytes()
    other = {"source": str(test_data / "multi30k" / "val.en"), "target": str(test_data / "multi30k" / "val.fr")}
    tuned = config(tmp_path, {"train": other, "src_vocab_size": 7}, init_from=str(model))
    tuned = with_overrides(tuned, {"output_dir": str(tmp_path / "tuned")})
    trainer = Trainer(tuned)
    for name in ("vocab.src.txt", "vocab.trg.txt"):
        assert (tmp_path / "tuned" / name).read_bytes() == (model / name).read_bytes()
    assert len(trainer.src_vocab) > 7 + 4
    start = load_state(model / WEIGHTS)["model"]
    assert all(torch.equal(value, start[name]) for name, value in trainer.model.state_dict().items())
    words = {word for line in (test_data / "multi30k" / "val.en").read_text().split("\n") for word in line.split()}
    unknown = words - set(trainer.src_vocab.tokens)
    assert unknown and trainer.corpus.batch(np.arange(len(trainer.corpus)), False).src.eq(UNK_ID).any()

    wider = with_overrides(tuned, {"output_dir": str(tmp_path / "wider"), "model.hidden_size": 16})
    with pytest.raises(RerankError, match=rf"^training.init_from: {model}.*model.pt: the weights do not fit the "
                                           r"model section of the config, .*wrong shape"):
        Trainer(wider)
    assert not (tmp_path / "wider" / "data").exists()
    prepared = tmp_path / "prepared"
    prepare_parallel(other["source"], other["target"], prepared, PrepareSettings(src_vocab_size=50,
                                                                                 trg_vocab_size=50))
    elsewhere = with_overrides(config(tmp_path, {"train": None, "prepared": str(prepared)}, init_from=str(model)),
                               {"output_dir": str(tmp_path / "elsewhere")})
    with pytest.raises(RerankError, match=r"manifest.json: refused: its vocabularies are not those of .*model"):
        Trainer(elsewhere)


def write(path: Path, settings: TrainConfig) -> str:
    path.write_text(yaml.safe_dump(to_dict(settings)), encoding="utf-8")
    return str(path)
