"""The GRU encoder: unidirectional (Cho et al. 2014) or bidirectional (Bahdanau et al. 2014)."""

from __future__ import annotations

import torch
from torch import Tensor, nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from rerank.models.layers import DeepGRU, Embeddings, Int8Matrices, word_dropout


class RecurrentEncoder(nn.Module):
    """Reads the source; returns annotations (B, S, H or 2H) and the final state of each direction.

    Packed sequences make every sentence's states independent of the padding after it, and the
    backward direction start at the sentence's own last word. With ``int8`` set (the model's
    ``set_precision("int8")``), inference runs a bidirectional GRU with int8 weights
    (:meth:`Int8Matrices.gru`). A unidirectional one (the encoder-decoder's) stays in float32: its
    decoder sees the source only through the last state, which int8 moved far enough on the tiny
    test models to change their translations; RNNsearch's decoder reads every annotation.
    """

    def __init__(self, vocab_size: int, embedding_size: int, hidden_size: int, bidirectional: bool,
                 embedding_rank: int | None = None, dropout: float = 0.0, word_dropout: float = 0.0):
        super().__init__()
        self.embed = Embeddings(vocab_size, embedding_size, embedding_rank)
        self.dropout = nn.Dropout(dropout)
        self.word_dropout = word_dropout
        self.rnn = nn.GRU(embedding_size, hidden_size, batch_first=True, bidirectional=bidirectional)
        self.int8: Int8Matrices | None = None

    def embedded(self, src: Tensor) -> Tensor:
        """The source's embeddings (B, S, E) after word dropout and dropout (in training)."""
        return self.dropout(word_dropout(self.embed(src), self.word_dropout, self.training))

    def forward(self, src: Tensor, src_len: Tensor) -> tuple[Tensor, Tensor]:
        """Annotations (B, S, D·H) and final states (D, B, H); D = 2 if bidirectional ([0] forward, [1] backward)."""
        embedded = self.embedded(src)  # (B, S, E)
        packed = pack_padded_sequence(embedded, src_len.cpu(), batch_first=True, enforce_sorted=False)
        rnn: nn.Module = self.rnn
        if self.int8 is not None and self.rnn.bidirectional and not self.training:
            rnn = self.int8.gru("encoder.rnn", self.rnn)
        outputs, final = rnn(packed)
        annotations, _ = pad_packed_sequence(outputs, batch_first=True, total_length=src.shape[1])
        return annotations, final


class DeepBidirectionalEncoder(nn.Module):
    """The bidirectional encoder with layer-normalised and/or deep-transition GRUs (:class:`DeepGRU`), which
    ``torch.nn.GRU`` cannot run: a step loop per direction. Same outputs as :class:`RecurrentEncoder`:
    each sentence's states are independent of the padding after it (a padded step keeps the state),
    the backward direction reads each sentence from its own last word, annotations are 0 at padding."""

    def __init__(self, vocab_size: int, embedding_size: int, hidden_size: int, layer_norm: bool, depth: int,
                 embedding_rank: int | None = None, dropout: float = 0.0, word_dropout: float = 0.0):
        super().__init__()
        self.embed = Embeddings(vocab_size, embedding_size, embedding_rank)
        self.dropout = nn.Dropout(dropout)
        self.word_dropout = word_dropout
        self.input_gates = nn.Linear(embedding_size, 6 * hidden_size)  # both directions' W x + b
        self.hidden_gates = nn.ModuleList(nn.Linear(hidden_size, 3 * hidden_size) for _ in range(2))
        self.cells = nn.ModuleList(DeepGRU(hidden_size, layer_norm, depth) for _ in range(2))
        self.hidden_size = hidden_size

    def embedded(self, src: Tensor) -> Tensor:
        return self.dropout(word_dropout(self.embed(src), self.word_dropout, self.training))

    def forward(self, src: Tensor, src_len: Tensor) -> tuple[Tensor, Tensor]:
        """Annotations (B, S, 2H) and final states (2, B, H): [0] forward (at the last word), [1] backward (←h_1)."""
        forward_gates, backward_gates = self.input_gates(self.embedded(src)).chunk(2, dim=-1)  # (B, S, 3H) each
        positions = torch.arange(src.shape[1], device=src.device)[None]
        valid = positions < src_len.to(src.device)[:, None]  # (B, S)
        reverse = torch.where(valid, src_len.to(src.device)[:, None] - 1 - positions, positions)  # within length
        forward_states, forward_final = self._run(0, forward_gates, valid)
        backward_states, backward_final = self._run(1, _gather_positions(backward_gates, reverse), valid)
        annotations = torch.cat([forward_states, _gather_positions(backward_states, reverse)], dim=-1)
        return annotations * valid[..., None], torch.stack([forward_final, backward_final])

    def _run(self, direction: int, gates: Tensor, valid: Tensor) -> tuple[Tensor, Tensor]:
        """The states (B, S, H) of one direction over input gates (B, S, 3H), and each row's last real state."""
        hidden = gates.new_zeros(gates.shape[0], self.hidden_size)
        cell, hidden_gates = self.cells[direction], self.hidden_gates[direction]
        states = []
        for t in range(gates.shape[1]):
            hidden = torch.where(valid[:, t, None], cell(gates[:, t], hidden_gates(hidden), hidden), hidden)
            states.append(hidden)
        return torch.stack(states, dim=1), hidden


def _gather_positions(x: Tensor, positions: Tensor) -> Tensor:
    """x (B, S, D) read at ``positions`` (B, S)."""
    return x.gather(1, positions[..., None].expand_as(x))
