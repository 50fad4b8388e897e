"""Small building blocks shared by both architectures.

Shape legend in comments: B batch, S source length, T target length, H hidden, E embedding,
C context (annotation) size, V vocabulary.
"""

from __future__ import annotations

import copy
import warnings
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import torch
from torch import Tensor, nn
from torch.ao.nn.quantized.dynamic import GRU as DynamicGRU
from torch.ao.quantization.qconfig import per_channel_dynamic_qconfig


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

    def table(self) -> Tensor:
        """Every word's embedding (V, E)."""
        weight = self.lookup.weight
        return weight if self.expand is None else self.expand(weight)


class DerivedFromWeights:
    """Values computed from a model's weights, each kept under its name until one of the tensors it
    was computed from has changed: replaced, or written in place (its version counter moves). A model
    that converts or moves its weights (``Module.to``, ``float``, ...) clears them (:meth:`clear`).
    Computed without gradient: for inference only."""

    def __init__(self) -> None:
        self._values: dict[str, tuple[tuple[int, ...], Any]] = {}

    def clear(self) -> None:
        self._values.clear()

    def derived(self, name: str, sources: Sequence[Tensor], make: Callable[[], Any]) -> Any:
        """``make()``, computed again when one of ``sources`` has changed since it was last made."""
        key = tuple(v for t in sources for v in (id(t), t.data_ptr(), t._version, *t.shape))
        found = self._values.get(name)
        if found is None or found[0] != key:
            with torch.no_grad():
                found = key, make()
            self._values[name] = found
        return found[1]


class WordTables(DerivedFromWeights):
    """Projections of every target word's embedding, W E_v for the whole vocabulary (V, *), so that a
    decoding step looks up W E y instead of multiplying its embeddings again: the input-side gates of
    the decoder's GRU and the embedding's part of the maxout layer depend on the word alone.

    A table is computed on first use and again whenever one of the weights it was computed from has
    changed: replaced, or written in place (its version counter moves); a model that converts or moves
    its weights (``Module.to``, ``float``, ...) clears its tables (:meth:`clear`). Not for training:
    dropout on the embeddings would make the table wrong, and it carries no gradient.
    """

    def get(self, name: str, weights: Sequence[Tensor], compute: Callable[[], Tensor]) -> Tensor:
        table: Tensor = self.derived(name, weights, compute)
        return table


PRECISIONS = ("fp32", "int8")


class Int8Matrices(DerivedFromWeights):
    """int8 copies of a model's weight matrices, for inference on the CPU.

    Each matrix W (out, in) is quantized per output row, symmetrically: row k becomes round(W_k / s_k)
    in [-127, 127] with s_k = max |W_k| / 127, and is packed once for fbgemm. A product runs
    ``torch.ops.quantized.linear_dynamic``: the input rows are quantized on the fly to unsigned 8 bits
    over their own range (7 bits, so that AVX2's pairwise int16 sums cannot saturate), the products
    are summed in int32 and scaled back to float32, the bias added in float32.

    Each call site names its matrix; the packed copy is made on first use and again whenever one of
    the tensors it was made from has changed (:class:`DerivedFromWeights`). No gradient flows through it:
    for inference only. :meth:`gru` does the same for a whole ``nn.GRU``.
    """

    def _copy(self, name: str, sources: Sequence[Tensor], make: Callable[[], Any]) -> Any:
        """The int8 copy ``make()`` of what ``sources`` hold, made again when one of them has changed."""
        # the models of an ensemble share one set: each its own copies
        return self.derived(f"{name}@{sources[0].data_ptr()}", sources, make)

    def linear(self, name: str, x: Tensor, sources: Sequence[Tensor],
               matrix: Callable[[], tuple[Tensor, Tensor | None]]) -> Tensor:
        """x W^T + b (..., out) for x (..., in), where ``matrix`` gives W and b (or None), computed from
        ``sources``; in float32, returned in x's dtype."""
        packed = self._copy(name, sources, lambda: pack_int8(*matrix()))
        result: Tensor = torch.ops.quantized.linear_dynamic(x.float().contiguous(), packed, True)
        return result.to(x.dtype)

    def gru(self, name: str, module: nn.GRU) -> nn.Module:
        """``module`` as torch's dynamically quantized GRU (the same call, packed sequences included): its
        weight matrices quantized per output row, symmetrically, the inputs of each product quantized on
        the fly, the gates' arithmetic in float32."""
        return self._copy(name, list(module.parameters()), lambda: quantized_gru(module))

    def affine(self, name: str, x: Tensor, weight: Tensor, bias: Tensor | None = None) -> Tensor:
        """x W^T + b for a weight (out, in) and bias (out,) that are tensors of the model (or views of them)."""
        sources = [weight] if bias is None else [weight, bias]
        return self.linear(name, x, sources, lambda: (weight, bias))


