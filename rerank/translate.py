"""Translating a corpus with :func:`rerank.search.beam_search`, and what the attention gives on top.

Sentences are translated in batches of similar length (sorted within windows of
``SORT_WINDOW`` batches, so that little of a batch is padding) and come back in input order.
From the attention weights of a hypothesis come its hard word alignment (each target word to
the source word it attends to most) and UNK replacement (Luong et al. 2015, arXiv:1410.8206, with
the alignment read from the attention, as Jean et al. 2015, arXiv:1412.2007, do): each
``<unk>`` becomes the dictionary translation of its aligned source word, or that word itself.

With :class:`~rerank.search.FeatureWeights` read from a weights file, the n-best list carries the
features the search ranks by, the model's ln p and the word penalty ``WP0``, on every line.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Iterator, Mapping, Sequence

import numpy as np
import torch
from torch import Tensor

from rerank.data import pad, to_ids
from rerank.errors import FormatError, RerankError
from rerank.formats.files import display_name, read_lines
from rerank.formats.nbest import FeatureLayout, NBestEntry, format_features, format_value
from rerank.formats.phrase_table import read_phrase_table
from rerank.models.seq2seq import Seq2Seq
from rerank.search import FeatureWeights, Hypothesis, SearchConfig, beam_search
from rerank.vocab import EOS, UNK, Vocabulary
from rerank.weights import load_weights

logger = logging.getLogger(__name__)

BATCH_SIZE = 50  # sentences searched together
SORT_WINDOW = 20  # batches sorted by length together
PROGRESS_EVERY = 30.0  # seconds between progress lines
P_E_GIVEN_F = 2  # p(e|f) in a Moses phrase table: p(f|e) lex(f|e) p(e|f) lex(e|f)
WORD_PENALTY = "WP0"  # −(number of words), Moses' WordPenalty

Sentence = list[str]


def translate(model: Seq2Seq, src_vocab: Vocabulary, sentences: Sequence[Sentence], config: SearchConfig,
              batch_size: int = BATCH_SIZE, device: str | torch.device = "cpu",
              sort_window: int = SORT_WINDOW) -> Iterator[list[Hypothesis]]:
    """The n-best hypotheses of each sentence, in input order, translated ``batch_size`` at a time
    (sentences sorted by length within windows of ``sort_window`` batches)."""
    ids = to_ids(sentences, src_vocab)
    started = last_report = time.monotonic()
    window = batch_size * sort_window
    for start in range(0, len(ids), window):
        chunk = ids[start: start + window]
        order = sorted(range(len(chunk)), key=lambda i: -len(chunk[i]))
        results: list[list[Hypothesis]] = [[] for _ in chunk]
        for first in range(0, len(order), batch_size):
            batch = order[first: first + batch_size]
            src, src_len = pad([chunk[i] for i in batch])
            for i, hypotheses in zip(batch, beam_search(model, src.to(device), src_len, config), strict=True):
                results[i] = hypotheses
        yield from results
        done, now = start + len(chunk), time.monotonic()
        if now - last_report >= PROGRESS_EVERY or done == len(ids):
            rate = done / max(now - started, 1e-9)
            logger.info("translated %d/%d sentences (%.1f sentences/s)", done, len(ids), rate)
            last_report = now


def attended_words(attention: Tensor, source_words: int) -> list[int]:
    """For each row of ``attention`` (T, S), the source word (not ``</s>``) with the most weight."""
    if source_words == 0:
        return []
    return attention[:, :source_words].argmax(-1).tolist()


def hard_alignment(hypothesis: Hypothesis, source_words: int) -> list[tuple[int, int]]:
    """(source, target) word positions, 0-based, each target word with its most attended source
    word, sorted as Moses writes alignments; ``</s>`` on either side is left out."""
    if hypothesis.attention is None or source_words == 0:
        return []
    aligned = attended_words(hypothesis.attention[: len(hypothesis.tokens)], source_words)
    return sorted((i, j) for j, i in enumerate(aligned))


def format_alignment(pairs: Sequence[tuple[int, int]]) -> str:
    return " ".join(f"{i}-{j}" for i, j in pairs)


def replace_unknowns(words: Sentence, source: Sentence, attention: Tensor | None,
                     dictionary: Mapping[str, str]) -> Sentence:
    """``words`` with each ``<unk>`` replaced by the dictionary translation of the source word it
    attends to most, or by that source word when the dictionary has none."""
    if UNK not in words or attention is None or not source:
        return words
    aligned = attended_words(attention[: len(words)], len(source))
    return [dictionary.get(source[i], source[i]) if word == UNK else word
            for word, i in zip(words, aligned, strict=True)]


def target_words(hypothesis: Hypothesis, source: Sentence, trg_vocab: Vocabulary,
                 dictionary: Mapping[str, str] | None = None) -> Sentence:
    """The words of ``hypothesis``; with a ``dictionary`` (even an empty one), its ``<unk>``s replaced."""
    words = [trg_vocab.tokens[t] for t in hypothesis.tokens]
    if dictionary is None:
        return words
    return replace_unknowns(words, source, hypothesis.attention, dictionary)


def read_dictionary(path: str | os.PathLike) -> dict[str, str]:
    """A word dictionary: ``source translation`` per line, one translation per source word."""
    name = display_name(path)
    dictionary: dict[str, str] = {}
    for lineno, line in read_lines(path):
        fields = line.split()
        if not fields:
            continue
        if len(fields) != 2:
            raise FormatError(name, lineno, "a source word and its translation separated by a space", got=line)
        if fields[0] in dictionary and dictionary[fields[0]] != fields[1]:
            raise FormatError(name, lineno, f"one translation of {fields[0]!r} (already {dictionary[fields[0]]!r})",
                              got=line)
        dictionary[fields[0]] = fields[1]
    return dictionary


def phrase_table_dictionary(path: str | os.PathLike, score_index: int = P_E_GIVEN_F) -> dict[str, str]:
    """For each one-word source phrase of a Moses phrase table, its most probable one-word
    translation by the score in column ``score_index`` (0-based; default p(e|f)); the first on a tie."""
    best: dict[str, tuple[float, str]] = {}
    for entry in read_phrase_table(path):
        if len(entry.scores) <= score_index:
            raise FormatError(display_name(path), entry.lineno,
                              f"at least {score_index + 1} scores, p(e|f) being score {score_index + 1}",
                              got=entry.fields[2])
        source, target = entry.source, entry.target
        if " " in source or " " in target:
            continue
        score = entry.scores[score_index]
        if source not in best or score > best[source][0]:
            best[source] = (score, target)
    return {source: target for source, (_, target) in best.items()}


def read_feature_weights(path: str | os.PathLike, label: str) -> FeatureWeights:
    """The weights of the model's ln p (``label``) and of ``WP0`` in a YAML weights file or a
    ``moses.ini``; a missing one keeps its default (1 and 0), any other label is an error."""
    weights = load_weights(path)
    known = {label: "model", WORD_PENALTY: "word_penalty"}
    unknown = [name for name in weights if name not in known]
    if unknown:
        raise RerankError(f"{path}: weights for features the search does not have: {', '.join(unknown)} "
                          f"(it has {label} and {WORD_PENALTY})")
    for name, values in weights.items():
        if len(values) != 1:
            raise RerankError(f"{path}: {name} is one feature, but has {len(values)} weights")
    try:
        return FeatureWeights(**{known[name]: values[0] for name, values in weights.items()})
    except ValueError as e:
        raise RerankError(f"{path}: {e}") from None


def hypothesis_features(hypothesis: Hypothesis, label: str,
                        weights: FeatureWeights | None) -> tuple[list[tuple[str, float]], float]:
    """The n-best features of ``hypothesis`` and their total: ln p alone, with weight 1, or with
    ``weights`` ln p and ``WP0`` and their weighted sum, what the search ranked it by."""
    if weights is None:
        return [(label, hypothesis.score)], hypothesis.score
    words = len(hypothesis.tokens)
    return [(label, hypothesis.score), (WORD_PENALTY, -float(words))], weights.total(hypothesis.score, words)


def nbest_entry(sentence_id: int, words: Sentence, features: Sequence[tuple[str, float]],
                total: float) -> NBestEntry:
    """``id ||| words ||| label= value ... ||| total``, as Moses writes an n-best line."""
    fields = (f"{sentence_id} ", f" {' '.join(words)} ",
              f" {format_features([(label, [value]) for label, value in features])} ", f" {format_value(total)}")
    layout = FeatureLayout(tuple(label for label, _ in features), (1,) * len(features))
    return NBestEntry(sentence_id, fields, tuple(value for _, value in features), layout, total=total)


def attention_record(sentence_id: int, source: Sentence, words: Sentence, attention: Tensor,
                     decimals: int = 4) -> dict[str, object]:
    """One JSON line of soft alignments: rows are the target words and ``</s>``, columns the source's."""
    weights = np.round(attention.double().numpy(), decimals)
    return {"id": sentence_id, "source": [*source, EOS], "target": [*words, EOS], "attention": weights.tolist()}


def check_source_lengths(sentences: Sequence[Sentence], model: Seq2Seq, path: str | os.PathLike) -> None:
    """The location score has one output per source position: refuse longer sentences before searching."""
    config = model.config
    if config.architecture != "rnnsearch" or config.attention.score != "location":
        return
    limit = config.attention.max_source_length - 1  # and </s>
    for lineno, sentence in enumerate(sentences, 1):
        if len(sentence) > limit:
            raise FormatError(display_name(path), lineno, f"at most {limit} words: the model's location attention "
                              f"has max_source_length {limit + 1} (words and </s>)",
                              got=f"{len(sentence)} words")


def has_attention(model: Seq2Seq) -> bool:
    return model.config.architecture == "rnnsearch"


def require_attention(model: Seq2Seq, what: str) -> None:
    if not has_attention(model):
        raise RerankError(f"{what} needs attention weights, and an {model.config.architecture} model has none "
                          "(use an rnnsearch model)")
