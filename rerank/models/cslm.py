"""A continuous-space language model (CSLM; Schwenk 2007, Cho et al. 2014 Sec. 4.1.2): a feed-forward n-gram
network over a shortlist of target words, completed by a back-off n-gram model for every other word.

The network reads the ``order − 1`` previous words (``<s>``-padded at the sentence start; words outside
the shortlist read as ``<unk>``), concatenates their embeddings, applies rectified layers and a softmax over
the shortlist (its words and ``</s>``). Schwenk's combination, exact:

    p(w | h) = P_NN(w | h) · P_S(h)   for w in the shortlist S,
    p(w | h) = P_B(w | h)             otherwise,        P_S(h) = Σ_{w∈S} P_B(w | h),

where P_B is the back-off model (KenLM) and h its view of the history (its last order − 1 words): the
shortlist keeps the back-off model's mass of S and shares it out as the network says, so p sums to 1 over
the back-off model's vocabulary whenever P_B does. A word that neither model knows gets KenLM's ``<unk>``
probability, as KenLM gives it. P_S(h) costs no sum over S per context: :class:`BackoffLM` follows the
ARPA file's back-off structure (see :meth:`BackoffLM.shortlist_mass`).

A model directory holds ``config.yaml`` (its ``model`` section: :class:`CSLMConfig`), ``vocab.txt`` (the
shortlist, specials first) and ``model.pt`` (the weights).
"""

from __future__ import annotations

import math
import os
from collections.abc import Collection, Sequence
from pathlib import Path
from typing import Any, cast

import kenlm
import numpy as np
import torch
from torch import nn

from rerank.formats.arpa import LN_10, ArpaStructure, Context
from rerank.models.checkpoint import WEIGHTS, load_model_weights, load_state
from rerank.models.config import CSLMConfig, read_model_section
from rerank.models.vocab import BOS, BOS_ID, EOS, EOS_ID, PAD_ID, UNK, UNK_ID, Vocabulary

VOCAB = "vocab.txt"


