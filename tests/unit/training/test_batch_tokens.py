"""Batches by tokens: ``training.batch_tokens`` fills each batch up to a budget of padded tokens, covers every
pair once an epoch, and finds its batches again after a restart; unset, the CPU keeps its batches of
``batch_size`` pairs and a GPU gets a budget; translation in token batches gives every sentence its output."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
import yaml

from rerank.cli import main
from rerank.config import from_dict
from rerank.errors import ConfigError
from rerank.models.checkpoint import load_state
from rerank.training.config import GPU_BATCH_TOKENS, TrainingConfig
from rerank.training.data import token_cuts
from rerank.training.prepare import PrepareSettings, prepare_parallel
from rerank.training.prepared import EpochPlan, PreparedCorpus


@pytest.fixture(scope="module")
def prepared(tmp_path_factory: pytest.TempPathFactory, test_data: Path) -> PreparedCorpus:
    """800 pairs: the Multi30k slices' 40, 20 times, in 8 shards."""
    directory = tmp_path_factory.mktemp("corpus")
    paths = []
    for language in ("en", "fr"):
        lines = [line for part in ("val", "test") for line in
                 (test_data / "multi30k" / f"{part}.{language}").read_text().splitlines()] * 20
        paths.append(directory / f"train.{language}")
        paths[-1].write_text("\n".join(lines) + "\n")
    prepare_parallel(paths[0], paths[1], directory / "prepared", PrepareSettings(shard_pairs=100))
    return PreparedCorpus(directory / "prepared")


def padded_tokens(corpus: PreparedCorpus, batch: np.ndarray) -> int:
    src, trg = corpus.lengths(batch)
    return len(batch) * int(np.maximum(src, trg).max() + 1)


def test_cuts_fill_the_budget_and_keep_every_item() -> None:
    sizes = np.array([3, 3, 4, 9, 2, 30, 5, 5, 5, 5])
    cuts = token_cuts(sizes, 12)
    assert [sizes[c].tolist() for c in cuts] == [[3, 3, 4], [9], [2], [30], [5, 5], [5, 5]]
    assert cuts[0].start == 0 and all(a.stop == b.start for a, b in zip(cuts, cuts[1:], strict=False))


@pytest.mark.parametrize("pool_pairs", [10_000, 120])  # one pool; pools of 3 blocks of 40 pairs
def test_token_batches_cover_the_epoch_within_budget_and_are_found_again(prepared: PreparedCorpus,
                                                                          pool_pairs: int) -> None:
    plan = EpochPlan(prepared, 8, 5, pool_pairs, seed=3, epoch=1, batch_tokens=200)
    batches = [plan[b] for b in range(len(plan))]
    assert np.array_equal(np.sort(np.concatenate(batches)), np.arange(len(prepared)))
    assert all(padded_tokens(prepared, b) <= 200 for b in batches)
    sizes = [len(b) for b in batches]
    assert max(sizes) > 8 and min(sizes) < max(sizes)  # more pairs than batch_size where they are short
    # full: one more pair of the batch's sort window would not have fitted
    assert np.mean([padded_tokens(prepared, b) for b in batches]) > 150
    again = EpochPlan(prepared, 8, 5, pool_pairs, seed=3, epoch=1, batch_tokens=200)
    for b in (len(plan) - 1, 0, len(plan) // 2):  # in any order, as a resumed run asks
        assert np.array_equal(again[b], batches[b])
    other = EpochPlan(prepared, 8, 5, pool_pairs, seed=4, epoch=1, batch_tokens=200)
    assert not all(np.array_equal(other[b], batches[b]) for b in range(5))


def test_without_a_budget_the_batches_are_those_of_batch_size(prepared: PreparedCorpus) -> None:
    plan = EpochPlan(prepared, 8, 5, 120, seed=3, epoch=1)
    assert {len(plan[b]) for b in range(len(plan))} == {8}  # 40-pair blocks: no short batch


def test_the_cpu_default_is_batch_size_and_a_gpu_default_fills_it() -> None:
    default = TrainingConfig()
    assert default.batch_tokens_on("cpu") is None and default.batch_tokens_on("cuda") == GPU_BATCH_TOKENS
    off = from_dict(TrainingConfig, {"batch_tokens": 0}, "test")
    assert off.batch_tokens_on("cuda") is None
    assert from_dict(TrainingConfig, {"batch_tokens": 3000}, "test").batch_tokens_on("cpu") == 3000
    with pytest.raises(ConfigError, match="batch_tokens: expected an integer of at least 0"):
        from_dict(TrainingConfig, {"batch_tokens": -1}, "test")


def test_a_run_in_token_batches_stopped_mid_epoch_resumes_to_the_same_weights(
        tmp_path: Path, test_data: Path, prepared: PreparedCorpus) -> None:
    """Token batches of at most 150 padded tokens from pools of 96 pairs: stopped at update 7, the run goes on
    to update 30 (pools later) as one never stopped."""
    def run(name: str, updates: int) -> Path:
        config = {
            "model": {"architecture": "encdec", "embedding_size": 8, "hidden_size": 8, "maxout_size": 4,
                      "dropout": 0.3},
            "data": {"prepared": str(prepared.directory),
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

    run("stopped", 7)
    assert load_state(tmp_path / "stopped" / "checkpoint.pt")["progress"]["batch"] == 7
    resumed, whole = load_state(run("stopped", 30))["model"], load_state(run("whole", 30))["model"]
    for key, value in whole.items():
        assert torch.equal(resumed[key], value), key