def pack_int8(weight: Tensor, bias: Tensor | None) -> Any:
    """``weight`` (out, in) quantized symmetrically per output row and packed with ``bias`` for fbgemm."""
    weight = weight.detach().float().contiguous()
    scales = (weight.abs().amax(dim=1) / 127).clamp_min(torch.finfo(torch.float32).tiny).double()
    zero_points = torch.zeros(weight.shape[0], dtype=torch.long)
    with warnings.catch_warnings():  # the quantized tensor is only the packing routine's input format
        warnings.simplefilter("ignore", UserWarning)
        quantized = torch.quantize_per_channel(weight, scales, zero_points, 0, torch.qint8)
    return torch.ops.quantized.linear_prepack(quantized, None if bias is None else bias.detach().float())


def quantized_gru(module: nn.GRU) -> nn.Module:
    """An int8 copy of ``module`` (:meth:`Int8Matrices.gru`); ``module`` itself is left as it was."""
    float_module = copy.copy(module)  # from_float reads its qconfig: set on a copy, not on the model's GRU
    float_module.qconfig = per_channel_dynamic_qconfig
    with warnings.catch_warnings():  # quantized tensors are only the packing routine's input format
        warnings.simplefilter("ignore", UserWarning)
        return DynamicGRU.from_float(float_module)  # type: ignore[no-untyped-call]


class Maxout(nn.Module):
    """A linear layer followed by a max over pools of ``pool`` units (Goodfellow et al. 2013)."""

    def __init__(self, in_size: int, units: int, pool: int = 2):
        super().__init__()
        self.linear = nn.Linear(in_size, units * pool)
        self.units, self.pool = units, pool

    def forward(self, x: Tensor) -> Tensor:  # (..., in) -> (..., units)
        return self.pool_max(self.linear(x))

    def pool_max(self, y: Tensor) -> Tensor:  # (..., units · pool) -> (..., units)
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
        self.state_size, self.embedding_size, self.context_size = state_size, embedding_size, context_size
        self.dropout = nn.Dropout(dropout)
        self.project = nn.Linear(units, vocab_size)
        self.int8: Int8Matrices | None = None  # set for int8 inference (Seq2Seq.set_precision)

    def forward(self, state: Tensor, embedded: Tensor, context: Tensor) -> Tensor:  # (..., *) -> (..., V)
        hidden = self.maxout(torch.cat([state, embedded, context], dim=-1))
        return self.project(self.dropout(hidden))

    def features(self, state: Tensor, embedded: Tensor, context: Tensor, keep: Tensor | None = None) -> Tensor:
        """The projection's input, t_i after dropout (N, units), from inputs (N, *); ``keep`` (B, T): the
        positions the N rows come from, for the dropout mask (:func:`dropout_rows`)."""
        inputs = torch.cat([state, embedded, context], dim=-1)
        if self.int8 is not None:
            linear = self.maxout.linear
            return self._dropped(self.maxout.pool_max(self.int8.affine("maxout", inputs, linear.weight, linear.bias)),
                                 keep)
        return self._dropped(self.maxout(inputs), keep)

    def source_part(self, context: Tensor) -> Tensor:
        """C_o c + b (..., units · pool): the part of the maxout layer's input that a constant context gives."""
        linear = self.maxout.linear
        return nn.functional.linear(context, linear.weight[:, self.context_columns()], linear.bias)

    def word_part(self, embeddings: Tensor, bias: bool) -> Tensor:
        """V_o E_v (V, units · pool), with the bias b if ``bias``, for every word's embedding (V, E): the
        embedding's part of the maxout layer's input."""
        linear = self.maxout.linear
        weight = linear.weight[:, self.state_size: self.state_size + self.embedding_size]
        return nn.functional.linear(embeddings, weight, linear.bias if bias else None)

    def features_from_parts(self, state: Tensor, context: Tensor | None, parts: Tensor) -> Tensor:
        """:meth:`features` in evaluation mode from the state, the context and ``parts`` (B, units · pool):
        the word's part with the bias (:meth:`word_part`), or with ``context`` None the word's and the
        context's parts (:meth:`source_part`)."""
        weight = self.maxout.linear.weight
        if self.int8 is not None:
            if context is None:
                y = parts + self.int8.affine("maxout.state", state, weight[:, : self.state_size])
            else:
                columns = weight[:, : self.state_size], weight[:, self.context_columns()]
                y = parts + self.int8.linear("maxout.state_context", torch.cat([state, context], dim=-1), [weight],
                                             lambda: (torch.cat(columns, dim=1), None))
            return self.dropout(self.maxout.pool_max(y))
        y = torch.addmm(parts, state, weight[:, : self.state_size].t())
        if context is not None:
            y = torch.addmm(y, context, weight[:, self.context_columns()].t())
        return self.dropout(self.maxout.pool_max(y))

    def features_with_source_part(self, state: Tensor, embedded: Tensor, source_part: Tensor,
                                  keep: Tensor | None = None) -> Tensor:
        """:meth:`features` with the context's part precomputed (:meth:`source_part`, one row per input row)."""
        linear = self.maxout.linear
        inputs = torch.cat([state, embedded], dim=-1)
        columns = slice(0, self.context_columns().start)
        if self.int8 is not None:
            y = source_part + self.int8.affine("maxout.state_embedding", inputs, linear.weight[:, columns])
        else:
            y = torch.addmm(source_part, inputs, linear.weight[:, columns].t())
        return self._dropped(self.maxout.pool_max(y), keep)

    def context_columns(self) -> slice:
        return slice(self.maxout.linear.in_features - self.context_size, None)

    def _dropped(self, hidden: Tensor, keep: Tensor | None) -> Tensor:
        if keep is None:
            return self.dropout(hidden)
        return dropout_rows(hidden, keep, self.dropout.p, self.training)


