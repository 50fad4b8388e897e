"""``rerank train`` stopped by SIGINT (Ctrl-C) or SIGTERM (kill, a scheduler's time limit) saves a checkpoint at the
end of its update, says how to resume and exits 130 or 143; run again, it ends with the weights of a run never
stopped."""

from __future__ import annotations

import shlex
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch
import yaml

from rerank.cli import main
from rerank.models.checkpoint import CHECKPOINT, load_state

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def keep_threads() -> Iterator[None]:
    """``rerank train`` sets torch's thread count (to the config's 1); give the other tests theirs back."""
    threads = torch.get_num_threads()
    yield
    torch.set_num_threads(threads)


def write_config(tmp_path: Path, test_data: Path, output_dir: Path, max_updates: int) -> Path:
    """A tiny encoder-decoder with dropout (the random state matters) on the toy sentences, logging every update
    and never validating before its end."""
    toy = {"source": str(test_data / "toy.en"), "target": str(test_data / "toy.fr")}
    config = {
        "model": {"architecture": "encdec", "embedding_size": 16, "hidden_size": 16, "maxout_size": 8, "dropout": 0.2},
        "data": {"train": toy, "valid": dict(toy), "src_vocab_size": 100, "trg_vocab_size": 100},
        "training": {"optimizer": "adam", "learning_rate": 0.01, "batch_size": 2, "max_epochs": 1_000_000,
                     "max_updates": max_updates, "valid_every": 1_000_000, "log_every": 1, "threads": 1, "seed": 7},
        "output_dir": str(output_dir),
    }
    path = tmp_path / f"{output_dir.name}-{max_updates}.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


def stop_after_update(config: Path, update: int, signum: int) -> tuple[int, str]:
    """Run ``rerank train`` in a process of its own, send it ``signum`` once it logs update ``update``; its exit
    status and stderr."""
    process = subprocess.Popen([sys.executable, "-m", "rerank", "train", "--config", str(config)], cwd=REPO,
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    seen = []
    try:
        assert process.stderr is not None
        for line in process.stderr:
            seen.append(line)
            if f" update {update}:" in line:
                process.send_signal(signum)
                break
        _, rest = process.communicate(timeout=120)
    finally:
        process.kill()
    return process.returncode, "".join(seen) + rest


@pytest.mark.slow
@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_saves_a_checkpoint_to_resume_from(tmp_path: Path, test_data: Path, signum: int) -> None:
    stopped, whole = tmp_path / "stopped", tmp_path / "whole"
    config = write_config(tmp_path, test_data, stopped, 1_000_000)
    status, errors = stop_after_update(config, 3, signum)
    assert status == 128 + signum, errors
    name = signal.Signals(signum).name
    assert f"{stopped}: stopped by {name} at update " in errors
    assert f"run the same command again to resume: {shlex.join(['rerank', 'train', '--config', str(config)])}\n" \
        in errors
    stopped_at = load_state(stopped / CHECKPOINT)["progress"]["updates"]
    assert stopped_at >= 3
    assert not list(stopped.glob(".*.tmp"))  # written atomically: no temporary file left

    assert main(["-q", "train", "--config", str(write_config(tmp_path, test_data, stopped, stopped_at + 2))]) == 0
    assert main(["-q", "train", "--config", str(write_config(tmp_path, test_data, whole, stopped_at + 2))]) == 0
    resumed, uninterrupted = load_state(stopped / CHECKPOINT), load_state(whole / CHECKPOINT)
    assert resumed["progress"]["updates"] == uninterrupted["progress"]["updates"] == stopped_at + 2
    assert torch.equal(resumed["rng"], uninterrupted["rng"])
    for key, value in uninterrupted["model"].items():
        assert torch.equal(resumed["model"][key], value), key
