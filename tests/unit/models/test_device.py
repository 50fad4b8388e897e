"""The paths written for a GPU, checked on the CPU: the encoder-decoder's decoder states by one call of
``torch.nn.GRU`` (cuDNN's kernel on a GPU) equal the step-by-step ones; batches made ahead by the loader's
thread are the epoch plan's; training under bf16 autocast runs and its loss is finite; each kind of work takes
the path the device's measurements chose, and where that is the reference path it gives the same numbers."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
import torch
import yaml
from tiny_models import tiny_config, tiny_model

from rerank.cli import main
from rerank.errors import RerankError
from rerank.models.batching import pad
from rerank.models.checkpoint import CHECKPOINT, load_state
from rerank.models.device import FASTER_PATH, PATH_VARIABLE, faster_path
from rerank.models.encdec import EncoderDecoder
from rerank.models.seq2seq import reference_path, shift_right
from rerank.models.vocab import Vocabulary
from rerank.scoring.pairs import Scorer
from rerank.search.beam import SearchConfig, beam_search
from rerank.training.prepare import PrepareSettings, prepare_parallel
from rerank.training.prepared import EpochPlan, PreparedCorpus
from rerank.training.trainer import BatchLoader


def test_decoder_states_by_one_gru_call_equal_the_steps() -> None:
    model = tiny_model(tiny_config("encdec"))
    assert isinstance(model, EncoderDecoder)
    src, src_len = pad([[5, 6, 7, 3], [8, 3]])
    trg, _ = pad([[9, 10, 11, 12, 3], [13, 3]])
    state = model.encode(src, src_len)
    embedded = model.embed(shift_right(trg))
    gates_c, _ = model._source_parts(state)
    whole, looped = model.states_whole(state, embedded), model.states_looped(state, embedded, gates_c)
    assert whole.shape == looped.shape == (2, 5, 16)
    assert torch.allclose(whole, looped, rtol=0, atol=1e-12)


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


# -- which path each kind of work takes on each device ------------------------------------------------------


def test_the_measured_faster_path_per_device() -> None:
    for work in ("training", "scoring", "search"):
        for architecture in ("encdec", "rnnsearch"):
            assert faster_path("cpu", work, architecture) == "fast"
            assert faster_path("mps", work, architecture) == "reference"  # not measured: the device-neutral path
    assert [faster_path("cuda", work, "encdec") for work in ("training", "scoring", "search")] == ["reference"] * 3
    assert [faster_path("cuda", work, "rnnsearch") for work in ("training", "scoring", "search")] == \
        ["fast", "reference", "reference"]


def test_the_environment_overrides_the_measured_path(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(PATH_VARIABLE, "reference")
    assert faster_path("cpu", "scoring", "rnnsearch") == "reference"
    model = tiny_model(tiny_config())
    assert model.uses_reference("search")
    with reference_path(model, on=False):  # the model's own setting wins
        assert not model.uses_reference("search")
    monkeypatch.setenv(PATH_VARIABLE, "fastest")
    with pytest.raises(RerankError, match="RERANK_PATH='fastest': expected fast or reference"):
        faster_path("cpu", "scoring", "rnnsearch")


@pytest.mark.parametrize("architecture", ["encdec", "rnnsearch"])
def test_a_device_whose_faster_path_is_the_reference_gets_the_same_numbers(
        monkeypatch: pytest.MonkeyPatch, architecture: str) -> None:
    """Where the table chooses the reference path (as on a GPU), scoring with prefix sharing asked for, search
    and the training loss take it, and give the fast path's numbers."""
    model = tiny_model(tiny_config(architecture))
    scorer = Scorer(model, Vocabulary.build([["a"]], 10), Vocabulary.build([["x"]], 10))
    sources, targets = [[5, 6, 7, 3], [8, 3], [5, 6, 7, 3]], [[9, 10, 3], [11, 3], [9, 12, 13, 3]]
    src, src_len = pad([[5, 6, 7, 3], [8, 9, 3]])
    trg, _ = pad([[9, 10, 11, 3], [12, 3]])
    search = SearchConfig(beam_size=3, nbest=2)

    def everything() -> tuple[np.ndarray, list[list[list[int]]], torch.Tensor]:
        scores = scorer.score_ids(sources, targets, np.arange(len(sources)))
        found = [[h.tokens for h in hypotheses] for hypotheses in beam_search(model, src, src_len, search)]
        model.train()
        torch.manual_seed(3)
        loss = model(src, src_len, trg)
        model.eval()
        return scores, found, loss.detach()

    fast = everything()
    calls: list[str] = []
    for method in ("teacher_forced", "step_reference"):
        original = getattr(model, method)
        monkeypatch.setattr(model, method, lambda *a, _m=method, _f=original: calls.append(_m) or _f(*a))
    monkeypatch.setitem(FASTER_PATH, ("cpu", "training"), "reference")
    monkeypatch.setitem(FASTER_PATH, ("cpu", "scoring"), "reference")
    monkeypatch.setitem(FASTER_PATH, ("cpu", "search"), "reference")
    reference = everything()
    assert {"teacher_forced", "step_reference"} <= set(calls)
    np.testing.assert_allclose(reference[0], fast[0], rtol=0, atol=1e-10)
    assert reference[1] == fast[1]
    torch.testing.assert_close(reference[2], fast[2], rtol=0, atol=1e-10)
