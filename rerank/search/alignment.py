"""What the attention of a hypothesis gives: hard word alignments, soft alignments as JSON records,
and UNK replacement.

UNK replacement follows Luong et al. 2015 (arXiv:1410.8206), with the alignment read from the
attention as Jean et al. 2015 (arXiv:1412.2007) do: each ``<unk>`` becomes the dictionary
translation of the source word it attends to most, or that word itself.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor

from rerank.errors import RerankError
from rerank.formats.tokens import Tokens
from rerank.models.architectures import MODELS
from rerank.models.batching import pad, to_ids
from rerank.models.checkpoint import LoadedModel
from rerank.models.seq2seq import Seq2Seq, shift_right, token_log_probs
from rerank.models.vocab import EOS, UNK, Vocabulary
from rerank.search.beam import Hypothesis, SearchConfig, beam_search


def attended_words(attention: Tensor, source_words: int) -> list[int]:
    """For each row of ``attention`` (T, S), the source word (not ``</s>``) with the most weight."""
    if source_words == 0:
        return []
    return attention[:, :source_words].argmax(-1).tolist()


def hard_alignment(hypothesis: Hypothesis, source_words: int) -> list[tuple[int, int]]:
    """(source, target) word positions, 0-based, each target word with its most attended source
    word, sorted as Moses writes alignments; ``</s>`` on either side is left out."""
    if hypothesis.attention is None:
        return []
    return alignment_of(hypothesis.attention, len(hypothesis.tokens), source_words)


def alignment_of(attention: Tensor, target_words: int, source_words: int) -> list[tuple[int, int]]:
    """The hard alignment of an attention matrix over words (target words then ``</s>``, source words then
    ``</s>``)."""
    if source_words == 0:
        return []
    return sorted((i, j) for j, i in enumerate(attended_words(attention[:target_words], source_words)))


def word_attention(attention: Tensor, src_ids: Sequence[int], trg_ids: Sequence[int], src_vocab: Vocabulary,
                   trg_vocab: Vocabulary) -> Tensor:
    """Attention over pieces (the rows: ``trg_ids`` then ``</s>``; the columns: ``src_ids`` then ``</s>``) summed
    back onto Moses tokens: a source token's column is the sum of its pieces' columns, a target token's row
    the mean of its pieces' rows, so that each row still sums to one. Over words it is ``attention`` itself."""
    src_map = np.append(src_vocab.word_of_piece(src_ids), -1)
    trg_map = np.append(trg_vocab.word_of_piece(trg_ids), -1)
    src_map[-1], trg_map[-1] = src_map.max(initial=-1) + 1, trg_map.max(initial=-1) + 1  # </s> last
    if np.array_equal(src_map, np.arange(len(src_map))) and np.array_equal(trg_map, np.arange(len(trg_map))):
        return attention
    attention = attention[: len(trg_map), : len(src_map)]
    columns = attention.new_zeros(len(trg_map), int(src_map[-1]) + 1).index_add_(
        1, torch.as_tensor(src_map, device=attention.device), attention)
    rows = attention.new_zeros(int(trg_map[-1]) + 1, columns.shape[1]).index_add_(
        0, torch.as_tensor(trg_map, device=attention.device), columns)
    counts = np.bincount(trg_map)
    return rows / torch.as_tensor(counts, dtype=rows.dtype, device=rows.device)[:, None]


def format_alignment(pairs: Sequence[tuple[int, int]]) -> str:
    return " ".join(f"{i}-{j}" for i, j in pairs)


def replace_unknowns(words: list[str], source: Tokens, attention: Tensor | None,
                     dictionary: Mapping[str, str]) -> list[str]:
    """``words`` with each ``<unk>`` replaced by the dictionary translation of the source word it
    attends to most, or by that source word when the dictionary has none."""
    if UNK not in words or attention is None or not source:
        return words
    aligned = attended_words(attention[: len(words)], len(source))
    return [dictionary.get(source[i], source[i]) if word == UNK else word
            for word, i in zip(words, aligned, strict=True)]


def target_words(hypothesis: Hypothesis, source: Tokens, trg_vocab: Vocabulary,
                 dictionary: Mapping[str, str] | None = None) -> list[str]:
    """The words of ``hypothesis`` (a subword model's pieces joined into Moses tokens); with a ``dictionary`` (even
    an empty one), its ``<unk>``s replaced (a word model's: a subword model spells every word)."""
    words = trg_vocab.words(hypothesis.tokens)
    if dictionary is None:
        return words
    return replace_unknowns(words, source, hypothesis.attention, dictionary)


def attention_record(sentence_id: int, source: Tokens, words: Tokens, attention: Tensor,
                     decimals: int = 4) -> dict[str, object]:
    """One JSON line of soft alignments: rows are the target words and ``</s>``, columns the source's."""
    weights = np.round(attention.double().numpy(), decimals)
    return {"id": sentence_id, "source": [*source, EOS], "target": [*words, EOS], "attention": weights.tolist()}


def require_attention(model: Seq2Seq, what: str) -> None:
    if not model.has_attention:
        attending = " or ".join(name for name, kind in MODELS.items() if kind.has_attention)
        raise RerankError(f"{what} needs attention weights, and an {model.config.architecture} model has none "
                          f"(use an {attending} model)")


def require_attention_for(model: Seq2Seq, *, alignments: bool = False, attention: bool = False,
                          unk_replace: bool = False) -> None:
    """Refuse, naming the option, outputs that need attention weights when ``model`` has none."""
    for flag, wanted in (("--alignments", alignments), ("--attention", attention), ("--unk-replace", unk_replace)):
        if wanted:
            require_attention(model, flag)


@dataclass(frozen=True)
class AttentionWeights:
    """A sentence pair's attention: ``weights`` (target words and ``</s>``, source words and ``</s>``),
    the target's words, and ln p(target | source)."""

    weights: np.ndarray
    target: list[str]
    score: float


@torch.inference_mode()
def attention_weights(loaded: LoadedModel, source: Tokens, target: Tokens | None, search: SearchConfig,
                      device: str | torch.device = "cpu") -> AttentionWeights:
    """The attention of ``loaded`` over ``source`` and ``target`` by forced decoding, or, without a target,
    over the best translation that beam search finds."""
    model = loaded.model
    require_attention(model, "rerank align")
    src, src_len = pad(to_ids([source], loaded.src_vocab))
    src, src_len = src.to(device), src_len.to(device)
    if target is None:
        [[best]] = beam_search(model, src, src_len, search)
        assert best.attention is not None
        weights = word_attention(best.attention, src[0, :-1].tolist(), best.tokens, loaded.src_vocab,
                                 loaded.trg_vocab)
        return AttentionWeights(weights.double().cpu().numpy(), loaded.trg_vocab.words(best.tokens), best.score)
    trg, _ = pad(to_ids([target], loaded.trg_vocab))
    trg = trg.to(device)
    logits, attention = model.teacher_forced(model.encode(src, src_len), shift_right(trg))
    assert attention is not None
    weights = word_attention(attention[0], src[0, :-1].tolist(), trg[0, :-1].tolist(), loaded.src_vocab,
                             loaded.trg_vocab)
    return AttentionWeights(weights.double().cpu().numpy(), list(target), float(token_log_probs(logits, trg).sum()))
