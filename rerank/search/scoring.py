"""Batched forced decoding: ln p(target | source) for a stream of (source, target) pairs.

Pairs are read in windows of a few thousand. Inside a window every distinct source is encoded
once (a phrase table is sorted by source; the hypotheses of an n-best list share theirs), in
batches sorted by length; the decoder states are then repeated for each pair with
``index_select``, and the targets are forced-decoded in batches sorted by length and bounded by
a budget of padded target tokens, so that memory stays flat whatever the input's size. The
scores come out in input order. Nothing is truncated: a pair longer than any training sentence
is scored like the others.

Shapes: B batch, S source length, T target length, N distinct sources of a window, P pairs.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass

import numpy as np
import torch

from rerank.formats.tokens import Pair
from rerank.models.batching import longest_first, pad, to_ids, token_batches
from rerank.models.checkpoint import LoadedModel, load_model
from rerank.models.seq2seq import DecoderState, Seq2Seq, concat_states, narrow_source
from rerank.models.vocab import Vocabulary


@dataclass(frozen=True)
class ScoringConfig:
    """How many pairs are scored together.

    ``window`` pairs (or fewer, once their distinct sources hold ``window_source_tokens`` tokens)
    are read, deduplicated and sorted together; ``max_tokens`` bounds the padded tokens (B × T,
    ``</s>`` included) of one decoder or encoder batch, and with it the size of the (B, T, V) logits.
    """

    window: int = 8192
    window_source_tokens: int = 65536
    max_tokens: int = 4096

    def __post_init__(self) -> None:
        for name in ("window", "window_source_tokens", "max_tokens"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be at least 1, got {getattr(self, name)}")


class Scorer:
    """ln p(target | source), ``</s>`` included, of token pairs under a trained model (see the module docstring)."""

    def __init__(self, model: Seq2Seq, src_vocab: Vocabulary, trg_vocab: Vocabulary,
                 config: ScoringConfig | None = None):
        self.model = model.eval()
        self.src_vocab = src_vocab
        self.trg_vocab = trg_vocab
        self.config = config or ScoringConfig()
        self.device = next(model.parameters()).device

    @classmethod
    def load(cls, directory: str | os.PathLike[str], device: str | torch.device = "cpu",
             config: ScoringConfig | None = None) -> Scorer:
        """A scorer for the model directory ``directory`` (see :mod:`rerank.models.checkpoint`)."""
        return cls.from_loaded(load_model(directory, device), config)

    @classmethod
    def from_loaded(cls, loaded: LoadedModel, config: ScoringConfig | None = None) -> Scorer:
        return cls(loaded.model, loaded.src_vocab, loaded.trg_vocab, config)

    def score(self, pairs: Iterable[Pair]) -> Iterator[float]:
        """ln p(target | source) of each pair, in input order; pairs are read one window ahead."""
        for scores in self.score_windows(pairs):
            yield from scores.tolist()

    def score_windows(self, pairs: Iterable[Pair]) -> Iterator[np.ndarray]:
        """The scores of :meth:`score`, one array per window as each is done."""
        for window in self.windows(pairs):
            yield self.score_window(window)

    def windows(self, pairs: Iterable[Pair]) -> Iterator[list[Pair]]:
        """Consecutive lists of pairs, cut at ``window`` pairs or ``window_source_tokens`` distinct source tokens."""
        return windows(pairs, self.config)

    def score_window(self, pairs: Sequence[Pair]) -> np.ndarray:
        """ln p (P,) of a list of pairs scored together, each distinct source encoded once."""
        distinct: dict[tuple[str, ...], int] = {}
        source_of = np.fromiter((distinct.setdefault(tuple(s), len(distinct)) for s, _ in pairs),
                                dtype=np.int64, count=len(pairs))
        return self.score_ids(to_ids(list(distinct), self.src_vocab),
                              to_ids([t for _, t in pairs], self.trg_vocab), source_of)

    @torch.inference_mode()
    def score_ids(self, src_ids: Sequence[Sequence[int]], trg_ids: Sequence[Sequence[int]],
                  source_of: np.ndarray) -> np.ndarray:
        """ln p (P,) of targets ``trg_ids`` (ids then ``</s>``) given sources ``src_ids[source_of[i]]``."""
        states, row_of, src_len = self.encode(src_ids)  # N rows, (N,), (N,)
        trg_len = np.array([len(t) for t in trg_ids])  # (P,)
        pair_src_len = src_len[source_of]  # (P,)
        order = np.lexsort((-pair_src_len, -trg_len))  # longest targets first, then longest sources
        scores = np.empty(len(trg_ids))
        for rows in token_batches(order, trg_len, self.config.max_tokens):  # (B,) pair indices
            state = narrow_source(states, int(pair_src_len[rows].max()))
            state = state.index_select(torch.as_tensor(row_of[source_of[rows]], device=self.device))  # B rows
            trg, _ = pad([trg_ids[i] for i in rows])  # (B, T)
            scores[rows] = self.model.score(state, trg.to(self.device)).double().cpu().numpy()
        return scores

    def encode(self, src_ids: Sequence[Sequence[int]]) -> tuple[DecoderState, np.ndarray, np.ndarray]:
        """The decoder states of all sources (N rows, longest first), the row of each source (N,) and
        the sources' lengths (N,)."""
        lengths = np.array([len(s) for s in src_ids])
        order = longest_first(lengths)
        parts = []
        for rows in token_batches(order, lengths, self.config.max_tokens):
            src, src_len = pad([src_ids[i] for i in rows])  # (B, S), (B,)
            parts.append(self.model.encode(src.to(self.device), src_len.to(self.device)))
        row_of = np.empty_like(order)
        row_of[order] = np.arange(len(order))
        return concat_states(parts), row_of, lengths


def windows(pairs: Iterable[Pair], config: ScoringConfig) -> Iterator[list[Pair]]:
    """:meth:`Scorer.windows` under ``config``, without a model: nothing carries over a cut, so a stream
    that starts at a cut of a longer one is cut as the longer one is from there on."""
    window: list[Pair] = []
    sources: set[tuple[str, ...]] = set()
    source_tokens = 0
    for pair in pairs:
        window.append(pair)
        source = tuple(pair[0])
        if source not in sources:
            sources.add(source)
            source_tokens += len(source) + 1
        if len(window) >= config.window or source_tokens >= config.window_source_tokens:
            yield window
            window, sources, source_tokens = [], set(), 0
    if window:
        yield window