class CSLMNet(nn.Module):
    """The network: ``contexts`` (B, order − 1) word ids -> logits over the vocabulary, ``-inf`` where a
    token is never predicted (``<pad> <unk> <s>``)."""

    excluded: torch.Tensor

    def __init__(self, config: CSLMConfig, vocab_size: int):
        super().__init__()
        self.config = config
        self.embedding = nn.Embedding(vocab_size, config.embedding_size)
        sizes = [(config.order - 1) * config.embedding_size, *config.hidden_sizes]
        self.layers = nn.ModuleList(nn.Linear(a, b) for a, b in zip(sizes, sizes[1:], strict=False))
        self.dropout = nn.Dropout(config.dropout)
        self.output = nn.Linear(sizes[-1], vocab_size)
        excluded = torch.zeros(vocab_size, dtype=torch.bool)
        excluded[[PAD_ID, UNK_ID, BOS_ID]] = True
        self.register_buffer("excluded", excluded, persistent=False)

    def hidden(self, contexts: torch.Tensor) -> torch.Tensor:
        """The last rectified layer, (B, hidden_sizes[-1])."""
        x = self.embedding(contexts).flatten(1)
        for layer in self.layers:
            x = self.dropout(torch.relu(layer(x)))
        return x

    def forward(self, contexts: torch.Tensor) -> torch.Tensor:
        logits = self.output(self.hidden(contexts))
        return logits.masked_fill(self.excluded, -math.inf)

    def nll(self, contexts: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        """−Σ ln P_NN(target | context) over the batch (targets in the shortlist)."""
        return nn.functional.cross_entropy(self(contexts), targets, reduction="sum")


def ngrams(ids: Sequence[int], order: int) -> np.ndarray:
    """The (len(ids) + 1, order) n-grams of one sentence: ``<s>``-padded contexts, each word and ``</s>``."""
    padded = np.array([BOS_ID] * (order - 1) + list(ids) + [EOS_ID], dtype=np.int64)
    return np.lib.stride_tricks.sliding_window_view(padded, order)


class BackoffLM:
    """P_B through KenLM (``model``: a ``kenlm.Model`` of the ARPA file whose ``structure`` is given) and
    the back-off model's mass of a shortlist of words, per context."""

    def __init__(self, model: Any, structure: ArpaStructure, shortlist: Collection[str]):
        self.model = model
        self.structure = structure
        self.order = structure.order
        self.shortlist = sorted(w for w in shortlist if w in structure.vocab and w not in (BOS, UNK))
        self._in_shortlist = frozenset(self.shortlist)
        self._states: dict[Context, Any] = {}
        self._mass: dict[Context, float] = {}

    def context(self, history: Sequence[str]) -> Context:
        """The back-off model's view of ``history`` (the sentence's words so far): ``<s>`` and at most the
        last order − 1 words, words it does not know as ``<unk>``."""
        vocab = self.structure.vocab
        words = (BOS, *history)[max(0, len(history) + 2 - self.order):]
        return tuple(w if w in vocab else UNK for w in words)

    def state(self, context: Context) -> Any:
        """KenLM's state after ``context`` (from the sentence start if it begins with ``<s>``)."""
        state = self._states.get(context)
        if state is None:
            if not context or context == (BOS,):
                state = kenlm.State()
                (self.model.BeginSentenceWrite if context else self.model.NullContextWrite)(state)
            else:
                state = kenlm.State()
                self.model.BaseScore(self.state(context[:-1]), context[-1], state)
            if len(self._states) > 1_000_000:
                self._states.clear()
            self._states[context] = state
        return state

    def log10(self, context: Context, word: str) -> float:
        """log10 P_B(word | context)."""
        return float(self.model.BaseScore(self.state(context), word, kenlm.State()))

    def shortlist_mass(self, context: Context) -> float:
        """P_S(h) = Σ_{w∈S} P_B(w | h), exact, from the ARPA structure (h' is h without its first word):

        P_S(h) = Σ_{w∈S, hw explicit} P_B(w | h) + bo(h) · (P_S(h') − Σ_{w∈S, hw explicit} P_B(w | h')),

        since P_B(w | h) = bo(h) · P_B(w | h') for every w with hw not explicit; a context that is no
        n-gram of the model has no explicit continuation and bo(h) = 1, so P_S(h) = P_S(h'). Each context's
        value is cached, so a new context costs its explicit continuations in S, not |S|.
        """
        mass = self._mass.get(context)
        if mass is not None:
            return mass
        if not context:
            mass = sum(10.0 ** self.log10((), w) for w in self.shortlist)
        elif context not in self.structure.contexts:
            mass = self.shortlist_mass(context[1:])
        else:
            shorter = context[1:]
            # continuations outside S (an explicit "<s> <s>" or "h <unk>") are no part of its mass
            explicit = [w for w in self.structure.continuations.get(context, []) if w in self._in_shortlist]
            here = sum(10.0 ** self.log10(context, w) for w in explicit)
            there = sum(10.0 ** self.log10(shorter, w) for w in explicit)
            backoff = 10.0 ** self.structure.backoffs.get(context, 0.0)
            mass = here + backoff * (self.shortlist_mass(shorter) - there)
        if len(self._mass) > 1_000_000:
            self._mass.clear()
        self._mass[context] = mass
        return mass


class CSLM:
    """ln p(word | history) under the network and the back-off model together (see the module docstring)."""

    def __init__(self, net: CSLMNet, vocab: Vocabulary, backoff: BackoffLM, chunk: int = 4096):
        self.net = net.eval()
        self.vocab = vocab
        self.backoff = backoff
        self.order = net.config.order
        self.chunk = chunk
        device = net.excluded.device
        known = set(backoff.shortlist)
        excluded = net.excluded.clone()
        excluded[[i for i, w in enumerate(vocab.tokens) if w not in known]] = True
        self.excluded = excluded.cpu().numpy()  # not in S: the back-off model gives these words
        self.output_bias = torch.zeros(len(vocab), device=device).masked_fill(excluded.to(device), -math.inf)

    def log_probs(self, histories: Sequence[Sequence[str]], words: Sequence[str]) -> np.ndarray:
        """ln p(words[i] | histories[i]), each history the sentence's words before it (no ``<s>``)."""
        n = self.order - 1
        rows = np.empty((len(words), self.order), dtype=np.int64)
        for i, (history, word) in enumerate(zip(histories, words, strict=True)):
            ids = self.vocab.encode(history[max(0, len(history) - n):])
            rows[i] = [BOS_ID] * (n - len(ids)) + ids + self.vocab.encode([word])
        contexts = [self.backoff.context(history) for history in histories]
        return self._log_probs(rows, contexts, list(words))

    def sentence_log_probs(self, sentences: Sequence[Sequence[str]]) -> list[np.ndarray]:
        """ln p of each word of each sentence and of its ``</s>``."""
        if not sentences:
            return []
        rows = np.concatenate([ngrams(self.vocab.encode(s), self.order) for s in sentences])
        contexts = [self.backoff.context(s[:i]) for s in sentences for i in range(len(s) + 1)]
        words = [w for s in sentences for w in (*s, EOS)]
        values = self._log_probs(rows, contexts, words)
        return np.split(values, np.cumsum([len(s) + 1 for s in sentences])[:-1])

    def score(self, sentences: Sequence[Sequence[str]]) -> np.ndarray:
        """ln p(sentence), ``</s>`` included, of each sentence."""
        return np.array([values.sum() for values in self.sentence_log_probs(sentences)], dtype=np.float64)

    def _log_probs(self, rows: np.ndarray, contexts: list[Context], words: list[str]) -> np.ndarray:
        targets = rows[:, -1]
        in_s = ~self.excluded[targets]
        values = np.empty(len(words), dtype=np.float64)
        values[in_s] = self._network_log_probs(rows[in_s]) + np.log(
            [self.backoff.shortlist_mass(contexts[i]) for i in np.flatnonzero(in_s)])
        values[~in_s] = [LN_10 * self.backoff.log10(contexts[i], words[i]) for i in np.flatnonzero(~in_s)]
        return values

    @torch.inference_mode()
    def _network_log_probs(self, rows: np.ndarray) -> np.ndarray:
        """ln P_NN(target | context) of (M, order) id rows: each distinct context through the network once."""
        if not len(rows):
            return np.empty(0)
        unique, inverse = np.unique(rows[:, :-1], axis=0, return_inverse=True)
        device = self.output_bias.device
        weight, bias = self.net.output.weight, self.net.output.bias + self.output_bias
        hidden, norms = [], []
        for start in range(0, len(unique), self.chunk):
            h = self.net.hidden(torch.from_numpy(unique[start:start + self.chunk]).to(device))
            norms.append(torch.logsumexp(torch.addmm(bias, h, weight.t()), dim=1))
            hidden.append(h)
        index = torch.from_numpy(inverse.reshape(-1)).to(device)
        targets = torch.from_numpy(rows[:, -1]).to(device)
        h = torch.cat(hidden)[index]
        logits = (h * weight[targets]).sum(1) + bias[targets]
        values: np.ndarray = (logits - torch.cat(norms)[index]).double().cpu().numpy()
        return values


def load_cslm_net(directory: str | os.PathLike[str], device: str | torch.device = "cpu") -> tuple[CSLMNet, Vocabulary]:
    """The network and shortlist of a CSLM model directory, in evaluation mode (weights read as float32)."""
    directory = Path(directory)
    config = read_model_section(directory, CSLMConfig)
    vocab = Vocabulary.load(directory / VOCAB)
    net = CSLMNet(config, len(vocab))
    path = directory / WEIGHTS
    load_model_weights(cast(Any, net), load_state(path, device).get("model"), path)
    return net.float().to(device).eval(), vocab
