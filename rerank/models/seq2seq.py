"""The interface both architectures offer to training, scoring and beam search.

::

    state = model.encode(src, src_len)                 # once per source sentence
    state = state.index_select(order)                  # repeat for n-best hypotheses or beams
    loss = model(src, src_len, trg)                    # −Σ ln p: training
    log_p = model.score(state, trg)                    # (B,): scoring
    log_probs, state = model.step(prev, state)         # (B, V): one step of search
    logits, attention = model.teacher_forced(state, trg_in)   # (B, T, V), (B, T, S): every position

Scores are natural-log probabilities, ``</s>`` included. Shapes: B batch, S source length,
T target length, H hidden, C annotation size, V target vocabulary.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import torch
from torch import Tensor, nn

from rerank.models.config import ModelConfig
from rerank.models.device import Work, faster_path
from rerank.models.layers import PRECISIONS, Int8Matrices, gold_log_probs
from rerank.models.vocab import BOS_ID, PAD_ID


@dataclass
class DecoderState:
    """Everything the decoder needs after step ``step``: its hidden state and the encoded source."""

    hidden: Tensor  # (B, H)
    keys: Tensor  # (B, S, C) annotations; for the encoder-decoder, its summary c as (B, 1, C)
    proj_keys: Tensor  # (B, S, *) the source side of the attention score; the encoder-decoder's c projections
    pad_mask: Tensor  # (B, S) True at padding
    src_len: Tensor  # (B,)
    feed: Tensor | None = None  # (B, H) h̃_{t-1}, fed back with Luong's input feeding
    attention: Tensor | None = None  # (B, S) weights of the last step
    step: int = 0

    # Fields that depend on the source sentence alone: the beams of one sentence share them.
    SOURCE_FIELDS: ClassVar[frozenset[str]] = frozenset({"keys", "proj_keys", "pad_mask", "src_len"})
    # Fields with a source-position axis (B, S, ...), and the value that pads each past a sentence's end.
    SOURCE_POSITION_PADDING: ClassVar[dict[str, float | bool]] = {
        "keys": 0.0, "proj_keys": 0.0, "pad_mask": True, "attention": 0.0}

    def index_select(self, order: Tensor, same_sources: bool = False) -> DecoderState:
        """The states of rows ``order`` (B',) in that order: to repeat sources, or to reorder beams.

        With ``same_sources``, each row of ``order`` has the source of the row it replaces (as the
        beams of one sentence do), so the source fields are kept rather than copied.
        """
        selected: dict[str, Any] = {
            f.name: value.index_select(0, order)
            for f in dataclasses.fields(self)
            if isinstance(value := getattr(self, f.name), Tensor)
            and not (same_sources and f.name in self.SOURCE_FIELDS)
        }
        return dataclasses.replace(self, **selected)


class Seq2Seq(nn.Module):
    """Base class: training loss, scores and search steps on top of a model's decoder.

    Each model has its decoder twice. The straightforward one, :meth:`teacher_forced` and
    :meth:`step_reference`, computes the logits of every position, padding included. The fast
    one, :meth:`features` and :meth:`step_features`, stops before the output layer and computes
    it at real positions only, with what depends on the source alone computed once per sentence
    and the recurrence's input-side projections once for all steps; :func:`gold_log_probs` then
    applies the output layer block by block. :meth:`forward` (the training loss), :meth:`score`
    and :meth:`step` take the path that measured faster on the model's device for that work
    (:func:`rerank.models.device.faster_path`), or the one ``path`` forces (see :func:`reference_path`): the
    tests hold the two to the same numbers.
    """

    path: str | None = None  # fast or reference, for every kind of work; None: the faster on the model's device
    blockwise_steps: bool = True  # the search may run the output layer on step_features' rows in blocks
    # The decoder depends on the source only through the last state of a left-to-right encoder, so
    # sources that share a prefix share its encoder states: :meth:`encode_trie` and :meth:`decoder_start`.
    reads_source_prefixes: bool = False
    # The decoder attends to the source words: its steps give attention weights (alignments, UNK replacement).
    has_attention: bool = False

    def __init__(self, config: ModelConfig, src_vocab_size: int, trg_vocab_size: int):
        super().__init__()
        self.config = config
        self.src_vocab_size = src_vocab_size
        self.trg_vocab_size = trg_vocab_size
        self.int8: Int8Matrices | None = None  # int8 inference (set_precision)
        self.device_type = "cpu"  # where the weights are (kept by _apply): it chooses the paths

    def max_source_length(self) -> int | None:
        """The most source positions (words and ``</s>``) the model can read, if it has a limit."""
        return None

    def set_precision(self, precision: str) -> None:
        """``fp32``, or ``int8``: the fast paths' matrix multiplies (the decoder's recurrence and output layers,
        the encoder-decoder's encoder steps, RNNsearch's bidirectional ``nn.GRU``) with int8 weights quantized
        per output row (:class:`Int8Matrices`), for inference on the CPU. The reference path's own layers, the
        training path and the other GRU modules stay in fp32."""
        if precision not in PRECISIONS:
            raise ValueError(f"precision must be one of {', '.join(PRECISIONS)}, got {precision!r}")
        if precision == "int8" and any(p.device.type != "cpu" for p in self.parameters()):
            raise ValueError("precision int8 runs on the CPU only")
        if (precision == "int8") == (self.int8 is not None):
            return  # already so: the int8 copies made are kept
        int8 = Int8Matrices() if precision == "int8" else None
        for module in self.modules():
            if hasattr(module, "int8"):
                setattr(module, "int8", int8)  # noqa: B010

    def _apply(self, fn: Any, recurse: bool = True) -> Any:  # .to(), .float(), ...: new weights, new int8 copies
        if self.int8 is not None:
            self.int8.clear()
        module = super()._apply(fn, recurse)  # type: ignore[no-untyped-call]
        self.device_type = next((p.device.type for p in self.parameters()), "cpu")
        return module

    def output_logits(self, features: Tensor) -> Tensor:
        """The output layer's logits (..., V) from features (..., U)."""
        layer = self.output_layer
        if self.int8 is not None:
            return self.int8.affine("output", features, layer.weight, layer.bias)
        return layer(features)

    def uses_reference(self, work: Work) -> bool:
        """Whether ``work`` takes the reference path: as ``path`` forces, or else the faster on this device."""
        path = self.path or faster_path(self.device_type, work, self.config.architecture)
        return path == "reference"

    def encode(self, src: Tensor, src_len: Tensor) -> DecoderState:
        """The initial decoder state for sources (B, S) of lengths (B,)."""
        raise NotImplementedError

    def encode_trie(self, levels: Iterable[tuple[Tensor, Tensor]]) -> Tensor:
        """With ``reads_source_prefixes``: the encoder's state at every node of a trie of source prefixes."""
        raise NotImplementedError

    def decoder_start(self, final: Tensor, src_len: Tensor) -> DecoderState:
        """With ``reads_source_prefixes``: the initial decoder state from the encoder's last states (B, H)."""
        raise NotImplementedError

    @property
    def output_layer(self) -> nn.Linear:
        """The last layer, which gives the logits (V, U) from the features."""
        raise NotImplementedError

    def teacher_forced(self, state: DecoderState, trg_in: Tensor) -> tuple[Tensor, Tensor | None]:
        """Logits (B, T, V) for every position of ``trg_in`` (B, T) (``<s>`` then the target), and attention."""
        raise NotImplementedError

    def features(self, state: DecoderState, trg_in: Tensor, keep: Tensor) -> Tensor:
        """The output layer's input (N, U) at the N positions ``keep`` (B, T) selects, in row-major order:
        ``output_layer`` of it is :meth:`teacher_forced`'s logits at those positions."""
        raise NotImplementedError

    def step_reference(self, prev: Tensor, state: DecoderState) -> tuple[Tensor, DecoderState]:
        """:meth:`step`, computed the straightforward way."""
        raise NotImplementedError

    def step_features(self, prev: Tensor, state: DecoderState) -> tuple[Tensor, DecoderState]:
        """The output layer's input (B, U) for the word after ``prev`` (B,), and the new state."""
        raise NotImplementedError

    def step(self, prev: Tensor, state: DecoderState) -> tuple[Tensor, DecoderState]:
        """Log-probabilities (B, V) of the next word after ``prev`` (B,), and the new state."""
        if self.uses_reference("search"):
            return self.step_reference(prev, state)
        features, state = self.step_features(prev, state)
        return torch.log_softmax(self.output_logits(features), dim=-1), state

    def logits(self, src: Tensor, src_len: Tensor, trg: Tensor) -> Tensor:
        """Logits (B, T, V) predicting ``trg`` (B, T) (words then ``</s>``, padded) from the sources."""
        logits, _ = self.teacher_forced(self.encode(src, src_len), shift_right(trg))
        return logits

    def forward(self, src: Tensor, src_len: Tensor, trg: Tensor, label_smoothing: float = 0.0) -> Tensor:
        """The training loss: −Σ ln p (a scalar) of the targets ``trg`` (B, T) (words then ``</s>``, padded); with
        ``label_smoothing`` ε, Σ over the target tokens of (1 − ε)(−ln p(y)) + ε · mean over the vocabulary of
        −ln p(v) (Szegedy et al. 2016). Scores (:meth:`score`) are always the model's ln p."""
        if self.uses_reference("training"):
            logits = self.logits(src, src_len, trg)
            nll = -token_log_probs(logits, trg).sum()
            if not label_smoothing:
                return nll
            uniform = -(torch.log_softmax(logits, dim=-1).mean(-1).masked_fill(trg == PAD_ID, 0.0)).sum()
            return (1 - label_smoothing) * nll + label_smoothing * uniform
        keep = trg != PAD_ID
        features = self.features(self.encode(src, src_len), shift_right(trg), keep)
        if not label_smoothing:
            return -gold_log_probs(features, self.output_layer, trg[keep]).sum()
        # Without a (N, V) tensor: ln Z = logit(y) − ln p(y), so the mean over the vocabulary of ln p(v) is
        # mean_v logit(v) − logit(y) + ln p(y), and mean_v logit(v) is the features times the mean output row.
        gold, layer = trg[keep], self.output_layer
        gold_lp = gold_log_probs(features, layer, gold)
        features = features.to(layer.weight.dtype)
        bias = layer.bias if layer.bias is not None else layer.weight.new_zeros(layer.weight.shape[0])
        mean_logit = features @ layer.weight.mean(0) + bias.mean()
        gold_logit = (features * layer.weight[gold]).sum(-1) + bias[gold]
        mean_lp = mean_logit - gold_logit + gold_lp
        return -(1 - label_smoothing) * gold_lp.sum() - label_smoothing * mean_lp.sum()

    def score(self, state: DecoderState, trg: Tensor) -> Tensor:
        """ln p(trg | source) (B,) by forced decoding; ``trg`` (B, T) is words then ``</s>``, padded."""
        if self.uses_reference("scoring"):
            logits, _ = self.teacher_forced(state, shift_right(trg))
            return token_log_probs(logits, trg).sum(-1)
        keep = trg != PAD_ID
        log_probs = gold_log_probs(self.features(state, shift_right(trg), keep), self.output_layer, trg[keep],
                                   int8=self.int8)
        return sum_rows(log_probs, keep)


