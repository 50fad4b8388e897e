"""Small building blocks shared by both architectures.

Shape legend in comments: B batch, S source length, T target length, H hidden, E embedding,
C context (annotation) size, V vocabulary.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn


class Embeddings(nn.Module):
    """Word embeddings, optionally low-rank: V x r, then r x E (Cho et al. 2014, Sec. 4.1: r = 100)."""

    def __init__(self, vocab_size: int, size: int, rank: int | None = None, padding_idx: int = 0):
        super().__init__()
        self.lookup = nn.Embedding(vocab_size, rank or size, padding_idx=padding_idx)
        self.expand = nn.Linear(rank, size, bias=False) if rank else None
        self.size = size

    def forward(self, ids: Tensor) -> Tensor:  # (...) -> (..., E)
        vectors = self.lookup(ids)
        return self.expand(vectors) if self.expand is not None else vectors


class Maxout(nn.Module):
    """A linear layer followed by a max over pools of ``pool`` units (Goodfellow et al. 2013)."""

    def __init__(self, in_size: int, units: int, pool: int = 2):
        super().__init__()
        self.linear = nn.Linear(in_size, units * pool)
        self.units, self.pool = units, pool

    def forward(self, x: Tensor) -> Tensor:  # (..., in) -> (..., units)
        y = self.linear(x)
        return y.view(*y.shape[:-1], self.units, self.pool).amax(-1)


class DeepOutput(nn.Module):
    """p(y_i | s_i, y_{i-1}, c_i) through one maxout layer (Bahdanau et al. 2014, A.2.2; Cho et al. 2014, A.1).

    t_i = maxout(U_o s_i + V_o E y_{i-1} + C_o c_i); logits = W_o t_i. The three input projections
    are one linear layer over the concatenation.
    """

    def __init__(self, state_size: int, embedding_size: int, context_size: int, units: int, pool: int,
                 vocab_size: int, dropout: float = 0.0):
        super().__init__()
        self.maxout = Maxout(state_size + embedding_size + context_size, units, pool)
        self.dropout = nn.Dropout(dropout)
        self.project = nn.Linear(units, vocab_size)

    def forward(self, state: Tensor, embedded: Tensor, context: Tensor) -> Tensor:  # (..., *) -> (..., V)
        hidden = self.maxout(torch.cat([state, embedded, context], dim=-1))
        return self.project(self.dropout(hidden))


def gru_update(gates_x: Tensor, gates_h: Tensor, h: Tensor) -> Tensor:
    """One GRU step from precomputed input and hidden projections, as ``torch.nn.GRU`` computes it.

    ``gates_x`` = W_i x + b_i and ``gates_h`` = W_h h + b_h, each (B, 3H) in the order reset, update, new.
    Splitting the projections lets callers compute the embedding part of W_i x for all steps at once.
    """
    x_r, x_z, x_n = gates_x.chunk(3, dim=-1)
    h_r, h_z, h_n = gates_h.chunk(3, dim=-1)
    r = torch.sigmoid(x_r + h_r)
    z = torch.sigmoid(x_z + h_z)
    n = torch.tanh(x_n + r * h_n)
    return n + z * (h - n)  # (1 - z) * n + z * h