def tanh_(x: Tensor) -> Tensor:
    """tanh of ``x`` in place. On the CPU as 2σ(2x) − 1: torch's vectorised sigmoid is several times
    faster there than its tanh, and the two agree to float rounding (2e-7 in float32)."""
    if x.device.type != "cpu":
        return x.tanh_()
    return x.mul_(2).sigmoid_().mul_(2).sub_(1)


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


class GateNorm(nn.Module):
    """Layer normalisation of a GRU's projection (..., 3H), each gate's H units on their own, with a gain
    and a bias per unit (Ba et al. 2016, as Nematus normalises its GRUs)."""

    def __init__(self, size: int):
        super().__init__()
        self.gain = nn.Parameter(torch.ones(3 * size))
        self.bias = nn.Parameter(torch.zeros(3 * size))
        self.size = size

    def forward(self, x: Tensor) -> Tensor:
        normed = nn.functional.layer_norm(x.view(*x.shape[:-1], 3, self.size), (self.size,), eps=1e-5)
        return torch.addcmul(self.bias, normed.view_as(x), self.gain)


class Transition(nn.Module):
    """A GRU transition without input, s' = GRU(s, ·) from U s + b alone: the second and later transitions
    of a deep-transition GRU (Pascanu et al. 2014; Barone et al. 2017, Nematus' transition depth)."""

    def __init__(self, size: int, layer_norm: bool):
        super().__init__()
        self.hidden_gates = nn.Linear(size, 3 * size)
        self.norm = GateNorm(size) if layer_norm else None

    def forward(self, hidden: Tensor) -> Tensor:
        gates = self.hidden_gates(hidden)
        if self.norm is not None:
            gates = self.norm(gates)
        return gru_update(torch.zeros_like(gates), gates, hidden)


class DeepGRU(nn.Module):
    """What a GRU step adds with ``layer_norm`` and ``transition_depth`` > 1: the input and hidden gates
    normalised (:class:`GateNorm`) before :func:`gru_update`, then depth − 1 :class:`Transition`s."""

    def __init__(self, size: int, layer_norm: bool, depth: int):
        super().__init__()
        self.input_norm = GateNorm(size) if layer_norm else None
        self.hidden_norm = GateNorm(size) if layer_norm else None
        self.transitions = nn.ModuleList(Transition(size, layer_norm) for _ in range(depth - 1))

    def forward(self, gates_x: Tensor, gates_h: Tensor, hidden: Tensor) -> Tensor:
        if self.input_norm is not None and self.hidden_norm is not None:
            gates_x, gates_h = self.input_norm(gates_x), self.hidden_norm(gates_h)
        hidden = gru_update(gates_x, gates_h, hidden)
        for transition in self.transitions:
            hidden = transition(hidden)
        return hidden


def word_dropout(embedded: Tensor, p: float, training: bool) -> Tensor:
    """Whole tokens dropped from embeddings (B, T, E) or (B, E): each token's vector zeroed with
    probability ``p``, the others scaled by 1 / (1 − p) (Gal & Ghahramani 2016; Sennrich & Zhang 2019)."""
    if not training or p == 0:
        return embedded
    keep = embedded.new_empty((*embedded.shape[:-1], 1)).bernoulli_(1 - p).div_(1 - p)
    return embedded * keep