@contextlib.contextmanager
def reference_path(model: Seq2Seq, on: bool = True) -> Iterator[Seq2Seq]:
    """Within the block, ``model`` computes its loss, scores and search steps the straightforward way (with
    ``on`` false: the fast way), whatever its device."""
    before = model.path
    model.path = "reference" if on else "fast"
    try:
        yield model
    finally:
        model.path = before


def sum_rows(values: Tensor, keep: Tensor) -> Tensor:
    """Per-row sums (B,) of ``values`` (N,), the entries at the positions ``keep`` (B, T) selects; summed
    in float64 (the order of the terms then matters less than float32's rounding)."""
    rows = keep.nonzero()[:, 0]
    sums = torch.zeros(keep.shape[0], dtype=torch.float64, device=values.device)
    return sums.index_add_(0, rows, values.double()).to(values.dtype)


def shift_right(trg: Tensor) -> Tensor:
    """Decoder inputs: ``<s>`` followed by the target without its last position."""
    bos = torch.full_like(trg[:, :1], BOS_ID)
    return torch.cat([bos, trg[:, :-1]], dim=1)


NORMALISE_ROWS = 1024  # logits rows normalised at a time: a (1024, V) block stays in cache, a (B·T, V) one would not


def token_log_probs(logits: Tensor, trg: Tensor) -> Tensor:
    """ln p of each target token (B, T), 0 at padding; avoids materialising a (B, T, V) log-softmax."""
    gold = logits.gather(-1, trg[..., None]).squeeze(-1)
    rows = torch.split(logits.reshape(-1, logits.shape[-1]), NORMALISE_ROWS)
    norm = torch.cat([torch.logsumexp(block, dim=-1) for block in rows]).view_as(gold)
    return (gold - norm).masked_fill(trg == PAD_ID, 0.0)


