"""Batched beam search over whole batches of sentences; greedy search is a beam of 1.

Every step works on tensors of B'·K rows (B' sentences still searched, K hypotheses each) and
one call of ``model.step``; there is no loop over sentences or hypotheses. The encoder runs once
per sentence, its state is repeated for the K hypotheses after the first step, and beams are
reordered with ``DecoderState.index_select`` (without copying the source side, which the K rows
of a sentence share).

Hypotheses are ranked by Σ ln p divided by a length penalty lp(|Y|) (:class:`LengthPenalty`), or,
with :class:`FeatureWeights`, by the log-linear score w_model · Σ ln p + w_wp · WP, WP = −(words)
(the two do not combine: the word penalty takes the length penalty's place). Both features add
up word by word, so a partial hypothesis has a score of the same kind.

The search, step t (0-based) of a sentence:

1. :func:`restrict` forbids ``<pad>`` and ``<s>``, and allows only ``</s>`` once a hypothesis has
   ⌈max_ratio · source words⌉ words.
2. :func:`top_candidates` takes the 2K best of the K·V one-word extensions by Σ ln p (all of length
   t + 1, so this is also their order by any length-normalised score), or by their log-linear
   score (:meth:`FeatureWeights.gains`: an extension by a word also gets its word penalty, one by
   ``</s>`` none). At step 0 each sentence has one hypothesis, ``<s>``, and from step 1 on K.
3. Finished hypotheses are set aside (:class:`Finished`): an extension by ``</s>`` among the K best
   candidates enters the sentence's N best finished hypotheses, ranked by Σ ln p / lp(|Y|) or by
   its log-linear score; the K best extensions by a word (:func:`live_candidates`) continue. At
   most K of the 2K candidates end in ``</s>``, so K live ones are always left.
4. A sentence is done when it has N finished hypotheses and its best live one, ranked as if it
   finished now, is no better than the N-th of them. Σ ln p only falls, so without length
   normalisation nothing live can enter the n-best list any more (for N = 1: the best hypothesis
   is final once it beats everything live); with it this is the usual approximation, and the
   maximum length ends every search. With weights the rule is exact (nothing live can still
   enter the n-best list): the live score is first raised to the most it can still reach
   (:meth:`FeatureWeights.bound`), by w_model · ln p − w_wp ≤ −w_wp per word up to the maximum
   length when w_wp < 0 (a bonus per word, which lets a longer hypothesis overtake a finished
   one); with w_model < 0 a step can gain without bound, and only the maximum length ends the
   search. Done sentences leave the batch at once.

Every hypothesis ends in ``</s>``, and its score is Σ ln p of its words and ``</s>``: the score
forced decoding gives it (``model.score``), with or without weights. ``|Y|`` counts ``</s>``; the
word penalty does not.

Shapes: B sentences, B' sentences still searched, K beam, W hypotheses per sentence (1 at step 0,
then K), R = B'·W rows, N n-best size, V target vocabulary, S source length (``</s>`` and padding
included).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

import torch
from torch import Tensor

from rerank.models.seq2seq import DecoderState, Seq2Seq
from rerank.models.vocab import BOS_ID, EOS_ID, PAD_ID

LengthPenaltyKind = Literal["none", "average", "wu"]


@dataclass(frozen=True)
class LengthPenalty:
    """lp(|Y|), by which a finished hypothesis' Σ ln p is divided to rank it; |Y| counts ``</s>``.

    ``none``: 1 (rank by ln p); ``average``: |Y| (ln p per word); ``wu``: (5 + |Y|)^α / (5 + 1)^α
    (Wu et al. 2016, arXiv:1609.08144, Eq. 14), which favours long outputs less than ``average``.
    """

    kind: LengthPenaltyKind = "none"
    alpha: float = 0.6

    def __post_init__(self) -> None:
        if self.kind not in ("none", "average", "wu"):
            raise ValueError(f"length penalty must be none, average or wu, got {self.kind!r}")
        if self.alpha < 0:
            raise ValueError(f"the length penalty's alpha must be at least 0, got {self.alpha}")

    def __call__(self, length: Tensor | int) -> Tensor | float:
        if self.kind == "average":
            return length
        if self.kind == "wu":
            return ((5 + length) / 6) ** self.alpha
        return 1.0

    def normalise(self, scores: Tensor, length: Tensor | int) -> Tensor:
        """Σ ln p / lp(length): the score hypotheses are ranked by."""
        return scores / self(length)


@dataclass(frozen=True)
class FeatureWeights:
    """A log-linear model over two features that add up word by word: the model's Σ ln p (``</s>``
    included) and the word penalty WP = −(number of words), ``</s>`` not counted, as Moses' WP0.

    A hypothesis of |Y| - 1 words scores ``model`` · Σ ln p − ``word_penalty`` · (|Y| - 1); a
    negative ``word_penalty`` is a bonus per word. A ``model`` weight of 0 would rank by length
    alone, and is refused; a negative one is allowed (a tuner may try it), but then the search looks
    for improbable outputs and always runs to the maximum length.
    """

    model: float = 1.0
    word_penalty: float = 0.0

    def __post_init__(self) -> None:
        if not (math.isfinite(self.model) and math.isfinite(self.word_penalty)):
            raise ValueError(f"weights must be finite numbers, got {self.model} and {self.word_penalty}")
        if self.model == 0:
            raise ValueError("the weight of the model's ln p must not be 0: the search would rank by length alone")

    def total(self, score: float, words: int) -> float:
        """The score of a finished hypothesis of ``words`` words (``</s>`` not counted) and Σ ln p ``score``."""
        return self.model * score - self.word_penalty * words

    def gains(self, log_probs: Tensor) -> Tensor:
        """What each one-word extension adds to a hypothesis' score, (R, V) from the ln p (R, V):
        ``model`` · ln p, less ``word_penalty`` for every word but ``</s>``; −inf where ln p is."""
        gains = log_probs * self.model - self.word_penalty
        gains[:, EOS_ID] = log_probs[:, EOS_ID] * self.model
        return gains.masked_fill_(torch.isneginf(log_probs), -math.inf)

    def bound(self, scores: Tensor, remaining: Tensor) -> Tensor:
        """The most (B',) that live hypotheses scored ``scores`` (B',) can reach with at most
        ``remaining`` (B',) more words and ``</s>``: a word adds at most −``word_penalty`` when
        ``model`` > 0, ``</s>`` at most 0; with ``model`` < 0 there is no bound but for a score of −inf."""
        if self.model < 0:
            return torch.where(torch.isneginf(scores), scores, torch.full_like(scores, math.inf))
        return scores + max(0.0, -self.word_penalty) * remaining.to(scores.dtype)


@dataclass(frozen=True)
class SearchConfig:
    """Beam size K, the n-best size N ≤ K, the length penalty or feature weights, and the output
    length limit.

    A hypothesis has at most ⌈max_ratio · source words⌉ words before ``</s>`` (none for an
    empty source). ``beam_size: 1`` is greedy search. With ``weights`` the search ranks by their
    log-linear score, and the length penalty must be ``none``.
    """

    beam_size: int = 10
    nbest: int = 1
    length_penalty: LengthPenalty = LengthPenalty()
    max_ratio: float = 2.0
    weights: FeatureWeights | None = None

    def __post_init__(self) -> None:
        if self.beam_size < 1:
            raise ValueError(f"the beam size must be at least 1, got {self.beam_size}")
        if not 1 <= self.nbest <= self.beam_size:
            raise ValueError(f"the n-best size must be between 1 and the beam size ({self.beam_size}), "
                             f"got {self.nbest}")
        if not self.max_ratio > 0:
            raise ValueError(f"max_ratio must be positive, got {self.max_ratio}")
        if self.weights is not None and self.length_penalty.kind != "none":
            raise ValueError(f"feature weights and the {self.length_penalty.kind} length penalty do not combine: "
                             "the word penalty's weight takes the length penalty's place")


@dataclass
class Hypothesis:
    """A finished translation of one sentence.

    ``tokens``: target ids, without ``</s>``. ``score``: Σ ln p of the tokens and ``</s>``.
    ``normalised``: what the search ranks by, ``score`` / lp(len(tokens) + 1) or, with feature
    weights, the weighted score (:meth:`FeatureWeights.total`, summed word by word). ``token_scores``:
    ln p of each token then of ``</s>``. ``attention``: (len(tokens) + 1, source length with
    ``</s>``), the weights with which each token and ``</s>`` was predicted; None for a model
    without attention.
    """

    tokens: list[int]
    score: float
    normalised: float
    token_scores: list[float]
    attention: Tensor | None = None


def restrict(log_probs: Tensor, at_max: Tensor) -> Tensor:
    """``log_probs`` (R, V), changed in place so that ``<pad>`` and ``<s>`` are never chosen and rows
    ``at_max`` (R,) may only choose ``</s>``. The ln p of what can still be chosen is untouched."""
    log_probs[:, [PAD_ID, BOS_ID]] = -math.inf
    if at_max.any():
        rows = at_max.nonzero().squeeze(1)
        eos = log_probs[rows, EOS_ID]
        log_probs[rows] = -math.inf
        log_probs[rows, EOS_ID] = eos
    return log_probs


def top_candidates(scores: Tensor, log_probs: Tensor, k: int) -> tuple[Tensor, Tensor, Tensor]:
    """The ``k`` best one-word extensions of each sentence's hypotheses, best first.

    ``scores`` (B', W) are the Σ ln p of W hypotheses per sentence and ``log_probs`` (B', W, V)
    their next-word ln p. Returns the extensions' Σ ln p, the hypotheses (0..W-1) they extend and
    their words, each (B', k). Only a hypothesis' k best words can be among its sentence's k best
    extensions, so those are taken first: W·k candidates per sentence instead of W·V.
    """
    row_values, row_tokens = log_probs.topk(min(k, log_probs.shape[2]), dim=2)  # (B', W, k)
    return best_extensions(scores, row_values, row_tokens, k)


def best_extensions(scores: Tensor, row_values: Tensor, row_tokens: Tensor, k: int) -> tuple[Tensor, Tensor, Tensor]:
    """:func:`top_candidates` from each hypothesis' best words already found: their values and ids
    (B', W, k'), k' = min(k, V), best first."""
    sentences, width, per_row = row_values.shape
    candidates = (scores[:, :, None] + row_values).view(sentences, width * per_row)  # (B', W·k)
    tokens = row_tokens.reshape(sentences, width * per_row)
    beams = torch.arange(width, device=scores.device).repeat_interleave(per_row).expand(sentences, -1)
    if width * per_row < k:  # fewer extensions than asked for: fill with impossible ones
        missing = k - width * per_row
        candidates = torch.nn.functional.pad(candidates, (0, missing), value=-math.inf)
        tokens = torch.nn.functional.pad(tokens, (0, missing), value=PAD_ID)
        beams = torch.nn.functional.pad(beams, (0, missing))
    values, pick = candidates.topk(k, dim=1)  # (B', k)
    return values, beams.gather(1, pick), tokens.gather(1, pick)


@dataclass
class RowExtensions:
    """Each row's ``k`` best next words by the ranking score: their gains (R, k) and ids (R, k), their
    ln p (R, k), and the ln p of ``</s>`` (R,) (what a hypothesis that ends gets)."""

    gains: Tensor
    tokens: Tensor
    log_probs: Tensor
    eos: Tensor


def row_extensions(log_probs: Tensor, at_max: Tensor, weights: FeatureWeights | None, k: int) -> RowExtensions:
    """The best ``k`` words of each row of ``log_probs`` (R, V) (changed in place by :func:`restrict`)."""
    eos = log_probs[:, EOS_ID].clone()
    restrict(log_probs, at_max)
    gains = log_probs if weights is None else weights.gains(log_probs)
    values, tokens = gains.topk(min(k, log_probs.shape[1]), dim=1)
    return RowExtensions(values, tokens, values if weights is None else log_probs.gather(1, tokens), eos)


OUTPUT_ROWS = 128  # rows of logits at a time: a (128, V) block is normalised and searched while in cache


def step_extensions(model: Seq2Seq, prev: Tensor, state: DecoderState, at_max: Tensor,
                    weights: FeatureWeights | None, k: int) -> tuple[RowExtensions, DecoderState]:
    """One search step: the new state and each row's best ``k`` extensions, found ``OUTPUT_ROWS`` rows at
    a time from the model's features, so that the (R, V) log-probabilities are never all in memory.

    The reference path (:meth:`Seq2Seq.uses_reference`), and a model without blockwise steps (an ensemble),
    take the whole (R, V) matrix of ``model.step``."""
    if not model.blockwise_steps or model.uses_reference("search"):
        log_probs, state = model.step(prev, state)
        return row_extensions(log_probs, at_max, weights, k), state
    features, state = model.step_features(prev, state)
    parts = [row_extensions(torch.log_softmax(model.output_logits(features[start: start + OUTPUT_ROWS]), dim=-1),
                            at_max[start: start + OUTPUT_ROWS], weights, k)
             for start in range(0, features.shape[0], OUTPUT_ROWS)]
    if len(parts) == 1:
        return parts[0], state
    return RowExtensions(*(torch.cat(x) for x in zip(*(vars(p).values() for p in parts), strict=True))), state


def live_candidates(is_eos: Tensor, beam_size: int) -> Tensor:
    """Positions (B', K) of the first ``beam_size`` candidates of each row of ``is_eos`` (B', 2K)
    that do not end in ``</s>``, in rank order."""
    return torch.argsort(is_eos.to(torch.uint8), dim=1, stable=True)[:, :beam_size]


@dataclass
class StepRecord:
    """What step t chose, one entry per row after the step: enough to trace hypotheses back."""

    parents: Tensor  # (R,) the row of the previous record each row extends
    tokens: Tensor  # (R,) word t
    token_scores: Tensor  # (R,) its ln p
    attention: Tensor | None  # (R, S) the weights with which it was predicted


@dataclass
class Finished:
    """The N best finished hypotheses of each sentence, best first by normalised (or weighted) score.

    A slot is empty while its normalised score is −inf. A hypothesis that ends at step t has t
    words, recorded by steps 0..t-1; ``rows`` is the row of its last word in record t - 1.
    """

    normalised: Tensor  # (B, N)
    scores: Tensor  # (B, N) Σ ln p, </s> included
    steps: Tensor  # (B, N) the step of its </s>: its number of words
    rows: Tensor  # (B, N)
    eos_scores: Tensor  # (B, N) ln p(</s>)
    eos_attention: Tensor | None = None  # (B, N, S), from the first candidates with attention

    @classmethod
    def empty(cls, sentences: int, nbest: int, dtype: torch.dtype, device: torch.device) -> Finished:
        def zeros(dtype: torch.dtype = dtype) -> Tensor:
            return torch.zeros(sentences, nbest, dtype=dtype, device=device)

        return cls(normalised=torch.full((sentences, nbest), -math.inf, dtype=dtype, device=device),
                   scores=zeros(), steps=zeros(torch.long), rows=zeros(torch.long), eos_scores=zeros())

    def add(self, sentences: Tensor, normalised: Tensor, scores: Tensor, step: int, rows: Tensor,
            eos_scores: Tensor, eos_attention: Tensor | None = None) -> None:
        """Merge candidates (B', K) of ``sentences`` (B',) into their N best; −inf marks a non-candidate."""
        nbest = self.normalised.shape[1]
        if eos_attention is not None and self.eos_attention is None:
            self.eos_attention = eos_attention.new_zeros(self.normalised.shape[0], nbest, eos_attention.shape[-1])
        best, pick = torch.cat([self.normalised[sentences], normalised], dim=1).topk(nbest, dim=1)  # (B', N)

        def merge(old: Tensor, new: Tensor) -> Tensor:
            both = torch.cat([old[sentences], new], dim=1)  # (B', N + K, ...)
            index = pick.view(*pick.shape, *[1] * (both.dim() - 2)).expand(-1, -1, *both.shape[2:])
            return both.gather(1, index)

        self.normalised[sentences] = best
        self.scores[sentences] = merge(self.scores, scores)
        self.steps[sentences] = merge(self.steps, torch.full_like(rows, step))
        self.rows[sentences] = merge(self.rows, rows)
        self.eos_scores[sentences] = merge(self.eos_scores, eos_scores)
        if self.eos_attention is not None and eos_attention is not None:
            self.eos_attention[sentences] = merge(self.eos_attention, eos_attention)

    def worst(self, sentences: Tensor) -> Tensor:
        """The normalised score (B',) a live hypothesis must beat: the N-th best finished one, or −inf."""
        return self.normalised[sentences, -1]


@torch.inference_mode()
def beam_search(model: Seq2Seq, src: Tensor, src_len: Tensor, config: SearchConfig) -> list[list[Hypothesis]]:
    """The ``config.nbest`` best hypotheses of each source sentence (B, S) of lengths (B,), best first.

    Sources are ids followed by ``</s>`` (:func:`rerank.models.batching.to_ids`), padded. A sentence gets fewer
    than N hypotheses only when fewer exist within the length limit (an empty source has one).
    """
    if model.training:
        raise ValueError("beam search needs the model in evaluation mode (model.eval()): dropout is on")
    sentences, k = src.shape[0], config.beam_size
    device = src.device
    src_len = src_len.to(device)  # the decoder state's lengths go where its other tensors are
    max_words = torch.ceil(config.max_ratio * (src_len - 1).double()).long()  # (B,)
    state = model.encode(src, src_len)  # one <s> hypothesis per sentence: B rows, then B'·K after step 0
    width = 1  # hypotheses per sentence
    scores = torch.zeros(sentences, dtype=state.hidden.dtype, device=device)  # (R,) Σ ln p
    ranks = scores  # (R,) what the search ranks by: Σ ln p, or the weighted score
    prev = torch.full((sentences,), BOS_ID, dtype=torch.long, device=device)  # (R,) last words
    active = torch.arange(sentences, device=device)  # (B',) the sentences still searched
    origin = torch.arange(sentences, device=device)  # (R,) each row's row in the last record
    finished = Finished.empty(sentences, config.nbest, scores.dtype, device)
    history: list[StepRecord] = []
    penalty, weights = config.length_penalty, config.weights
    for step in range(int(max_words.max()) + 1):
        at_max = (max_words[active] == step).repeat_interleave(width)
        extensions, state = step_extensions(model, prev, state, at_max, weights, 2 * k)  # (R, 2K) per row
        values, beams, picks = best_extensions(ranks.view(len(active), width),
                                               extensions.gains.view(len(active), width, -1),
                                               torch.arange(extensions.tokens.shape[1], device=device).expand(
                                                   len(active), width, -1), 2 * k)  # (B', 2K)
        rows = beams + torch.arange(len(active), device=device)[:, None] * width  # (B', 2K) rows of this step
        tokens = extensions.tokens[rows, picks].masked_fill(torch.isneginf(values), PAD_ID)
        token_log_probs = extensions.log_probs[rows, picks]  # (B', 2K)
        totals = scores[rows] + token_log_probs  # (B', 2K) Σ ln p: ``values`` again without weights
        is_eos = tokens == EOS_ID

        ends = is_eos[:, :k]  # (B', K) finished hypotheses among the K best candidates
        if ends.any():
            end_rows = rows[:, :k]
            finished.add(active, penalty.normalise(values[:, :k], step + 1).masked_fill(~ends, -math.inf),
                         totals[:, :k], step, origin[end_rows], extensions.eos[end_rows],
                         None if state.attention is None else state.attention[end_rows])

        keep = live_candidates(is_eos, k)  # (B', K)
        values, totals = values.gather(1, keep), totals.gather(1, keep)
        token_log_probs = token_log_probs.gather(1, keep)
        rows, tokens = rows.gather(1, keep).view(-1), tokens.gather(1, keep).view(-1)
        state = state.index_select(rows, same_sources=width == k)  # K rows per sentence from here on
        history.append(StepRecord(parents=origin[rows], tokens=tokens, token_scores=token_log_probs.view(-1),
                                  attention=state.attention))
        ranks, scores, prev, width = values.view(-1), totals.view(-1), tokens, k
        origin = torch.arange(len(rows), device=device)

        best = penalty.normalise(values[:, 0], step + 1)  # (B',)
        if weights is not None:
            best = weights.bound(best, max_words[active] - (step + 1))
        done = best <= finished.worst(active)  # (B',)
        if done.all():
            break
        if done.any():
            kept = (~done).nonzero().squeeze(1)  # (B'',)
            origin = (kept[:, None] * k + torch.arange(k, device=device)).view(-1)
            active = active[kept]
            state, ranks, scores, prev = state.index_select(origin), ranks[origin], scores[origin], prev[origin]
    return collect(finished, history, src_len)


def collect(finished: Finished, history: list[StepRecord], src_len: Tensor) -> list[list[Hypothesis]]:
    """The finished hypotheses of each sentence, traced back through ``history``."""
    sentences, nbest = finished.scores.shape
    slots = sentences * nbest
    ends = finished.steps.reshape(-1)  # (B·N,) each hypothesis' number of words
    pointer = finished.rows.reshape(-1).clone()
    length = len(history) + 1  # words and </s>
    device = ends.device
    tokens = torch.full((slots, length), PAD_ID, dtype=torch.long, device=device)
    token_scores = torch.zeros(slots, length, dtype=finished.scores.dtype, device=device)
    attention = None
    if finished.eos_attention is not None:
        attention = torch.zeros(slots, length, finished.eos_attention.shape[-1], dtype=finished.scores.dtype,
                                device=device)
    for t in reversed(range(len(history))):  # one vectorised step back for every hypothesis at once
        on = (ends > t).nonzero().squeeze(1)
        record, rows = history[t], pointer[on]
        tokens[on, t] = record.tokens[rows]
        token_scores[on, t] = record.token_scores[rows]
        if attention is not None and record.attention is not None:
            attention[on, t] = record.attention[rows]
        pointer[on] = record.parents[rows]
    slot = torch.arange(slots, device=device)
    token_scores[slot, ends] = finished.eos_scores.reshape(-1)
    if attention is not None and finished.eos_attention is not None:
        attention[slot, ends] = finished.eos_attention.reshape(slots, -1)

    normalised = finished.normalised.reshape(-1).tolist()
    scores = finished.scores.reshape(-1).tolist()
    ends_list, token_list, score_list = ends.tolist(), tokens.tolist(), token_scores.tolist()
    lengths = src_len.tolist()
    attention = attention.cpu() if attention is not None else None
    results: list[list[Hypothesis]] = []
    for b in range(sentences):
        hypotheses = []
        for i in range(b * nbest, (b + 1) * nbest):
            if normalised[i] == -math.inf:
                break
            end = ends_list[i]
            hypotheses.append(Hypothesis(
                tokens=token_list[i][:end], score=scores[i], normalised=normalised[i],
                token_scores=score_list[i][: end + 1],
                attention=None if attention is None else attention[i, : end + 1, : lengths[b]]))
        results.append(hypotheses)
    return results