def dropout_rows(x: Tensor, keep: Tensor, p: float, training: bool) -> Tensor:
    """Dropout on ``x`` (N, U), the rows of a (B, T, U) tensor at the positions ``keep`` (B, T) selects.

    The mask is drawn for the whole (B, T, U) tensor, as ``nn.Dropout`` draws it, and its rows at
    ``keep`` are used: a model that computes its output layer at real positions only drops the same
    units, and leaves the random number generator where, as the one that computes it everywhere.
    """
    if not training or p == 0:
        return x
    if x.device.type != "cpu":  # other devices draw dropout masks in their own way: nothing to match
        return nn.functional.dropout(x, p, training=True)
    noise = x.new_empty((*keep.shape, x.shape[-1])).bernoulli_(1 - p).div_(1 - p)
    return x * noise[keep]


OUTPUT_BLOCK_ROWS = 256  # logits rows computed at a time: a (256, V) block stays in cache between its passes
INT8_BLOCK_ROWS = 64  # the same with int8 weights: fbgemm's int8 kernel is fastest per row on smaller blocks


def gold_log_probs(features: Tensor, layer: nn.Linear, gold: Tensor, rows: int = OUTPUT_BLOCK_ROWS,
                   int8: Int8Matrices | None = None) -> Tensor:
    """ln softmax(layer(features))[gold] (N,) for features (N, U) and gold ids (N,), without a (N, V) tensor.

    The logits are computed ``rows`` rows at a time, normalised and read while the block is in
    cache. When a gradient is needed, each block's gradient is computed in the same pass
    (:class:`_GoldLogProbs`): the (N, V) logits are neither kept for the backward pass nor
    computed again. With ``int8`` (inference only) the logits come from the layer's int8 copy. Features of
    another type (bf16 under autocast) are read in the weights' type: the softmax over the vocabulary stays in
    float32.
    """
    if int8 is not None:
        return _int8_blocks(features, layer, int8, np.arange(len(gold)), gold)
    features = features.to(layer.weight.dtype)
    if torch.is_grad_enabled() and (features.requires_grad or layer.weight.requires_grad):
        bias = layer.bias if layer.bias is not None else features.new_zeros(layer.weight.shape[0])
        result: Tensor = _GoldLogProbs.apply(features, layer.weight, bias, gold, rows)  # type: ignore[no-untyped-call]
        return result
    return _gold_blocks(features, layer.weight, layer.bias, gold, rows, None)[0]


class _BlockLogSoftmax:
    """ln softmax(block · weightᵀ + bias) of blocks of at most ``rows`` rows of ``features``, computed in two
    (rows, V) buffers that every block reuses: a block's result is overwritten by the next block's."""

    def __init__(self, features: Tensor, weight: Tensor, bias: Tensor | None, rows: int):
        self.transposed = weight.t()
        self.bias = bias
        self.logits = features.new_empty(min(rows, features.shape[0]), weight.shape[0])
        self.log_probs = torch.empty_like(self.logits)

    def __call__(self, block: Tensor) -> Tensor:
        logits = self.logits[: block.shape[0]]
        if self.bias is None:
            torch.mm(block, self.transposed, out=logits)
        else:
            torch.addmm(self.bias, block, self.transposed, out=logits)
        return torch.log_softmax(logits, dim=-1, out=self.log_probs[: block.shape[0]])


def _gold_blocks(features: Tensor, weight: Tensor, bias: Tensor | None, gold: Tensor, rows: int,
                 row_weights: Tensor | None, grads: bool = False
                 ) -> tuple[Tensor, Tensor | None, Tensor | None, Tensor | None]:
    """ln p of the gold ids (N,), and with ``grads`` the gradients of Σ_i w_i ln p_i (w_i = ``row_weights``,
    or 1) with respect to the features, the weight and the bias."""
    n = features.shape[0]
    out = features.new_empty(n)
    grad_features = torch.empty_like(features) if grads else None
    grad_weight = torch.zeros_like(weight) if grads else None
    grad_bias = torch.zeros_like(weight[:, 0]) if grads else None
    block_log_probs = _BlockLogSoftmax(features, weight, bias, rows)
    for start in range(0, n, rows):
        block = features[start: start + rows]
        ids = gold[start: start + rows, None]
        log_probs = block_log_probs(block)
        out[start: start + rows] = log_probs.gather(1, ids).squeeze(1)
        if grads:
            assert grad_features is not None and grad_weight is not None and grad_bias is not None
            # d ln p_gold / d logits = onehot(gold) − softmax; minus that, scaled by the row weights, in place
            minus = log_probs.exp_()
            minus.scatter_add_(1, ids, torch.full_like(ids, -1, dtype=minus.dtype))
            if row_weights is not None:
                minus.mul_(row_weights[start: start + rows, None])
            torch.mm(minus, weight, out=grad_features[start: start + rows]).neg_()
            grad_weight.addmm_(minus.t(), block, alpha=-1)
            grad_bias.sub_(minus.sum(0))
    return out, grad_features, grad_weight, grad_bias


