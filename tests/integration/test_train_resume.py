"""``rerank train`` killed after a checkpoint and run again continues the same run: its final weights are
those of a run never interrupted. A tampered checkpoint is refused instead of resumed."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch
import yaml
from tampering import Payload

from rerank.cli import main
from rerank.models.checkpoint import CHECKPOINT, WEIGHTS, load_state

REPO = Path(__file__).resolve().parents[2]
MAX_UPDATES = 40


@pytest.fixture(autouse=True)
def keep_threads() -> Iterator[None]:
    """``rerank train`` sets torch's thread count (to the config's 1); give the other tests theirs back."""
    threads = torch.get_num_threads()
    yield
    torch.set_num_threads(threads)


def write_config(tmp_path: Path, test_data: Path, output_dir: Path) -> Path:
    """A tiny encoder-decoder (with dropout, so that the random state matters) on the three toy sentences,
    validated and checkpointed every 5 updates."""
    toy = {"source": str(test_data / "toy.en"), "target": str(test_data / "toy.fr")}
    config = {
        "model": {"architecture": "encdec", "embedding_size": 16, "hidden_size": 16, "maxout_size": 8, "dropout": 0.2},
        "data": {"train": toy, "valid": dict(toy), "src_vocab_size": 100, "trg_vocab_size": 100},
        "training": {"optimizer": "adam", "learning_rate": 0.01, "batch_size": 2, "max_epochs": 10000,
                     "max_updates": MAX_UPDATES, "valid_every": 5, "patience": 1000, "threads": 1, "seed": 7},
        "output_dir": str(output_dir),
    }
    path = tmp_path / f"{output_dir.name}.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


def kill_after_first_checkpoint(config: Path, output_dir: Path) -> None:
    """Run ``rerank train`` in a process of its own and SIGKILL it as soon as a checkpoint exists."""
    process = subprocess.Popen([sys.executable, "-m", "rerank", "-q", "train", "--config", str(config)], cwd=REPO,
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        while not (output_dir / CHECKPOINT).exists() and process.poll() is None:
            time.sleep(0.002)
        os.kill(process.pid, signal.SIGKILL)
    finally:
        _, errors = process.communicate()
    assert process.returncode == -signal.SIGKILL, f"the run ended before it was killed: {errors.decode()}"


def weights(path: Path) -> dict[str, torch.Tensor]:
    return load_state(path)["model"]


@pytest.mark.slow
def test_a_killed_run_resumes_to_the_weights_of_an_uninterrupted_one(tmp_path: Path, test_data: Path,
                                                                     capsys: pytest.CaptureFixture[str]) -> None:
    killed, whole = tmp_path / "killed", tmp_path / "whole"
    kill_after_first_checkpoint(write_config(tmp_path, test_data, killed), killed)
    stopped_at = load_state(killed / CHECKPOINT)["progress"]["updates"]
    assert 0 < stopped_at < MAX_UPDATES

    assert main(["train", "--config", str(write_config(tmp_path, test_data, killed))]) == 0
    assert f"resuming {killed} at update {stopped_at} " in capsys.readouterr().err
    assert main(["-q", "train", "--config", str(write_config(tmp_path, test_data, whole))]) == 0

    assert load_state(killed / CHECKPOINT)["progress"]["updates"] == MAX_UPDATES
    for name in (CHECKPOINT, WEIGHTS):
        resumed, uninterrupted = weights(killed / name), weights(whole / name)
        assert resumed.keys() == uninterrupted.keys()
        for key, value in uninterrupted.items():
            assert torch.equal(resumed[key], value), f"{name}: {key} differs"


def test_a_tampered_checkpoint_is_refused(tmp_path: Path, test_data: Path,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    output_dir = tmp_path / "run"
    config = write_config(tmp_path, test_data, output_dir)
    config.write_text(config.read_text().replace(f"max_updates: {MAX_UPDATES}", "max_updates: 5"))
    assert main(["-q", "train", "--config", str(config)]) == 0
    marker = tmp_path / "code-ran"
    torch.save({"model": Payload(marker), "optimizer": {}, "progress": {}, "rng": None}, output_dir / CHECKPOINT)
    config.write_text(config.read_text().replace("max_updates: 5", "max_updates: 10"))
    capsys.readouterr()
    assert main(["-q", "train", "--config", str(config)]) == 2
    assert f"{CHECKPOINT}: refused: not a plain weights file" in capsys.readouterr().err
    assert not marker.exists()
