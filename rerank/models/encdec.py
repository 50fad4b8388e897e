"""The RNN Encoder-Decoder of Cho et al. 2014 (arXiv:1406.1078), Sec. 2.2 and Appendix A.1."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from typing import Any, cast

import torch
from torch import Tensor, nn

from rerank.models.config import ModelConfig
from rerank.models.encoder import RecurrentEncoder
from rerank.models.layers import DeepOutput, Embeddings, WordTables, gru_update
from rerank.models.seq2seq import DecoderState, Seq2Seq


class EncoderDecoder(Seq2Seq):
    """A GRU reads the source into one vector c; a GRU conditioned on c writes the target.

    c = tanh(V h_N) summarises the source (A.1.1); the decoder starts from h'_0 = tanh(V' c)
    and computes h'_t = f(h'_{t-1}, y_{t-1}, c) (Eq. 3, c fed at every step) and
    p(y_t | y_<t, c) = g(h'_t, y_{t-1}, c) through a maxout layer (A.1.2).
    """

    reads_source_prefixes = True  # the decoder sees the source through the encoder's last state only

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
        self.tables = WordTables()

    def _apply(self, fn: Any, recurse: bool = True) -> Any:  # .to(), .float(), .cuda() ...: new weights
        self.tables.clear()
        return super()._apply(fn, recurse)

    def encode(self, src: Tensor, src_len: Tensor) -> DecoderState:
        _, final = self.encoder(src, src_len)  # (1, B, H)
        return self.decoder_start(final[0], src_len)

    def encode_trie(self, levels: Iterable[tuple[Tensor, Tensor]]) -> Tensor:
        """The encoder's state at every node of a trie of source prefixes (nodes, H), nodes numbered depth
        by depth. ``levels`` gives, per depth k ≥ 1, each node's parent among the nodes of depth k − 1 and
        the word it reads; the one node of depth 0 is the empty prefix, whose state is 0, as in
        ``torch.nn.GRU``."""
        weight_ih, bias_ih, weight_hh, bias_hh = _gru_weights(self.encoder.rnn)
        hidden = weight_hh.new_zeros(1, weight_hh.shape[1])
        states = [hidden]
        for parents, words in levels:
            hidden = hidden.index_select(0, parents)
            embedded = self.encoder.dropout(self.encoder.embed(words))
            if self.int8 is not None:
                gates_x = self.int8.affine("encoder.input", embedded, weight_ih, bias_ih)
                gates_h = self.int8.affine("encoder.hidden", hidden, weight_hh, bias_hh)
            else:
                gates_x = torch.addmm(bias_ih, embedded, weight_ih.t())
                gates_h = torch.addmm(bias_hh, hidden, weight_hh.t())
            hidden = gru_update(gates_x, gates_h, hidden)
            states.append(hidden)
        return torch.cat(states)

    def decoder_start(self, final: Tensor, src_len: Tensor) -> DecoderState:
        """The decoder state from the encoder's last states (B, H): c as ``keys`` (B, 1, H); as ``proj_keys``
        (B, 1, 3H + maxout), what the decoder computes from c at every step, computed once here: the
        GRU's input-side gates W_c c + b_i, and the maxout layer's C_o c + b."""
        c = torch.tanh(self.summary(final))  # (B, H)
        weight_ih, bias_ih, _, _ = self._gru_weights()
        gates = nn.functional.linear(c, weight_ih[:, self.config.embedding_size:], bias_ih)  # (B, 3H)
        source_part = torch.cat([gates, self.output.source_part(c)], dim=-1)
        return DecoderState(hidden=torch.tanh(self.init_state(c)), keys=c[:, None, :],
                            proj_keys=source_part[:, None, :], src_len=src_len,
                            pad_mask=torch.zeros(len(c), 1, dtype=torch.bool, device=c.device))

    @property
    def output_layer(self) -> nn.Linear:
        return self.output.project

    def teacher_forced(self, state: DecoderState, trg_in: Tensor) -> tuple[Tensor, None]:
        embedded = self.dropout(self.embed(trg_in))  # (B, T, E)
        c = state.keys.expand(-1, trg_in.shape[1], -1)  # (B, T, H)
        return self.output(self.states_whole(state, embedded), embedded, c), None

    def step_reference(self, prev: Tensor, state: DecoderState) -> tuple[Tensor, DecoderState]:
        embedded = self.dropout(self.embed(prev))[:, None, :]  # (B, 1, E)
        c = state.keys  # (B, 1, H)
        states, _ = self.rnn(torch.cat([embedded, c], dim=-1), state.hidden[None].contiguous())
        logits = self.output(states, embedded, c)[:, 0]  # (B, V)
        return torch.log_softmax(logits, dim=-1), DecoderState(
            hidden=states[:, 0], keys=state.keys, proj_keys=state.proj_keys, pad_mask=state.pad_mask,
            src_len=state.src_len, step=state.step + 1)

    # The fast path: c's projections come precomputed in the state; the embeddings' part of the GRU's
    # input gates is one matrix multiply for all steps; the output layer runs at real positions only.

    def features(self, state: DecoderState, trg_in: Tensor, keep: Tensor) -> Tensor:
        embedded = self.dropout(self.embed(trg_in))  # (B, T, E)
        gates_c, source_part = self._source_parts(state)
        states = (self.states_whole(state, embedded) if embedded.is_cuda
                  else self.states_looped(state, embedded, gates_c))
        rows = keep.nonzero()[:, 0]
        return self.output.features_with_source_part(states[keep], embedded[keep], source_part[rows], keep)

    def states_looped(self, state: DecoderState, embedded: Tensor, gates_c: Tensor) -> Tensor:
        """The decoder's states (B, T, H) over known inputs, step by step: on a CPU the faster way (``gates_c``,
        W_c c, comes from :meth:`_source_parts`; the embeddings' part of the gates is one matrix multiply for
        all steps)."""
        weight_ih, _, weight_hh, bias_hh = self._gru_weights()
        embedding_weight = weight_ih[:, : self.config.embedding_size]  # (3H, E)
        if self.int8 is not None:
            gates = self.int8.affine("decoder.embedding", embedded, embedding_weight).add_(gates_c[:, None, :])
        else:
            gates = (embedded @ embedding_weight.t()).add_(gates_c[:, None, :])  # (B, T, 3H), all steps at once
        hidden, states = state.hidden, []
        for step_gates in gates.unbind(1):
            hidden = gru_update(step_gates, self._hidden_gates(hidden, weight_hh, bias_hh), hidden)
            states.append(hidden)
        return torch.stack(states, dim=1)

    def states_whole(self, state: DecoderState, embedded: Tensor) -> Tensor:
        """The same states by one call of ``torch.nn.GRU`` over the whole sequence (cuDNN's fused kernel on a
        GPU)."""
        c = state.keys.expand(-1, embedded.shape[1], -1)  # (B, T, H)
        states, _ = self.rnn(torch.cat([embedded, c], dim=-1), state.hidden[None].contiguous())
        return cast(Tensor, states)

    def step_features(self, prev: Tensor, state: DecoderState) -> tuple[Tensor, DecoderState]:
        gates_c, source_part = self._source_parts(state)
        weight_ih, _, weight_hh, bias_hh = self._gru_weights()
        hidden_gates = self._hidden_gates(state.hidden, weight_hh, bias_hh)
        if self.training:  # dropout on the embeddings
            embedded = self.dropout(self.embed(prev))  # (B, E)
            gates = torch.addmm(gates_c, embedded, weight_ih[:, : self.config.embedding_size].t())
            hidden = gru_update(gates, hidden_gates, state.hidden)
            features = self.output.features_with_source_part(hidden, embedded, source_part)
        else:  # the word's parts looked up: W_e E y and V_o E y
            words = self._word_table()[prev]  # (B, 3H + units · pool)
            size = 3 * self.config.hidden_size
            hidden = gru_update(gates_c + words[:, :size], hidden_gates, state.hidden)
            features = self.output.features_from_parts(hidden, None, source_part + words[:, size:])
        return features, dataclasses.replace(state, hidden=hidden, step=state.step + 1)

    def _hidden_gates(self, hidden: Tensor, weight_hh: Tensor, bias_hh: Tensor) -> Tensor:
        """The decoder GRU's W_h h + b_h (B, 3H)."""
        if self.int8 is not None:
            return self.int8.affine("decoder.hidden", hidden, weight_hh, bias_hh)
        return torch.addmm(bias_hh, hidden, weight_hh.t())

    def _word_table(self) -> Tensor:
        """[W_e E_v, V_o E_v] (V, 3H + units · pool): each target word's part of the GRU's input gates and of
        the maxout layer's input (:class:`WordTables`)."""
        weight_ih = self._gru_weights()[0]
        linear = self.output.maxout.linear

        def compute() -> Tensor:
            embeddings = self.embed.table().detach()
            return torch.cat([embeddings @ weight_ih[:, : self.config.embedding_size].t(),
                              self.output.word_part(embeddings, bias=False)], dim=1)

        return self.tables.get("decoder", [*self.embed.parameters(), weight_ih, linear.weight], compute)

    def _gru_weights(self) -> tuple[Tensor, Tensor, Tensor, Tensor]:
        """The decoder GRU's W_i (3H, E + H) (columns: E y, then c), b_i, W_h (3H, H) and b_h; gates r, z, n."""
        return _gru_weights(self.rnn)

    def _source_parts(self, state: DecoderState) -> tuple[Tensor, Tensor]:
        """The GRU's W_c c + b_i (B, 3H) and the maxout layer's C_o c + b (B, units · pool), from the state."""
        parts = state.proj_keys[:, 0]
        size = 3 * self.config.hidden_size
        return parts[:, :size], parts[:, size:]


def _gru_weights(rnn: nn.GRU) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """A one-layer GRU's W_i, b_i, W_h and b_h; gates r, z, n."""
    return (cast(Tensor, rnn.weight_ih_l0), cast(Tensor, rnn.bias_ih_l0), cast(Tensor, rnn.weight_hh_l0),
            cast(Tensor, rnn.bias_hh_l0))
