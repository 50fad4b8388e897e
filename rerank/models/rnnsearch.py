"""RNNsearch (Bahdanau et al. 2014, arXiv:1409.0473), with the attention variants of Luong et al. 2015
(arXiv:1508.04025)."""

from __future__ import annotations

import dataclasses

import torch
from torch import Tensor, nn

from rerank.models.attention import Attention
from rerank.models.config import ModelConfig
from rerank.models.encoder import RecurrentEncoder
from rerank.models.layers import DeepOutput, Embeddings, dropout_rows, gru_update
from rerank.models.seq2seq import DecoderState, Seq2Seq
from rerank.models.vocab import PAD_ID


class RNNSearch(Seq2Seq):
    """A bidirectional GRU encoder and an attentional GRU decoder.

    Annotations h_j = [→h_j; ←h_j]; the decoder starts from s_0 = tanh(W_s ←h_1) (A.2.2).

    ``decoder: bahdanau`` (A.2.2): c_i = Σ_j α_ij h_j with α from s_{i-1};
    s_i = GRU(s_{i-1}, [E y_{i-1}; c_i]); p(y_i) = softmax(W_o maxout(U_o s_i + V_o E y_{i-1} + C_o c_i)).

    ``decoder: luong`` (Luong et al. 2015, Sec. 3): h_t = GRU(h_{t-1}, [E y_{t-1}; h̃_{t-1}]) (the h̃ input
    only with input feeding, Sec. 3.3); c_t from α with h_t; h̃_t = tanh(W_c [c_t; h_t]);
    p(y_t) = softmax(W_s h̃_t). Without input feeding the recurrence runs as one fused GRU call and
    attention for all steps at once.
    """

    def __init__(self, config: ModelConfig, src_vocab_size: int, trg_vocab_size: int):
        super().__init__(config, src_vocab_size, trg_vocab_size)
        h, e, c = config.hidden_size, config.embedding_size, config.annotation_size
        self.encoder = RecurrentEncoder(src_vocab_size, e, config.encoder_size, bidirectional=True,
                                        embedding_rank=config.embedding_rank, dropout=config.dropout)
        self.init_state = nn.Linear(config.encoder_size, h)  # W_s
        self.embed = Embeddings(trg_vocab_size, e, config.embedding_rank)
        self.dropout = nn.Dropout(config.dropout)
        self.attention = Attention(config.attention, h, c)
        self.luong = config.decoder == "luong"
        if self.luong and not config.input_feeding:
            self.rnn = nn.GRU(e, h, batch_first=True)
        else:
            extra = h if self.luong else c  # h̃_{t-1} (input feeding) or c_i
            self.input_gates = nn.Linear(e, 3 * h)  # W_i E y (and b_i): precomputed for all steps
            self.extra_gates = nn.Linear(extra, 3 * h, bias=False)
            self.hidden_gates = nn.Linear(h, 3 * h)
        if self.luong:
            self.combine = nn.Linear(c + h, h, bias=False)  # W_c
            self.output = nn.Linear(h, trg_vocab_size)  # W_s
        else:
            self.deep_output = DeepOutput(h, e, c, config.maxout_size, config.maxout_pool, trg_vocab_size,
                                          config.dropout)

    def encode(self, src: Tensor, src_len: Tensor) -> DecoderState:
        annotations, final = self.encoder(src, src_len)  # (B, S, 2H), (2, B, H)
        hidden = torch.tanh(self.init_state(final[1]))  # from ←h_1
        feed = torch.zeros_like(hidden) if self.config.input_feeding else None
        return DecoderState(hidden=hidden, keys=annotations, proj_keys=self.attention.precompute(annotations),
                            pad_mask=src == PAD_ID, src_len=src_len, feed=feed)

    def _attend(self, queries: Tensor, state: DecoderState, first_step: int) -> tuple[Tensor, Tensor]:
        return self.attention(queries, state.keys, state.proj_keys, state.pad_mask, state.src_len, first_step)

    def _attentional(self, contexts: Tensor, states: Tensor) -> Tensor:
        """h̃ = tanh(W_c [c; h]) (Luong et al. 2015, Eq. 5)."""
        return torch.tanh(self.combine(torch.cat([contexts, states], dim=-1)))

    def teacher_forced(self, state: DecoderState, trg_in: Tensor) -> tuple[Tensor, Tensor]:
        embedded = self.dropout(self.embed(trg_in))  # (B, T, E)
        if self.luong and not self.config.input_feeding:
            states, _ = self.rnn(embedded, state.hidden[None].contiguous())  # (B, T, H)
            contexts, weights = self._attend(states, state, state.step)  # (B, T, C), (B, T, S)
            return self.output(self.dropout(self._attentional(contexts, states))), weights
        steps = []
        for gates in self.input_gates(embedded).unbind(1):  # (B, 3H) per step; unbind keeps backward linear in T
            state, context = self._recur(gates, state)
            steps.append((state.hidden, context, state.attention))
        states, contexts, weights = (torch.stack(x, dim=1) for x in zip(*steps, strict=True))
        if self.luong:
            return self.output(self.dropout(contexts)), weights  # contexts hold h̃ here
        return self.deep_output(states, embedded, contexts), weights

    def _recur(self, input_gates: Tensor, state: DecoderState) -> tuple[DecoderState, Tensor]:
        """One step of the looped decoders. Returns the new state and c_i (Bahdanau) or h̃_t (Luong)."""
        if self.luong:  # input feeding
            hidden = gru_update(input_gates + self.extra_gates(state.feed), self.hidden_gates(state.hidden),
                                state.hidden)
            context, weights = self._attend(hidden[:, None], state, state.step)
            attentional = self._attentional(context[:, 0], hidden)
            new = dataclasses.replace(state, hidden=hidden, feed=attentional, attention=weights[:, 0],
                                      step=state.step + 1)
            return new, attentional
        context, weights = self._attend(state.hidden[:, None], state, state.step)  # query s_{i-1}
        context = context[:, 0]
        hidden = gru_update(input_gates + self.extra_gates(context), self.hidden_gates(state.hidden), state.hidden)
        new = dataclasses.replace(state, hidden=hidden, attention=weights[:, 0], step=state.step + 1)
        return new, context

    def step_reference(self, prev: Tensor, state: DecoderState) -> tuple[Tensor, DecoderState]:
        embedded = self.dropout(self.embed(prev))  # (B, E)
        if self.luong and not self.config.input_feeding:
            states, _ = self.rnn(embedded[:, None], state.hidden[None].contiguous())  # (B, 1, H)
            contexts, weights = self._attend(states, state, state.step)
            logits = self.output(self.dropout(self._attentional(contexts, states)))[:, 0]
            new = dataclasses.replace(state, hidden=states[:, 0], attention=weights[:, 0], step=state.step + 1)
            return torch.log_softmax(logits, dim=-1), new
        new, context = self._recur(self.input_gates(embedded), state)
        if self.luong:
            logits = self.output(self.dropout(context))
        else:
            logits = self.deep_output(new.hidden, embedded, context)
        return torch.log_softmax(logits, dim=-1), new

    # The fast path: the output layer at real positions only; Bahdanau's additive global attention
    # with W_a s_{i-1} and the GRU's W_h s_{i-1} as one matrix multiply per step.

    @property
    def output_layer(self) -> nn.Linear:
        return self.output if self.luong else self.deep_output.project

    def features(self, state: DecoderState, trg_in: Tensor, keep: Tensor) -> Tensor:
        embedded = self.dropout(self.embed(trg_in))  # (B, T, E)
        if self.luong and not self.config.input_feeding:
            states, _ = self.rnn(embedded, state.hidden[None].contiguous())  # (B, T, H)
            contexts, _ = self._attend(states, state, state.step)  # (B, T, C)
            return dropout_rows(self._attentional(contexts[keep], states[keep]), keep, self.dropout.p, self.training)
        gates = self.input_gates(embedded)  # (B, T, 3H)
        if self._fused_attention():
            recurrent = _FusedRecurrence(self, state)
            steps = [recurrent.step(gates[:, t])[:2] for t in range(trg_in.shape[1])]
        else:
            steps = []
            for step_gates in gates.unbind(1):
                state, context = self._recur(step_gates, state)
                steps.append((state.hidden, context))
        states, contexts = (torch.stack(x, dim=1) for x in zip(*steps, strict=True))  # (B, T, H), (B, T, C)
        if self.luong:  # input feeding: contexts hold h̃
            return dropout_rows(contexts[keep], keep, self.dropout.p, self.training)
        return self.deep_output.features(states[keep], embedded[keep], contexts[keep], keep)

    def step_features(self, prev: Tensor, state: DecoderState) -> tuple[Tensor, DecoderState]:
        embedded = self.dropout(self.embed(prev))  # (B, E)
        if self.luong and not self.config.input_feeding:
            states, _ = self.rnn(embedded[:, None], state.hidden[None].contiguous())  # (B, 1, H)
            contexts, weights = self._attend(states, state, state.step)
            features = self.dropout(self._attentional(contexts, states))[:, 0]
            return features, dataclasses.replace(state, hidden=states[:, 0], attention=weights[:, 0],
                                                 step=state.step + 1)
        gates = self.input_gates(embedded)
        if self._fused_attention():
            hidden, context, weights = _FusedRecurrence(self, state).step(gates)
            new = dataclasses.replace(state, hidden=hidden, attention=weights, step=state.step + 1)
        else:
            new, context = self._recur(gates, state)
        if self.luong:
            return self.dropout(context), new
        return self.deep_output.features(new.hidden, embedded, context), new

    def _fused_attention(self) -> bool:
        attention = self.config.attention
        return not self.luong and attention.score == "additive" and attention.window == "global"