def concat_states(states: Sequence[DecoderState]) -> DecoderState:
    """The rows of several states in one, the source-side fields padded to the widest."""
    width = max(state.pad_mask.shape[1] for state in states)
    states = [widen_source(state, width) for state in states]
    first = states[0]
    joined: dict[str, Any] = {f.name: torch.cat([getattr(state, f.name) for state in states])
                              for f in dataclasses.fields(first) if isinstance(getattr(first, f.name), Tensor)}
    return dataclasses.replace(first, **joined)


def widen_source(state: DecoderState, width: int) -> DecoderState:
    """``state`` with its source-side fields padded to ``width`` positions (masked, so no score changes)."""
    changes: dict[str, Any] = {}
    for name, fill in DecoderState.SOURCE_POSITION_PADDING.items():
        value = getattr(state, name)
        if value is not None and value.shape[1] < width:
            extra = value.new_full((value.shape[0], width - value.shape[1], *value.shape[2:]), fill)
            changes[name] = torch.cat([value, extra], dim=1)
    return dataclasses.replace(state, **changes)


def narrow_source(state: DecoderState, length: int) -> DecoderState:
    """``state`` without source positions at or beyond ``length``, the longest source among its rows.

    Those positions are padding in every row. A state whose source fields are narrower (the
    encoder-decoder's single summary vector) is returned as it is.
    """
    if state.pad_mask.shape[1] <= length:
        return state
    narrowed: dict[str, Any] = {name: getattr(state, name)[:, :length]
                                for name in DecoderState.SOURCE_POSITION_PADDING if getattr(state, name) is not None}
    return dataclasses.replace(state, **narrowed)
