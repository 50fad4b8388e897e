"""``rerank train`` under ``torchrun --standalone --nproc-per-node 2``: one update of two processes gives the
weights of one process with the same global batch, and a run stopped and started again under torchrun
ends with the weights of a run never stopped."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch
import yaml

from rerank.cli import main
from rerank.models.architectures import build_model
from rerank.models.checkpoint import CHECKPOINT, SRC_VOCAB, TRG_VOCAB, load_state
from rerank.models.vocab import Vocabulary
from rerank.training.config import load_train_config

REPO = Path(__file__).resolve().parents[2]
TORCHRUN = Path(sys.executable).with_name("torchrun")


@pytest.fixture(autouse=True)
def keep_threads() -> Iterator[None]:
    """``rerank train`` sets torch's thread count (to the config's 1); give the other tests theirs back."""
    threads = torch.get_num_threads()
    yield
    torch.set_num_threads(threads)


# Adadelta with a large epsilon and no clipping moves each weight by about its gradient: a gradient of the
# wrong scale shows (Adam's first step, and clipping, would hide it). For one update only: it diverges.
PLAIN_STEP = {"optimizer": "adadelta", "adadelta_eps": 1.0, "clip_norm": 1e6}
ADAM = {"optimizer": "adam", "learning_rate": 0.01}


def write_config(tmp_path: Path, test_data: Path, name: str, *, dropout: float, batch_size: int,
                 max_updates: int, valid_every: int, optimizer: dict[str, object]) -> Path:
    """A tiny encoder-decoder on the three toy sentences, one thread per process."""
    toy = {"source": str(test_data / "toy.en"), "target": str(test_data / "toy.fr")}
    config = {
        "model": {"architecture": "encdec", "embedding_size": 16, "hidden_size": 16, "maxout_size": 8,
                  "dropout": dropout},
        "data": {"train": toy, "valid": dict(toy), "src_vocab_size": 100, "trg_vocab_size": 100},
        "training": {**optimizer, "batch_size": batch_size, "max_epochs": 10000,
                     "max_updates": max_updates, "valid_every": valid_every, "patience": 1000, "threads": 1,
                     "seed": 7},
        "output_dir": str(tmp_path / name),
    }
    path = tmp_path / f"{name}-{max_updates}.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


def torchrun(config: Path) -> None:
    """``rerank train --config`` in two processes on this machine."""
    if not TORCHRUN.exists():
        pytest.skip(f"{TORCHRUN} not found: torchrun comes with torch")
    env = {key: value for key, value in os.environ.items() if key not in ("RANK", "WORLD_SIZE", "LOCAL_RANK")}
    result = subprocess.run([str(TORCHRUN), "--standalone", "--nproc-per-node", "2", "-m", "rerank", "train",
                             "--config", str(config)], cwd=REPO, env={**env, "OMP_NUM_THREADS": "1"},
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.count("best validation perplexity") == 1, "process 0 alone reports"


def weights(directory: Path, name: str = CHECKPOINT) -> dict[str, torch.Tensor]:
    return load_state(directory / name)["model"]


def initial_weights(config_path: Path) -> dict[str, torch.Tensor]:
    """The weights the run of ``config_path`` started from (its seed, its vocabularies' sizes)."""
    config = load_train_config(config_path)
    directory = Path(config.output_dir)
    torch.manual_seed(config.training.seed)
    model = build_model(config.model, len(Vocabulary.load(directory / SRC_VOCAB)),
                        len(Vocabulary.load(directory / TRG_VOCAB)))
    return model.state_dict()


def test_one_update_of_two_processes_equals_one_process_with_the_same_batch(tmp_path: Path,
                                                                            test_data: Path) -> None:
    """The global batch of 3 pairs: 2 in process 0, 1 in process 1; no dropout, whose masks differ."""
    settings = {"dropout": 0.0, "batch_size": 3, "max_updates": 1, "valid_every": 1, "optimizer": PLAIN_STEP}
    torchrun(write_config(tmp_path, test_data, "two", **settings))
    assert main(["-q", "train", "--config", str(write_config(tmp_path, test_data, "one", **settings))]) == 0

    two, one = weights(tmp_path / "two"), weights(tmp_path / "one")
    initial = initial_weights(write_config(tmp_path, test_data, "one", **settings))
    assert two.keys() == one.keys() == initial.keys()
    for key, value in one.items():
        torch.testing.assert_close(two[key], value, rtol=0, atol=1e-6, msg=lambda m, k=key: f"{k}: {m}")
    assert max(float((value - initial[key]).abs().max()) for key, value in one.items()) > 1e-2, "the update moved"
    state = load_state(tmp_path / "two" / CHECKPOINT)
    assert state["progress"]["updates"] == 1 and len(state["rng_ranks"]) == 2
    assert sorted(p.name for p in (tmp_path / "two").iterdir()) == sorted(p.name for p in (tmp_path / "one").iterdir())


@pytest.mark.slow
def test_a_run_stopped_under_torchrun_resumes_exactly(tmp_path: Path, test_data: Path) -> None:
    """With dropout: each process's random state comes back from the checkpoint."""
    settings = {"dropout": 0.3, "batch_size": 2, "valid_every": 3, "optimizer": ADAM}
    torchrun(write_config(tmp_path, test_data, "stopped", max_updates=3, **settings))
    assert load_state(tmp_path / "stopped" / CHECKPOINT)["progress"]["updates"] == 3
    torchrun(write_config(tmp_path, test_data, "stopped", max_updates=6, **settings))
    torchrun(write_config(tmp_path, test_data, "whole", max_updates=6, **settings))

    resumed, whole = load_state(tmp_path / "stopped" / CHECKPOINT), load_state(tmp_path / "whole" / CHECKPOINT)
    assert resumed["progress"]["updates"] == whole["progress"]["updates"] == 6
    for key, value in whole["model"].items():
        assert torch.equal(resumed["model"][key], value), key
    for a, b in zip(resumed["rng_ranks"], whole["rng_ranks"], strict=True):
        assert torch.equal(a, b)
    assert not torch.equal(*whole["rng_ranks"]), "each process draws its own dropout masks"
