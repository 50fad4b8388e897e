"""Checkpoint averaging: the mean of the weights a training run kept at its validations (``training.
keep_checkpoints``), the last N or the best N by validation perplexity (Junczys-Dowmunt et al. 2016;
Sennrich & Zhang 2019), written as a new model directory."""

from __future__ import annotations

import math
import os
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Literal

import torch
from torch import Tensor

from rerank.errors import RerankError, brief
from rerank.formats.files import check_output_directory, output_directory
from rerank.models.checkpoint import CHECKPOINT, load_model, load_model_weights, load_state, save_model

CHECKPOINTS_DIR = "checkpoints"  # in a model directory: weights kept at validations
_NAME = re.compile(r"update-(\d+)\.pt")


def checkpoint_path(model_dir: str | os.PathLike[str], updates: int) -> Path:
    """Where the weights after ``updates`` updates are kept."""
    return Path(model_dir) / CHECKPOINTS_DIR / f"update-{updates:09d}.pt"


def checkpoint_updates(model_dir: str | os.PathLike[str]) -> list[int]:
    """The updates at which a model directory's kept checkpoints were written."""
    return sorted(int(m.group(1)) for path in (Path(model_dir) / CHECKPOINTS_DIR).glob("update-*.pt")
                  if (m := _NAME.fullmatch(path.name)))


def kept_checkpoints(model_dir: str | os.PathLike[str]) -> dict[int, float]:
    """The kept checkpoints of a model directory: updates → validation perplexity (from its checkpoint.pt)."""
    directory = Path(model_dir)
    found = checkpoint_updates(directory)
    if not found:
        raise RerankError(f"{directory / CHECKPOINTS_DIR}: no kept checkpoints (train with training.keep_checkpoints)")
    ppl = validation_history(directory / CHECKPOINT)
    return {updates: ppl.get(updates, math.inf) for updates in found}


def validation_history(path: Path) -> dict[int, float]:
    """A checkpoint's validations: updates → validation perplexity, each entry of its history checked."""
    progress = load_state(path).get("progress")
    history = progress.get("history", []) if isinstance(progress, dict) else None
    if not isinstance(history, list):
        raise RerankError(f"{path}: progress.history: expected a list of validations, got {type(history).__name__}")
    ppl: dict[int, float] = {}
    for i, entry in enumerate(history):
        updates = entry.get("updates") if isinstance(entry, dict) else None
        value = entry.get("valid_ppl") if isinstance(entry, dict) else None
        if isinstance(updates, float) and updates.is_integer():
            updates = int(updates)
        if not isinstance(updates, int) or isinstance(updates, bool) or isinstance(value, bool) or \
                not isinstance(value, (int, float)):
            raise RerankError(f"{path}: progress.history[{i}]: expected updates (an integer) and valid_ppl (a "
                              f"number), got {brief(entry)}")
        ppl[updates] = float(value)
    return ppl


def select_checkpoints(kept: dict[int, float], count: int, by: Literal["last", "best"]) -> list[int]:
    """The updates of the last ``count`` checkpoints, or the ``count`` of lowest perplexity (ties: the later)."""
    if count > len(kept):
        raise RerankError(f"asked to average {count} checkpoints, and {len(kept)} are kept")
    if by == "last":
        return sorted(kept)[-count:]
    return sorted(sorted(kept, key=lambda u: (kept[u], -u))[:count])


def average_weights(states: Sequence[dict[str, Tensor]]) -> dict[str, Tensor]:
    """The element-wise mean of state dicts with the same names and shapes (summed in float64, stored in each
    tensor's own dtype); a tensor that is not floating point must be the same in all."""
    if not states:
        raise ValueError("no weights to average")
    names = list(states[0])
    averaged: dict[str, Tensor] = {}
    for name in names:
        tensors = [state[name] for state in states]
        first = tensors[0]
        if any(t.shape != first.shape for t in tensors):
            raise RerankError(f"{name}: the checkpoints' shapes differ")
        if first.is_floating_point():
            averaged[name] = (torch.stack([t.double() for t in tensors]).mean(0)).to(first.dtype)
        elif all(torch.equal(t, first) for t in tensors[1:]):
            averaged[name] = first.clone()
        else:
            raise RerankError(f"{name}: not a floating-point tensor, and it differs between checkpoints")
    return averaged


def average_model(model_dir: str | os.PathLike[str], output_dir: str | os.PathLike[str], count: int,
                  by: Literal["last", "best"]) -> list[int]:
    """Write ``output_dir`` as a model directory whose weights are the mean of ``count`` kept checkpoints of
    ``model_dir``; returns the updates of those averaged."""
    source, target = Path(model_dir), Path(output_dir)
    check_output_directory(target, "the averaged model", [source], lambda directory: not trained_here(directory))
    chosen = select_checkpoints(kept_checkpoints(source), count, by)
    states = []
    for updates in chosen:
        path = checkpoint_path(source, updates)
        weights = load_state(path).get("model")
        if not isinstance(weights, dict):
            raise RerankError(f"{path}: refused: no weights in it")
        states.append(weights)
    if any(set(state) != set(states[0]) for state in states):
        raise RerankError(f"{source / CHECKPOINTS_DIR}: the checkpoints hold different weights")
    loaded = load_model(source)  # the architecture and vocabularies the weights must fit
    averaged = average_weights(states)
    check_finite_weights(averaged, source / CHECKPOINTS_DIR, chosen)
    load_model_weights(loaded.model, averaged, source / CHECKPOINTS_DIR)
    with output_directory(target, "the averaged model", [source], lambda directory: not trained_here(directory)) \
            as work:
        save_model(work, loaded.model, loaded.src_vocab, loaded.trg_vocab)
    return chosen


def trained_here(directory: Path) -> bool:
    """Whether ``directory`` holds a training run (its checkpoint, or kept checkpoints): another model, which an
    averaged model must not be mixed into."""
    return (directory / CHECKPOINT).exists() or (directory / CHECKPOINTS_DIR).exists()


def check_finite_weights(weights: dict[str, Tensor], where: Path, updates: Sequence[int]) -> None:
    """Refuse weights with a NaN or an infinity (a checkpoint of a run that diverged): a model that would
    score every hypothesis NaN."""
    for name, tensor in weights.items():
        if tensor.is_floating_point() and not bool(torch.isfinite(tensor).all()):
            raise RerankError(f"{where}: refused: the mean of the checkpoints of updates "
                              f"{', '.join(map(str, updates))} has a NaN or an infinity in {name}; average "
                              "checkpoints from before the run diverged (--best N, or fewer --last)")
