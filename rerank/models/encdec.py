"""The RNN Encoder-Decoder of Cho et al. 2014 (arXiv:1406.1078), Sec. 2.2 and Appendix A.1."""

from __future__ import annotations

import torch
from torch import Tensor, nn

from rerank.models.config import ModelConfig
from rerank.models.encoder import RecurrentEncoder
from rerank.models.layers import DeepOutput, Embeddings
from rerank.models.seq2seq import DecoderState, Seq2Seq


class EncoderDecoder(Seq2Seq):
    """A GRU reads the source into one vector c; a GRU conditioned on c writes the target.

    c = tanh(V h_N) summarises the source (A.1.1); the decoder starts from h'_0 = tanh(V' c)
    and computes h'_t = f(h'_{t-1}, y_{t-1}, c) (Eq. 3, c fed at every step) and
    p(y_t | y_<t, c) = g(h'_t, y_{t-1}, c) through a maxout layer (A.1.2).
    """

    def __init__(self, config: ModelConfig, src_vocab_size: int, trg_vocab_size: int):
        super().__init__(config, src_vocab_size, trg_vocab_size)
        h, e = config.hidden_size, config.embedding_size
        self.encoder = RecurrentEncoder(src_vocab_size, e, h, bidirectional=False,
                                        embedding_rank=config.embedding_rank, dropout=config.dropout)
        self.summary = nn.Linear(h, h)  # V
        self.init_state = nn.Linear(h, h)  # V'
        self.embed = Embeddings(trg_vocab_size, e, config.embedding_rank)
        self.dropout = nn.Dropout(config.dropout)
        self.rnn = nn.GRU(e + h, h, batch_first=True)
        self.output = DeepOutput(h, e, h, config.maxout_size, config.maxout_pool, trg_vocab_size, config.dropout)

    def encode(self, src: Tensor, src_len: Tensor) -> DecoderState:
        _, final = self.encoder(src, src_len)  # (1, B, H)
        c = torch.tanh(self.summary(final[0]))  # (B, H)
        return DecoderState(hidden=torch.tanh(self.init_state(c)), keys=c[:, None, :], proj_keys=c[:, None, :],
                            pad_mask=torch.zeros_like(src[:, :1], dtype=torch.bool), src_len=src_len)

    def teacher_forced(self, state: DecoderState, trg_in: Tensor) -> tuple[Tensor, None]:
        embedded = self.dropout(self.embed(trg_in))  # (B, T, E)
        c = state.keys.expand(-1, trg_in.shape[1], -1)  # (B, T, H)
        states, _ = self.rnn(torch.cat([embedded, c], dim=-1), state.hidden[None].contiguous())  # (B, T, H)
        return self.output(states, embedded, c), None

    def step(self, prev: Tensor, state: DecoderState) -> tuple[Tensor, DecoderState]:
        embedded = self.dropout(self.embed(prev))[:, None, :]  # (B, 1, E)
        c = state.keys  # (B, 1, H)
        states, _ = self.rnn(torch.cat([embedded, c], dim=-1), state.hidden[None].contiguous())
        logits = self.output(states, embedded, c)[:, 0]  # (B, V)
        return torch.log_softmax(logits, dim=-1), DecoderState(
            hidden=states[:, 0], keys=state.keys, proj_keys=state.proj_keys, pad_mask=state.pad_mask,
            src_len=state.src_len, step=state.step + 1)
