"""The interface both architectures offer to training, scoring and beam search.

::

    state = model.encode(src, src_len)                 # once per source sentence
    state = state.index_select(order)                  # repeat for n-best hypotheses or beams
    logits, attention = model.teacher_forced(state, trg_in)   # (B, T, V), (B, T, S): training, scoring
    log_probs, state = model.step(prev, state)         # (B, V): one step of search

Scores are natural-log probabilities, ``</s>`` included. Shapes: B batch, S source length,
T target length, H hidden, C annotation size, V target vocabulary.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import torch
from torch import Tensor, nn

from rerank.models.config import ModelConfig
from rerank.models.vocab import BOS_ID, PAD_ID


@dataclass
class DecoderState:
    """Everything the decoder needs after step ``step``: its hidden state and the encoded source."""

    hidden: Tensor  # (B, H)
    keys: Tensor  # (B, S, C) annotations; for the encoder-decoder, its summary c as (B, 1, C)
    proj_keys: Tensor  # (B, S, *) the source side of the attention score
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
    """Base class: :meth:`score` and :meth:`forward` on top of a model's encode/teacher_forced/step."""

    def __init__(self, config: ModelConfig, src_vocab_size: int, trg_vocab_size: int):
        super().__init__()
        self.config = config
        self.src_vocab_size = src_vocab_size
        self.trg_vocab_size = trg_vocab_size

    def encode(self, src: Tensor, src_len: Tensor) -> DecoderState:
        """The initial decoder state for sources (B, S) of lengths (B,)."""
        raise NotImplementedError

    def teacher_forced(self, state: DecoderState, trg_in: Tensor) -> tuple[Tensor, Tensor | None]:
        """Logits (B, T, V) for every position of ``trg_in`` (B, T) (``<s>`` then the target), and attention."""
        raise NotImplementedError

    def step(self, prev: Tensor, state: DecoderState) -> tuple[Tensor, DecoderState]:
        """Log-probabilities (B, V) of the next word after ``prev`` (B,), and the new state."""
        raise NotImplementedError

    def forward(self, src: Tensor, src_len: Tensor, trg: Tensor) -> Tensor:
        """Logits (B, T, V) predicting ``trg`` (B, T) (words then ``</s>``, padded) from the sources."""
        logits, _ = self.teacher_forced(self.encode(src, src_len), shift_right(trg))
        return logits

    def score(self, state: DecoderState, trg: Tensor) -> Tensor:
        """ln p(trg | source) (B,) by forced decoding; ``trg`` (B, T) is words then ``</s>``, padded."""
        logits, _ = self.teacher_forced(state, shift_right(trg))
        return token_log_probs(logits, trg).sum(-1)


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
