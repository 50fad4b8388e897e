"""The GRU encoder: unidirectional (Cho et al. 2014) or bidirectional (Bahdanau et al. 2014)."""

from __future__ import annotations

from torch import Tensor, nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from rerank.models.layers import Embeddings


class RecurrentEncoder(nn.Module):
    """Reads the source; returns annotations (B, S, H or 2H) and the final state of each direction.

    Packed sequences make every sentence's states independent of the padding after it, and the
    backward direction start at the sentence's own last word.
    """

    def __init__(self, vocab_size: int, embedding_size: int, hidden_size: int, bidirectional: bool,
                 embedding_rank: int | None = None, dropout: float = 0.0):
        super().__init__()
        self.embed = Embeddings(vocab_size, embedding_size, embedding_rank)
        self.dropout = nn.Dropout(dropout)
        self.rnn = nn.GRU(embedding_size, hidden_size, batch_first=True, bidirectional=bidirectional)

    def forward(self, src: Tensor, src_len: Tensor) -> tuple[Tensor, Tensor]:
        """Annotations (B, S, D·H) and final states (D, B, H); D = 2 if bidirectional ([0] forward, [1] backward)."""
        embedded = self.dropout(self.embed(src))  # (B, S, E)
        packed = pack_padded_sequence(embedded, src_len.cpu(), batch_first=True, enforce_sorted=False)
        outputs, final = self.rnn(packed)
        annotations, _ = pad_packed_sequence(outputs, batch_first=True, total_length=src.shape[1])
        return annotations, final
