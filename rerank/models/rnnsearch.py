"""RNNsearch (Bahdanau et al. 2014, arXiv:1409.0473), with the attention variants of Luong et al. 2015
(arXiv:1508.04025)."""

from __future__ import annotations

import dataclasses
from typing import Any

import torch
from torch import Tensor, nn

from rerank.models.attention import Attention
from rerank.models.config import ModelConfig
from rerank.models.encoder import DeepBidirectionalEncoder, RecurrentEncoder
from rerank.models.layers import (
    DeepGRU,
    DeepOutput,
    Embeddings,
    WordTables,
    dropout_rows,
    gru_update,
    tanh_,
    word_dropout,
)
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

    The options of Sennrich & Zhang's recipe: ``embedding_dropout`` and ``hidden_dropout`` (the embeddings,
    and the output layer's input), ``word_dropout`` (whole source and target tokens), ``layer_norm`` and
    ``transition_depth`` (the GRUs of encoder and decoder, :class:`DeepGRU`: the decoder then takes the
    looped recurrence on both paths, never the fused one), ``tie_target_embeddings`` (the output layer's
    weight is the target embedding table, one tensor) and ``tie_source_target_embeddings`` (the encoder's
    embedding table is the decoder's: one joint vocabulary).
    """

    has_attention = True

    def __init__(self, config: ModelConfig, src_vocab_size: int, trg_vocab_size: int):
        super().__init__(config, src_vocab_size, trg_vocab_size)
        h, e, c = config.hidden_size, config.embedding_size, config.annotation_size
        embedding_dropout = config.embedding_dropout_rate
        self.deep = config.layer_norm or config.transition_depth > 1
        self.encoder: RecurrentEncoder | DeepBidirectionalEncoder
        if self.deep:
            self.encoder = DeepBidirectionalEncoder(src_vocab_size, e, config.encoder_size, config.layer_norm,
                                                    config.transition_depth, config.embedding_rank,
                                                    embedding_dropout, config.word_dropout)
        else:
            self.encoder = RecurrentEncoder(src_vocab_size, e, config.encoder_size, bidirectional=True,
                                            embedding_rank=config.embedding_rank, dropout=embedding_dropout,
                                            word_dropout=config.word_dropout)
        self.init_state = nn.Linear(config.encoder_size, h)  # W_s
        self.embed = Embeddings(trg_vocab_size, e, config.embedding_rank)
        self.dropout = nn.Dropout(embedding_dropout)  # on the target embeddings
        self.output_dropout = nn.Dropout(config.hidden_dropout_rate)  # on Luong's h̃
        self.attention = Attention(config.attention, h, c)
        self.luong = config.decoder == "luong"
        if self.luong and not config.input_feeding:
            self.rnn = nn.GRU(e, h, batch_first=True)
        else:
            extra = h if self.luong else c  # h̃_{t-1} (input feeding) or c_i
            self.input_gates = nn.Linear(e, 3 * h)  # W_i E y (and b_i): precomputed for all steps
            self.extra_gates = nn.Linear(extra, 3 * h, bias=False)
            self.hidden_gates = nn.Linear(h, 3 * h)
        self.cell = DeepGRU(h, config.layer_norm, config.transition_depth) if self.deep else None
        if self.luong:
            self.combine = nn.Linear(c + h, h, bias=False)  # W_c
            self.output = nn.Linear(h, trg_vocab_size)  # W_s
        else:
            self.deep_output = DeepOutput(h, e, c, config.maxout_size, config.maxout_pool, trg_vocab_size,
                                          config.hidden_dropout_rate)
        self._tie(config, src_vocab_size, trg_vocab_size)
        self.tables = WordTables()

    def max_source_length(self) -> int | None:
        """The location score's limit (it has one output per source position); the other scores have none."""
        attention = self.config.attention
        return attention.max_source_length if attention.score == "location" else None

    def _tie(self, config: ModelConfig, src_vocab_size: int, trg_vocab_size: int) -> None:
        """Share the embedding tables the config ties, initialised N(0, 1/E) (they also act as output weights)."""
        if config.tie_source_target_embeddings:
            if src_vocab_size != trg_vocab_size:
                raise ValueError(f"tie_source_target_embeddings needs one vocabulary: {src_vocab_size} source "
                                 f"and {trg_vocab_size} target entries")
            self.encoder.embed = self.embed
        if config.tie_target_embeddings:
            self.output_layer.weight = self.embed.lookup.weight
        if config.tie_target_embeddings or config.tie_source_target_embeddings:
            with torch.no_grad():
                weight = self.embed.lookup.weight
                weight.normal_(0.0, config.embedding_size ** -0.5)
                weight[PAD_ID] = 0.0

    def _embed_target(self, ids: Tensor) -> Tensor:
        """E y (..., E) after word dropout and dropout (in training)."""
        return self.dropout(word_dropout(self.embed(ids), self.config.word_dropout, self.training))

    def _gru(self, gates_x: Tensor, hidden: Tensor) -> Tensor:
        """The decoder's GRU step from its input-side gates: plain, or :class:`DeepGRU`'s."""
        if self.cell is not None:
            return self.cell(gates_x, self.hidden_gates(hidden), hidden)
        return gru_update(gates_x, self.hidden_gates(hidden), hidden)

    def _apply(self, fn: Any, recurse: bool = True) -> Any:  # .to(), .float(), .cuda() ...: new weights
        self.tables.clear()
        return super()._apply(fn, recurse)

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
        embedded = self._embed_target(trg_in)  # (B, T, E)
        if self.luong and not self.config.input_feeding:
            states, _ = self.rnn(embedded, state.hidden[None].contiguous())  # (B, T, H)
            contexts, weights = self._attend(states, state, state.step)  # (B, T, C), (B, T, S)
            return self.output(self.output_dropout(self._attentional(contexts, states))), weights
        steps = []
        for gates in self.input_gates(embedded).unbind(1):  # (B, 3H) per step; unbind keeps backward linear in T
            state, context = self._recur(gates, state)
            steps.append((state.hidden, context, state.attention))
        states, contexts, weights = (torch.stack(x, dim=1) for x in zip(*steps, strict=True))
        if self.luong:
            return self.output(self.output_dropout(contexts)), weights  # contexts hold h̃ here
        return self.deep_output(states, embedded, contexts), weights

    def _recur(self, input_gates: Tensor, state: DecoderState) -> tuple[DecoderState, Tensor]:
        """One step of the looped decoders. Returns the new state and c_i (Bahdanau) or h̃_t (Luong)."""
        if self.luong:  # input feeding
            hidden = self._gru(input_gates + self.extra_gates(state.feed), state.hidden)
            context, weights = self._attend(hidden[:, None], state, state.step)
            attentional = self._attentional(context[:, 0], hidden)
            new = dataclasses.replace(state, hidden=hidden, feed=attentional, attention=weights[:, 0],
                                      step=state.step + 1)
            return new, attentional
        context, weights = self._attend(state.hidden[:, None], state, state.step)  # query s_{i-1}
        context = context[:, 0]
        hidden = self._gru(input_gates + self.extra_gates(context), state.hidden)
        new = dataclasses.replace(state, hidden=hidden, attention=weights[:, 0], step=state.step + 1)
        return new, context

    def step_reference(self, prev: Tensor, state: DecoderState) -> tuple[Tensor, DecoderState]:
        embedded = self._embed_target(prev)  # (B, E)
        if self.luong and not self.config.input_feeding:
            states, _ = self.rnn(embedded[:, None], state.hidden[None].contiguous())  # (B, 1, H)
            contexts, weights = self._attend(states, state, state.step)
            logits = self.output(self.output_dropout(self._attentional(contexts, states)))[:, 0]
            new = dataclasses.replace(state, hidden=states[:, 0], attention=weights[:, 0], step=state.step + 1)
            return torch.log_softmax(logits, dim=-1), new
        new, context = self._recur(self.input_gates(embedded), state)
        if self.luong:
            logits = self.output(self.output_dropout(context))
        else:
            logits = self.deep_output(new.hidden, embedded, context)
        return torch.log_softmax(logits, dim=-1), new

    # The fast path: the output layer at real positions only; Bahdanau's additive global attention
    # with W_a s_{i-1} and the GRU's W_h s_{i-1} as one matrix multiply per step.

    @property
    def output_layer(self) -> nn.Linear:
        return self.output if self.luong else self.deep_output.project

    def features(self, state: DecoderState, trg_in: Tensor, keep: Tensor) -> Tensor:
        embedded = self._embed_target(trg_in)  # (B, T, E)
        if self.luong and not self.config.input_feeding:
            states, _ = self.rnn(embedded, state.hidden[None].contiguous())  # (B, T, H)
            contexts, _ = self._attend(states, state, state.step)  # (B, T, C)
            attentional = self._attentional(contexts[keep], states[keep])
            return dropout_rows(attentional, keep, self.output_dropout.p, self.training)
        gates = self._input_gates(embedded)  # (B, T, 3H)
        if self._fused_attention() and torch.is_grad_enabled():  # training: the backward pass by hand
            recurrent = _FusedRecurrence(self, state)
            inputs = (gates, state.hidden, state.keys, state.proj_keys, state.pad_mask, recurrent.weight,
                      recurrent.bias, recurrent.energy, recurrent.extra)
            with torch.autocast(gates.device.type, enabled=False):  # under bf16 autocast too: float32
                states, contexts = _Recurrence.apply(  # type: ignore[no-untyped-call]
                    *(x.float() if x.dtype in (torch.bfloat16, torch.float16) else x for x in inputs))
            return self.deep_output.features(states[keep], embedded[keep], contexts[keep], keep)
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
            return dropout_rows(contexts[keep], keep, self.output_dropout.p, self.training)
        return self.deep_output.features(states[keep], embedded[keep], contexts[keep], keep)

    def step_features(self, prev: Tensor, state: DecoderState) -> tuple[Tensor, DecoderState]:
        if self._fused_attention() and not self.training:  # the word's parts looked up
            words = self._word_table()[prev]  # (B, 3H + units · pool)
            size = 3 * self.config.hidden_size
            hidden, context, weights = _FusedRecurrence(self, state).step(words[:, :size])
            new = dataclasses.replace(state, hidden=hidden, attention=weights, step=state.step + 1)
            return self.deep_output.features_from_parts(hidden, context, words[:, size:]), new
        embedded = self._embed_target(prev)  # (B, E)
        if self.luong and not self.config.input_feeding:
            states, _ = self.rnn(embedded[:, None], state.hidden[None].contiguous())  # (B, 1, H)
            contexts, weights = self._attend(states, state, state.step)
            features = self.output_dropout(self._attentional(contexts, states))[:, 0]
            return features, dataclasses.replace(state, hidden=states[:, 0], attention=weights[:, 0],
                                                 step=state.step + 1)
        gates = self._input_gates(embedded)
        if self._fused_attention():
            hidden, context, weights = _FusedRecurrence(self, state).step(gates)
            new = dataclasses.replace(state, hidden=hidden, attention=weights, step=state.step + 1)
        else:
            new, context = self._recur(gates, state)
        if self.luong:
            return self.output_dropout(context), new
        return self.deep_output.features(new.hidden, embedded, context), new

    def _input_gates(self, embedded: Tensor) -> Tensor:
        """W_i E y + b_i (..., 3H)."""
        if self.int8 is not None:
            return self.int8.affine("input_gates", embedded, self.input_gates.weight, self.input_gates.bias)
        return self.input_gates(embedded)

    def _word_table(self) -> Tensor:
        """[W_i E_v + b_i, V_o E_v + b_o] (V, 3H + units · pool): each target word's input-side gates and its
        part of the maxout layer's input (:class:`WordTables`)."""
        linear = self.deep_output.maxout.linear

        def compute() -> Tensor:
            embeddings = self.embed.table().detach()
            return torch.cat([self.input_gates(embeddings), self.deep_output.word_part(embeddings, bias=True)], dim=1)

        weights = [*self.embed.parameters(), *self.input_gates.parameters(), linear.weight, linear.bias]
        return self.tables.get("decoder", weights, compute)

    def _fused_attention(self) -> bool:
        attention = self.config.attention
        return not self.luong and not self.deep and attention.score == "additive" and attention.window == "global"


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
        self.int8 = model.int8
        self.sources = [model.hidden_gates.weight, attention.query_layer.weight, bias]

    def step(self, input_gates: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """s_i (B, H), c_i (B, C) and α_i (B, S) from the input-side gates W_i E y_{i-1} + b_i (B, 3H)."""
        if self.int8 is None:
            self.hidden, context, weights = fused_step(self.hidden, input_gates, self.weight, self.bias, self.proj_keys,
                                                       self.energy, self.pad_mask, self.keys, self.extra)
            return self.hidden, context, weights
        projected = self.int8.linear("hidden_query", self.hidden, self.sources, lambda: (self.weight, self.bias))
        hidden_gates, query = projected[:, : 3 * self.size], projected[:, 3 * self.size:]
        context, weights = attend_additive(query, self.proj_keys, self.energy, self.pad_mask, self.keys)
        gates = input_gates + self.int8.affine("extra_gates", context, self.extra)
        self.hidden = gru_update(gates, hidden_gates, self.hidden)
        return self.hidden, context, weights


def fused_step(hidden: Tensor, input_gates: Tensor, weight: Tensor, bias: Tensor, proj_keys: Tensor, energy: Tensor,
               pad_mask: Tensor, keys: Tensor, extra: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """:meth:`_FusedRecurrence.step` in fp32, a function of tensors alone (``bench/bench_compile.py`` compiles it):
    s_i, c_i and α_i from s_{i-1} (B, H), W_i E y_{i-1} + b_i (B, 3H), [W_h; W_a], [b_h; 0], U_a h_j, v_a, the
    padding mask, the annotations h_j and W_c."""
    projected = torch.addmm(bias, hidden, weight.t())  # (B, 3H + A)
    size = input_gates.shape[1]
    hidden_gates, query = projected[:, :size], projected[:, size:]
    context, weights = attend_additive(query, proj_keys, energy, pad_mask, keys)
    return gru_update(torch.addmm(input_gates, context, extra.t()), hidden_gates, hidden), context, weights


def attend_additive(query: Tensor, proj_keys: Tensor, energy: Tensor, pad_mask: Tensor,
                    keys: Tensor) -> tuple[Tensor, Tensor]:
    """c_i (B, C) and α_i (B, S) from the query W_a s_{i-1} (B, A): e_ij = v_aᵀ tanh(W_a s_{i-1} + U_a h_j)."""
    energies = tanh_(query[:, None, :] + proj_keys) @ energy  # (B, S)
    energies = energies.masked_fill(pad_mask, torch.finfo(energies.dtype).min)
    weights = torch.softmax(energies, dim=-1)  # exactly 0 at padding: a source has at least </s>
    context = torch.bmm(weights[:, None, :], keys)[:, 0]  # (B, C)
    return context, weights


class _Recurrence(torch.autograd.Function):
    """:class:`_FusedRecurrence` over all T steps, with its backward pass written out.

    Autograd would record some twenty operations per step and compute the gradients of the weights
    step by step, from B rows at a time. Here the backward pass runs through the steps in reverse
    computing only what flows back to the previous step; the weights' gradients are then each one
    matrix multiply over all B·T rows: [W_h; W_a] from the (gate, query) gradients and s_{i-1}, W_c
    (the context's gates) from the gate gradients and c_i, v_a from the score gradients and the
    tanh energies, and the annotations' from α and the context gradients.

    Inputs: the input-side gates W_i E y + b_i (B, T, 3H), s_0 (B, H), the annotations h_j (B, S, C),
    U_a h_j (B, S, A), the padding mask (B, S), [W_h; W_a] (3H + A, H), [b_h; 0] (3H + A), v_a (A,)
    and W_c (3H, C). Outputs: s_1..s_T (B, T, H) and c_1..c_T (B, T, C). Under autocast (bf16) it runs in
    float32 (its caller turns autocast off): the recurrence is many small steps whose error would add up.
    """

    @staticmethod
    def forward(ctx: Any, gates: Tensor, hidden: Tensor, keys: Tensor, proj_keys: Tensor, pad_mask: Tensor,
                weight: Tensor, bias: Tensor, energy: Tensor, extra: Tensor) -> tuple[Tensor, Tensor]:
        batch, steps, _ = gates.shape
        size = hidden.shape[1]
        lowest = torch.finfo(gates.dtype).min
        previous = gates.new_empty(steps, batch, size)  # s_{i-1}
        saved = gates.new_empty(4, steps, batch, size)  # r, z, n and W_hn s_{i-1} + b_hn of each step
        tanh = gates.new_empty(steps, batch, *proj_keys.shape[1:])  # (T, B, S, A)
        weights = gates.new_empty(steps, batch, keys.shape[1])  # α (T, B, S)
        states = gates.new_empty(batch, steps, size)
        contexts = gates.new_empty(batch, steps, keys.shape[2])
        for t in range(steps):
            previous[t] = hidden
            projected = torch.addmm(bias, hidden, weight.t())  # (B, 3H + A)
            h_r, h_z, h_n = projected[:, : 3 * size].chunk(3, dim=1)
            tanh_(torch.add(projected[:, None, 3 * size:], proj_keys, out=tanh[t]))
            scores = (tanh[t] @ energy).masked_fill_(pad_mask, lowest)
            torch.softmax(scores, dim=-1, out=weights[t])
            context = torch.bmm(weights[t][:, None, :], keys)[:, 0]  # (B, C)
            contexts[:, t] = context
            x_r, x_z, x_n = torch.addmm(gates[:, t], context, extra.t()).chunk(3, dim=1)
            r = torch.sigmoid(x_r + h_r, out=saved[0, t])
            z = torch.sigmoid(x_z + h_z, out=saved[1, t])
            saved[3, t] = h_n
            n = torch.tanh(torch.addcmul(x_n, r, h_n), out=saved[2, t])
            hidden = n + z * (hidden - n)
            states[:, t] = hidden
        ctx.save_for_backward(keys, pad_mask, weight, energy, extra, previous, saved, tanh, weights, contexts)
        return states, contexts

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx: Any, grad_states: Tensor, grad_contexts: Tensor) -> tuple[Tensor | None, ...]:
        keys, pad_mask, weight, energy, extra, previous, saved, tanh, weights, contexts = ctx.saved_tensors
        steps, batch, size = previous.shape
        grad_gates = grad_states.new_empty(batch, steps, 3 * size)  # also the gradient of W_c c_i's gates
        grad_projected = grad_states.new_empty(steps, batch, weight.shape[0])  # of [W_h; W_a] s_{i-1} + b
        grad_scores = grad_states.new_empty(steps, batch, keys.shape[1])  # of the energies e_ij
        grad_context_all = grad_states.new_empty(steps, batch, keys.shape[2])
        grad_proj_keys = torch.zeros_like(tanh[0])
        grad_hidden = torch.zeros_like(previous[0])
        for t in reversed(range(steps)):
            grad_hidden = grad_hidden + grad_states[:, t]
            r, z, n, h_n = saved[:, t]
            grad_n = grad_hidden * (1 - z) * (1 - n * n)  # through n = tanh(x_n + r h_n)
            grad_r = grad_n * h_n * r * (1 - r)
            grad_z = grad_hidden * (previous[t] - n) * z * (1 - z)
            gate_part = grad_gates[:, t]
            gate_part[:, :size], gate_part[:, size: 2 * size], gate_part[:, 2 * size:] = grad_r, grad_z, grad_n
            hidden_part = grad_projected[t]
            hidden_part[:, :size], hidden_part[:, size: 2 * size] = grad_r, grad_z
            hidden_part[:, 2 * size: 3 * size] = grad_n * r
            grad_context = torch.addmm(grad_contexts[:, t], gate_part, extra)  # (B, C)
            grad_context_all[t] = grad_context
            grad_weights = torch.bmm(keys, grad_context[:, :, None])[:, :, 0]  # (B, S)
            alpha = weights[t]
            grad_score = alpha * (grad_weights - (alpha * grad_weights).sum(1, keepdim=True))
            grad_scores[t] = grad_score
            grad_energy = (grad_score[:, :, None] * energy) * (1 - tanh[t] * tanh[t])  # (B, S, A)
            grad_proj_keys += grad_energy
            hidden_part[:, 3 * size:] = grad_energy.sum(1)
            grad_hidden = torch.addmm(grad_hidden * z, hidden_part, weight)
        flat_previous = previous.view(steps * batch, size)
        flat_projected = grad_projected.view(steps * batch, -1)
        grad_weight = flat_projected.t() @ flat_previous
        grad_bias = flat_projected.sum(0)
        grad_extra = grad_gates.view(batch * steps, -1).t() @ contexts.reshape(batch * steps, -1)
        grad_energy_vector = grad_scores.view(1, -1) @ tanh.view(-1, tanh.shape[-1])
        grad_keys = torch.bmm(weights.permute(1, 2, 0), grad_context_all.transpose(0, 1))  # (B, S, C)
        return (grad_gates, grad_hidden, grad_keys, grad_proj_keys, None, grad_weight, grad_bias,
                grad_energy_vector[0], grad_extra)
