"""Subword regularisation in training (``training.subword_dropout``): each time a pair is put in a batch, its
source and target are segmented anew by sampling, BPE-dropout (Provilkov et al. 2020) for a BPE model and
subword sampling (Kudo 2018) for a unigram model. The prepared pieces of a batch side are decoded back to their
text and sample-encoded in one sentencepiece call. Validation, scoring and decoding keep the fixed pieces.

A sampled segmentation is often longer than the fixed one; a side whose sample has more pieces than the data's
``max_length`` (which counts pieces in a subword model) keeps its fixed pieces, which were prepared within it.

Seeding: each batch side is sampled from a seed of (training seed, epoch, batch, process rank, side), so a
batch's segmentation depends on nothing else. A resumed run samples the same pieces bit for bit (the same
sentencepiece version and number of processes given); resumed by another number of processes, each process's
share of a batch differs, and so do its samples from there on.
"""

from __future__ import annotations

import numpy as np

from rerank.models.subwords import SubwordVocabulary
from rerank.models.vocab import EOS_ID
from rerank.training.data import Batch, make_batch


class SubwordSampler:
    """Re-segments batches of a subword model's pairs by sampling with ``alpha`` (``training.subword_dropout``)."""

    def __init__(self, src_vocab: SubwordVocabulary, trg_vocab: SubwordVocabulary, alpha: float, max_length: int,
                 seed: int):
        self.vocabs = src_vocab, trg_vocab
        self.alpha, self.max_length, self.seed = alpha, max_length, seed

    def __call__(self, batch: Batch, key: tuple[int, ...], reverse_target: bool = False) -> Batch:
        """``batch`` with each side's pieces sampled anew, from the seed of ``key`` (epoch, batch, rank); with
        ``reverse_target`` the target is read right to left, as the batch holds it."""
        seeds = np.random.SeedSequence([self.seed, *key]).generate_state(2).tolist()
        sides = []
        for (ids, lengths), vocab, seed, reverse in zip(((batch.src, batch.src_len), (batch.trg, batch.trg_len)),
                                                        self.vocabs, seeds, (False, reverse_target), strict=True):
            rows = [row[: n - 1] for row, n in zip(ids.tolist(), lengths.tolist(), strict=True)]  # without </s>
            if reverse:
                rows = [row[::-1] for row in rows]
            sampled = [new if len(new) <= self.max_length else old
                       for new, old in zip(vocab.resample(rows, self.alpha, seed), rows, strict=True)]
            sides.append([(row[::-1] if reverse else row) + [EOS_ID] for row in sampled])
        return make_batch(sides[0], sides[1])