class _FusedRecurrence:
    """Bahdanau's decoder step with additive global attention, s_{i-1} projected once for both uses.

    [W_h; W_a] s_{i-1} gives the GRU's hidden-side gates and the attention query in one matrix
    multiply; e_ij = v_aᵀ tanh(W_a s_{i-1} + U_a h_j) with U_a h_j precomputed (the state's
    ``proj_keys``); α masked at padding, c_i = Σ_j α_ij h_j; s_i = GRU(s_{i-1}, [E y_{i-1}; c_i]).
    The same numbers as ``RNNSearch._recur`` (to float rounding), with fewer and larger operations.
    """

    def __init__(self, model: RNNSearch, state: DecoderState):
        attention = model.attention
        self.size = model.config.hidden_size
        self.weight = torch.cat([model.hidden_gates.weight, attention.query_layer.weight])  # (3H + A, H)
        bias = model.hidden_gates.bias
        self.bias = torch.cat([bias, bias.new_zeros(attention.config.hidden_size)])
        self.energy = attention.energy.weight[0]  # (A,)
        self.extra = model.extra_gates.weight  # (3H, C)
        self.keys, self.proj_keys, self.pad_mask = state.keys, state.proj_keys, state.pad_mask
        self.hidden = state.hidden

    def step(self, input_gates: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """s_i (B, H), c_i (B, C) and α_i (B, S) from the input-side gates W_i E y_{i-1} + b_i (B, 3H)."""
        projected = torch.addmm(self.bias, self.hidden, self.weight.t())  # (B, 3H + A)
        hidden_gates, query = projected[:, : 3 * self.size], projected[:, 3 * self.size:]
        energies = torch.tanh(query[:, None, :] + self.proj_keys) @ self.energy  # (B, S)
        energies = energies.masked_fill(self.pad_mask, torch.finfo(energies.dtype).min)
        weights = torch.softmax(energies, dim=-1)  # exactly 0 at padding: a source has at least </s>
        context = torch.bmm(weights[:, None, :], self.keys)[:, 0]  # (B, C)
        self.hidden = gru_update(torch.addmm(input_gates, context, self.extra.t()), hidden_gates, self.hidden)
        return self.hidden, context, weights
