"""Checkpoint averaging: the mean of the kept checkpoints, the last N or the best N of them, their validations
read from the run's checkpoint, and weights that are not finite refused."""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import pytest
import torch
from tiny_models import tiny_config

from rerank.errors import RerankError
from rerank.models.architectures import build_model
from rerank.models.averaging import (
    average_weights,
    check_finite_weights,
    checkpoint_path,
    checkpoint_updates,
    kept_checkpoints,
    select_checkpoints,
)
from rerank.models.checkpoint import CHECKPOINT, save_state

# a tiny model with tied target embeddings (one tensor under two names) and layer normalisation
MODEL = dataclasses.replace(tiny_config(), maxout_size=12, layer_norm=True, tie_target_embeddings=True)


def test_averaging_gives_the_mean_of_the_checkpoints() -> None:
    states = [build_model(MODEL, 30, 25).state_dict() for _ in range(3)]
    averaged = average_weights(states)
    for name, value in averaged.items():
        torch.testing.assert_close(value, (states[0][name] + states[1][name] + states[2][name]) / 3)
    kept = {300: 5.0, 600: 4.0, 900: 4.5, 1200: 4.0}
    assert select_checkpoints(kept, 2, "last") == [900, 1200]
    assert select_checkpoints(kept, 2, "best") == [600, 1200]


def test_the_kept_checkpoints_and_their_validations(tmp_path: Path) -> None:
    for updates in (600, 300, 900):
        checkpoint_path(tmp_path, updates).parent.mkdir(exist_ok=True)
        save_state({"model": {}}, checkpoint_path(tmp_path, updates))
    (checkpoint_path(tmp_path, 1).parent / "update-12.pt.tmp").write_bytes(b"")  # not a kept checkpoint
    assert checkpoint_updates(tmp_path) == [300, 600, 900]
    history = [{"updates": 300, "valid_ppl": 5.0}, {"updates": 600.0, "valid_ppl": 4}]
    save_state({"progress": {"history": history}}, tmp_path / CHECKPOINT)
    assert kept_checkpoints(tmp_path) == {300: 5.0, 600: 4.0, 900: math.inf}  # 900: no validation recorded
    save_state({"progress": {"history": [{"updates": "300", "valid_ppl": 5.0}]}}, tmp_path / CHECKPOINT)
    with pytest.raises(RerankError, match=r"checkpoint.pt: progress.history\[0\]: expected updates \(an integer\)"):
        kept_checkpoints(tmp_path)
    with pytest.raises(RerankError, match="no kept checkpoints"):
        kept_checkpoints(tmp_path / "elsewhere")


def test_what_cannot_be_averaged_is_refused(tmp_path: Path) -> None:
    with pytest.raises(RerankError, match="asked to average 3 checkpoints, and 2 are kept"):
        select_checkpoints({1: 1.0, 2: 2.0}, 3, "best")
    with pytest.raises(RerankError, match="w: the checkpoints' shapes differ"):
        average_weights([{"w": torch.zeros(2)}, {"w": torch.zeros(3)}])
    with pytest.raises(RerankError, match="steps: not a floating-point tensor, and it differs"):
        average_weights([{"steps": torch.tensor(1)}, {"steps": torch.tensor(2)}])
    assert average_weights([{"steps": torch.tensor(1)}, {"steps": torch.tensor(1)}])["steps"].item() == 1
    half = average_weights([{"w": torch.ones(2, dtype=torch.float16)}, {"w": torch.zeros(2, dtype=torch.float16)}])
    assert half["w"].dtype == torch.float16 and half["w"].tolist() == [0.5, 0.5]
    check_finite_weights({"w": torch.ones(2), "steps": torch.tensor(1)}, tmp_path, [1, 2])
    with pytest.raises(RerankError, match=r"the mean of the checkpoints of updates 1, 2 has a NaN or an infinity in w"):
        check_finite_weights({"w": torch.tensor([1.0, math.nan])}, tmp_path, [1, 2])
