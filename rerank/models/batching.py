"""Sentences as padded id tensors, and batches cut from a length-sorted order.

Every batch of the project comes from here: :func:`token_batches` bounds the padded tokens of a
batch (scoring), :func:`sorted_batches` the number of sentences (validation, decoding), both over
an order that puts sentences of similar length side by side (:func:`longest_first`).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Sequence

import numpy as np
import torch
from torch import Tensor

from rerank.formats.streams import chunks
from rerank.formats.tokens import Tokens
from rerank.models.vocab import EOS_ID, PAD_ID, Vocabulary


def to_ids(sentences: Sequence[Tokens], vocab: Vocabulary) -> list[list[int]]:
    """Ids of each sentence followed by ``</s>``."""
    return [vocab.encode(s) + [EOS_ID] for s in sentences]


def pad(sequences: Sequence[Sequence[int]]) -> tuple[Tensor, Tensor]:
    """A (B, L) tensor of ids padded with ``<pad>``, and the lengths (B,)."""
    lengths = np.fromiter(map(len, sequences), dtype=np.int64, count=len(sequences))
    batch = np.full((len(sequences), int(lengths.max())), PAD_ID, dtype=np.int64)
    ids = np.fromiter(itertools.chain.from_iterable(sequences), dtype=np.int64, count=int(lengths.sum()))
    batch[np.arange(batch.shape[1]) < lengths[:, None]] = ids  # row by row, as chain() reads them
    return torch.from_numpy(batch), torch.from_numpy(lengths)


def longest_first(lengths: Sequence[int] | np.ndarray) -> np.ndarray:
    """Indices by decreasing length; equal lengths keep their order."""
    return np.argsort(-np.asarray(lengths), kind="stable")


def sorted_batches(lengths: Sequence[int] | np.ndarray, batch_size: int) -> Iterator[np.ndarray]:
    """Indices in batches of ``batch_size`` sentences of similar length, longest first."""
    for batch in chunks(longest_first(lengths), batch_size):
        yield np.asarray(batch)


def token_batches(order: np.ndarray, lengths: np.ndarray, max_tokens: int) -> Iterator[np.ndarray]:
    """Consecutive slices of ``order`` (indices sorted by decreasing length) with at most ``max_tokens``
    padded tokens each; a sequence longer than ``max_tokens`` makes a batch of its own."""
    start = 0
    while start < len(order):
        size = max(1, max_tokens // int(lengths[order[start]]))
        yield order[start: start + size]
        start += size
