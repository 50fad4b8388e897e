"""Attention over source annotations: Bahdanau's additive score, Luong's dot, general and location
scores, and Luong's local windows.

The module is stateless: :meth:`Attention.precompute` returns what depends on the source alone
(U_a h_j for the additive score, W_a h_j for the general one), computed once per sentence and
carried in the decoder state. Padding never receives weight, and every row sums to 1.

Shapes: B batch, T queries (target steps), S source length, Q query size, C annotation size,
A attention hidden size.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from rerank.errors import RerankError
from rerank.models.config import AttentionConfig


class Attention(nn.Module):
    """α_tj = softmax_j(score(q_t, h_j)) restricted to a window; returns contexts Σ_j α_tj h_j and α.

    Scores (Luong et al. 2015, Eq. 8 and 9; Bahdanau et al. 2014, A.1.2):
      additive  v_aᵀ tanh(W_a q + U_a h_j)
      dot       qᵀ h_j
      general   qᵀ W_a h_j
      location  (W_a q)_j
    Windows (Luong et al. 2015, Sec. 3.2): ``local-m`` takes p_t = t, ``local-p`` predicts
    p_t = (|x| − 1) · sigmoid(v_pᵀ tanh(W_p q)) and multiplies the weights by
    exp(−(j − p_t)² / 2σ²), σ = D/2; both attend to j ∈ [p_t − D, p_t + D] only. Weights are
    renormalised over the window, so that each row still sums to 1.
    """

    def __init__(self, config: AttentionConfig, query_size: int, key_size: int):
        super().__init__()
        self.config = config
        hidden = config.hidden_size
        if config.score == "additive":
            self.query_layer = nn.Linear(query_size, hidden, bias=False)  # W_a
            self.key_layer = nn.Linear(key_size, hidden, bias=True)  # U_a (and the bias)
            self.energy = nn.Linear(hidden, 1, bias=False)  # v_a
        elif config.score == "general":
            self.key_layer = nn.Linear(key_size, query_size, bias=False)  # W_a
        elif config.score == "location":
            self.query_layer = nn.Linear(query_size, config.max_source_length)
        elif query_size != key_size:
            raise ValueError(f"the dot score needs queries and keys of one size, got {query_size} and {key_size}")
        if config.window == "local-p":
            self.position = nn.Sequential(nn.Linear(query_size, hidden), nn.Tanh(), nn.Linear(hidden, 1, bias=False))

    def precompute(self, keys: Tensor) -> Tensor:  # (B, S, C) -> (B, S, A or Q or C)
        """The source side of the score, once per sentence."""
        if self.config.score in ("additive", "general"):
            return self.key_layer(keys)
        return keys

    def forward(self, queries: Tensor, keys: Tensor, proj_keys: Tensor, pad_mask: Tensor, src_len: Tensor,
                first_step: int = 0) -> tuple[Tensor, Tensor]:
        """Contexts (B, T, C) and weights (B, T, S) for queries (B, T, Q); query t is target step first_step + t."""
        scores = self.score(queries, proj_keys)  # (B, T, S)
        mask = pad_mask[:, None, :].expand_as(scores)  # True where no attention may go
        if self.config.window != "global":
            distance = self.window_distance(queries, src_len, first_step, scores.shape[-1])  # (B, T, S)
            mask = mask | (distance.abs() > self.config.width)
            if self.config.window == "local-p":
                sigma = self.config.width / 2
                scores = scores - distance.square() / (2 * sigma * sigma)
        scores = scores.masked_fill(mask, torch.finfo(scores.dtype).min)
        weights = torch.softmax(scores, dim=-1).masked_fill(mask, 0.0)
        return torch.bmm(weights, keys), weights

    def score(self, queries: Tensor, proj_keys: Tensor) -> Tensor:  # (B, T, Q), (B, S, *) -> (B, T, S)
        kind = self.config.score
        if kind == "additive":
            hidden = torch.tanh(self.query_layer(queries)[:, :, None, :] + proj_keys[:, None, :, :])  # (B, T, S, A)
            return self.energy(hidden).squeeze(-1)
        if kind in ("dot", "general"):
            return torch.bmm(queries, proj_keys.transpose(1, 2))
        length = proj_keys.shape[1]
        if length > self.config.max_source_length:
            raise RerankError(f"a source of {length} tokens is longer than the location attention's "
                              f"max_source_length ({self.config.max_source_length})")
        return self.query_layer(queries)[:, :, :length]

    def window_distance(self, queries: Tensor, src_len: Tensor, first_step: int, length: int) -> Tensor:
        """j − p_t for every query t and source position j: (B, T, S)."""
        last = (src_len - 1).to(queries.dtype)[:, None]  # (B, 1)
        if self.config.window == "local-m":
            steps = torch.arange(first_step, first_step + queries.shape[1], device=queries.device, dtype=queries.dtype)
            centre = torch.minimum(steps[None, :], last)  # (B, T)
        else:
            centre = last * torch.sigmoid(self.position(queries).squeeze(-1))  # (B, T)
        positions = torch.arange(length, device=queries.device, dtype=queries.dtype)
        return positions[None, None, :] - centre[:, :, None]
