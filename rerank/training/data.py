"""Training data in memory: small parallel text (validation), padded batches, and the length-bucketed order of
an epoch's batches. The training corpus itself is prepared once and read from disk (:mod:`rerank.training.prepared`)."""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor

from rerank.errors import FormatError
from rerank.formats.files import display_name, read_lines
from rerank.models.batching import pad

logger = logging.getLogger(__name__)


@dataclass
class ParallelCorpus:
    """Tokenised sentence pairs."""

    sources: list[list[str]]
    targets: list[list[str]]

    def __len__(self) -> int:
        return len(self.sources)

    def reverse_targets(self) -> ParallelCorpus:
        """The pairs with each target read right to left (for a right-to-left model)."""
        return ParallelCorpus(self.sources, [target[::-1] for target in self.targets])


def read_parallel(source_path: str | os.PathLike[str], target_path: str | os.PathLike[str]) -> ParallelCorpus:
    """Two line-aligned text files; their line counts must agree."""
    sources = [line.split() for _, line in read_lines(source_path)]
    targets = [line.split() for _, line in read_lines(target_path)]
    if len(sources) != len(targets):
        shorter, longer = (source_path, target_path) if len(sources) < len(targets) else (target_path, source_path)
        raise FormatError(display_name(shorter), min(len(sources), len(targets)) + 1,
                          f"as many lines as {display_name(longer)} ({max(len(sources), len(targets))})",
                          got="end of file")
    return ParallelCorpus(sources, targets)


@dataclass
class Batch:
    src: Tensor  # (B, S)
    src_len: Tensor  # (B,)
    trg: Tensor  # (B, T) words then </s>, padded
    trg_len: Tensor  # (B,)

    @property
    def target_tokens(self) -> int:
        return int(self.trg_len.sum())

    def to(self, device: torch.device) -> Batch:
        """The batch on ``device`` (the lengths stay where they are: the encoder packs on the CPU); from pinned memory
        the copy does not wait."""
        return Batch(self.src.to(device, non_blocking=self.src.is_pinned()), self.src_len,
                     self.trg.to(device, non_blocking=self.trg.is_pinned()), self.trg_len)


def make_batch(src_ids: Sequence[Sequence[int]], trg_ids: Sequence[Sequence[int]]) -> Batch:
    src, src_len = pad(src_ids)
    trg, trg_len = pad(trg_ids)
    return Batch(src, src_len, trg, trg_len)


def bucketed_order(lengths: np.ndarray, batch_size: int, window: int, rng: np.random.Generator) -> list[np.ndarray]:
    """Batches of indices for one epoch: shuffle, sort by length inside windows of ``window`` batches,
    cut into batches, shuffle the batches. Similar lengths share a batch, so little is padding."""
    order = rng.permutation(len(lengths))
    chunk = batch_size * window
    batches = []
    for start in range(0, len(order), chunk):
        part = order[start: start + chunk]
        part = part[np.argsort(lengths[part], kind="stable")]
        batches += [part[i: i + batch_size] for i in range(0, len(part), batch_size)]
    return [batches[i] for i in rng.permutation(len(batches))]


def token_bucketed_order(keys: np.ndarray, sizes: np.ndarray, batch_tokens: int, chunk: int,
                         rng: np.random.Generator) -> list[np.ndarray]:
    """Batches of indices for one epoch filled up to ``batch_tokens`` padded tokens (fairseq's ``max_tokens``):
    shuffle, sort by ``keys`` inside chunks of ``chunk`` pairs, cut each chunk where one more pair would make
    the batch's pairs × its largest ``sizes`` exceed ``batch_tokens`` (a pair larger than that is a batch of its
    own), shuffle the batches."""
    order = rng.permutation(len(keys))
    batches = []
    for start in range(0, len(order), chunk):
        part = order[start: start + chunk]
        part = part[np.argsort(keys[part], kind="stable")]
        batches += [part[cut] for cut in token_cuts(sizes[part], batch_tokens)]
    return [batches[i] for i in rng.permutation(len(batches))]


def token_cuts(sizes: np.ndarray, batch_tokens: int) -> list[slice]:
    """Consecutive slices of ``sizes`` (in order), each as long as its count × its largest size stays within
    ``batch_tokens``, and at least one item long."""
    cuts, start = [], 0
    while start < len(sizes):
        ahead = sizes[start: start + batch_tokens // int(sizes[start]) + 1]  # no more can fit
        padded = np.maximum.accumulate(ahead) * np.arange(1, len(ahead) + 1)
        end = start + max(1, int(np.searchsorted(padded, batch_tokens, side="right")))
        cuts.append(slice(start, end))
        start = end
    return cuts