class _GoldLogProbs(torch.autograd.Function):
    """:func:`gold_log_probs` with its gradients computed in the forward pass, block by block.

    A loss sums the ln p (or scales them all by one factor), so the gradient that comes back is
    one number for every row, and the precomputed gradients are scaled by it. Any other gradient
    is computed again, block by block, with its row weights.
    """

    @staticmethod
    def forward(ctx: Any, features: Tensor, weight: Tensor, bias: Tensor, gold: Tensor, rows: int) -> Tensor:
        out, *grads = _gold_blocks(features, weight, bias, gold, rows, None, grads=True)
        ctx.save_for_backward(features, weight, bias, gold, *grads)
        ctx.rows = rows
        return out

    @staticmethod
    def backward(ctx: Any, grad_out: Tensor) -> tuple[Tensor | None, ...]:
        features, weight, bias, gold, grad_features, grad_weight, grad_bias = ctx.saved_tensors
        if grad_out.numel() and bool((grad_out == grad_out[0]).all()):
            scale = grad_out[0]
            return grad_features * scale, grad_weight * scale, grad_bias * scale, None, None
        _, grad_features, grad_weight, grad_bias = _gold_blocks(features, weight, bias, gold, ctx.rows, grad_out,
                                                                grads=True)
        return grad_features, grad_weight, grad_bias, None, None


@torch.no_grad()
def _int8_blocks(features: Tensor, layer: nn.Linear, int8: Int8Matrices, nodes: np.ndarray | Tensor,
                 ids: np.ndarray | Tensor, rows: int = INT8_BLOCK_ROWS) -> Tensor:
    """ln softmax(layer(features[nodes[e]]))[ids[e]] (E,) with the layer's int8 copy, ``rows`` rows at a time."""
    nodes, ids = torch.as_tensor(nodes, device=features.device), torch.as_tensor(ids, device=features.device)
    out = features.new_empty(len(nodes))
    bounds = torch.searchsorted(nodes, torch.arange(0, features.shape[0] + rows, rows, device=features.device))
    for block, start in enumerate(range(0, features.shape[0], rows)):
        first, last = int(bounds[block]), int(bounds[block + 1])
        if first == last:
            continue
        logits = int8.affine("output", features[start: start + rows], layer.weight, layer.bias)
        log_probs = torch.log_softmax(logits, dim=-1)
        out[first:last] = log_probs[nodes[first:last] - start, ids[first:last]]
    return out


@torch.no_grad()
def node_log_probs(features: Tensor, layer: nn.Linear, nodes: np.ndarray, ids: np.ndarray,
                   rows: int = OUTPUT_BLOCK_ROWS, int8: Int8Matrices | None = None) -> Tensor:
    """ln softmax(layer(features[nodes[e]]))[ids[e]] (E,) for every entry e; ``nodes`` (E,) sorted.

    Every row of ``features`` (N, U) is normalised once, ``rows`` rows at a time, however many
    entries read it: the prefixes shared by several targets (:mod:`rerank.scoring.pairs`). No gradient.
    With ``int8``, the logits come from the layer's int8 copy.
    """
    if int8 is not None:
        return _int8_blocks(features, layer, int8, nodes, ids)
    out = features.new_empty(len(nodes))
    bounds = np.searchsorted(nodes, np.arange(0, features.shape[0] + rows, rows))
    device = features.device
    block_log_probs = _BlockLogSoftmax(features, layer.weight, layer.bias, rows)
    for block, start in enumerate(range(0, features.shape[0], rows)):
        first, last = int(bounds[block]), int(bounds[block + 1])
        if first == last:
            continue
        log_probs = block_log_probs(features[start: start + rows])
        at = torch.as_tensor(nodes[first:last] - start, device=device)
        out[first:last] = log_probs[at, torch.as_tensor(ids[first:last], device=device)]
    return out
