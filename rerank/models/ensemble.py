"""Ensembles of models that share their vocabularies: one search over the mean of their log-probabilities.

The ensemble's score of a word is the mean of its members' ln p (a log-linear ensemble with equal
weights, as Marian's decoder combines its models), not renormalised. Why the log-probabilities
and not the probabilities: a sentence's score is then the mean of the members' sentence scores,
so forced decoding scores each member on its own (each with its shared prefixes) and averages,
and the search ranks hypotheses by exactly the score the n-best feature later gives them; and a
word one member finds very unlikely is held back, which a mixture of probabilities would let
through. Searching with an ensemble of one model is searching with that model.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor, nn

from rerank.errors import RerankError
from rerank.models.checkpoint import LoadedModel
from rerank.models.seq2seq import DecoderState, Seq2Seq


@dataclass
class EnsembleState(DecoderState):
    """The members' decoder states side by side; the fields of DecoderState are the first member's
    (its source lengths and padding, which all share), its ``attention`` the mean of the members' that attend."""

    members: tuple[DecoderState, ...] = ()

    @classmethod
    def join(cls, members: Sequence[DecoderState]) -> EnsembleState:
        first = members[0]
        attending = [m.attention for m in members if m.attention is not None]
        attention = torch.stack(attending).mean(0) if attending else None
        return cls(first.hidden, first.keys, first.proj_keys, first.pad_mask, first.src_len, attention=attention,
                   step=first.step, members=tuple(members))

    def index_select(self, order: Tensor, same_sources: bool = False) -> EnsembleState:
        selected = super().index_select(order, same_sources)
        assert isinstance(selected, EnsembleState)
        members = tuple(m.index_select(order, same_sources) for m in self.members)
        return dataclasses.replace(selected, members=members)


class Ensemble(Seq2Seq):
    """Several trained models searched as one (see the module docstring); for :func:`rerank.search.beam.beam_search`."""

    blockwise_steps = False  # the search takes the members' whole log-probabilities from :meth:`step`

    def __init__(self, members: Sequence[Seq2Seq]):
        if not members:
            raise ValueError("an ensemble needs at least one model")
        first = members[0]
        super().__init__(first.config, first.src_vocab_size, first.trg_vocab_size)
        self.members = nn.ModuleList(members)
        self.has_attention = any(m.has_attention for m in members)  # its attention: the mean of the members'

    def max_source_length(self) -> int | None:
        limits = [limit for m in self._members() if (limit := m.max_source_length()) is not None]
        return min(limits, default=None)

    def encode(self, src: Tensor, src_len: Tensor) -> EnsembleState:
        return EnsembleState.join([m.encode(src, src_len) for m in self._members()])

    def step(self, prev: Tensor, state: DecoderState) -> tuple[Tensor, EnsembleState]:
        """The mean (B, V) of the members' log-probabilities of the next word, and the new states."""
        assert isinstance(state, EnsembleState)
        steps = [m.step(prev, s) for m, s in zip(self._members(), state.members, strict=True)]
        log_probs = torch.stack([log_probs for log_probs, _ in steps]).mean(0)
        return log_probs, EnsembleState.join([s for _, s in steps])

    def _members(self) -> list[Seq2Seq]:
        return [m for m in self.members if isinstance(m, Seq2Seq)]


def ensemble(models: Sequence[LoadedModel]) -> LoadedModel:
    """One :class:`LoadedModel` searching with all of ``models`` (the model itself when there is one);
    they must share both vocabularies and read targets in the same direction."""
    first = models[0]
    if len(models) == 1:
        return first
    for other in models[1:]:
        for side, mine, theirs in (("source", first.src_vocab, other.src_vocab),
                                   ("target", first.trg_vocab, other.trg_vocab)):
            if mine.tokens != theirs.tokens:
                raise RerankError(f"{other.directory}: its {side} vocabulary differs from {first.directory}'s: "
                                  "an ensemble's models must share their vocabularies")
        if other.config.reverse_target != first.config.reverse_target:
            raise RerankError(f"{other.directory} and {first.directory}: one reads targets right to left and "
                              "the other left to right: they cannot be searched as one")
    model: Any = Ensemble([m.model for m in models]).eval()
    return dataclasses.replace(first, model=model)
