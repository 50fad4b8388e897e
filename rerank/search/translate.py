"""Translating a corpus with :func:`rerank.search.beam.beam_search`: 1-best text, Moses n-best lists,
alignments and attention.

Sentences are translated in batches of similar length (sorted within windows of
``SORT_WINDOW`` batches, so that little of a batch is padding) and come back in input order.
With :class:`~rerank.search.beam.FeatureWeights` read from a weights file, the n-best list carries the
features the search ranks by, the model's ln p and the word penalty ``WP0``, on every line.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import math
import os
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import torch

from rerank.errors import FormatError, NonFiniteScore, RerankError, quoted, shorten
from rerank.formats.files import atomic_output, display_name
from rerank.formats.nbest import FeatureLayout, NBestEntry
from rerank.formats.pipeline import Behind
from rerank.formats.streams import chunks
from rerank.formats.tokens import Tokens
from rerank.formats.weights import load_weights, weight_vector
from rerank.models.batching import longest_first, pad, sorted_batches, to_ids, token_batches
from rerank.models.checkpoint import LoadedModel
from rerank.models.seq2seq import Seq2Seq
from rerank.models.vocab import Vocabulary
from rerank.progress import progress_bar, summary
from rerank.search.alignment import (
    alignment_of,
    attention_record,
    format_alignment,
    require_attention_for,
    target_words,
    word_attention,
)
from rerank.search.beam import FeatureWeights, Hypothesis, SearchConfig, beam_search
from rerank.search.right_to_left import Reranked, RightToLeft, rerank_both_ways

logger = logging.getLogger(__name__)

BATCH_SIZE = 50  # sentences searched together
SORT_WINDOW = 20  # batches sorted by length together
WORD_PENALTY = "WP0"  # −(number of words), Moses' WordPenalty


def translate(model: Seq2Seq, src_vocab: Vocabulary, sentences: Sequence[Tokens], config: SearchConfig,
              batch_size: int = BATCH_SIZE, device: str | torch.device = "cpu",
              sort_window: int = SORT_WINDOW, batch_tokens: int | None = None,
              searched: Callable[[int], object] | None = None) -> Iterator[list[Hypothesis]]:
    """The n-best hypotheses of each sentence, in input order, translated ``batch_size`` at a time
    (sentences sorted by length within windows of ``sort_window`` batches), or with ``batch_tokens`` in
    batches of as many sentences of the window as fit in that many padded source tokens (sentences × the
    longest, ``</s>`` included); a right-to-left model's are turned to read left to right. ``searched`` is
    told each batch's size as it is searched (a window's sentences come out only once all are)."""
    ids = to_ids(sentences, src_vocab)
    reverse = model.config.reverse_target
    for chunk in chunks(ids, batch_size * sort_window):
        results: list[list[Hypothesis]] = [[] for _ in chunk]
        lengths = [len(s) for s in chunk]
        batches = sorted_batches(lengths, batch_size) if batch_tokens is None else \
            token_batches(longest_first(lengths), np.asarray(lengths), batch_tokens)
        for batch in batches:
            src, src_len = pad([chunk[i] for i in batch])
            for i, hypotheses in zip(batch, beam_search(model, src.to(device), src_len, config), strict=True):
                results[i] = [left_to_right(h) for h in hypotheses] if reverse else hypotheses
            if searched is not None:
                searched(len(batch))
        yield from results


def left_to_right(hypothesis: Hypothesis) -> Hypothesis:
    """A right-to-left model's hypothesis read left to right: its words, their scores and attention rows
    reversed; ``</s>`` (the last score and attention row) stays last."""
    n = len(hypothesis.tokens)
    words = list(range(n - 1, -1, -1)) + [n]
    attention = hypothesis.attention
    return dataclasses.replace(
        hypothesis, tokens=hypothesis.tokens[::-1], token_scores=[hypothesis.token_scores[i] for i in words],
        attention=None if attention is None else attention[torch.as_tensor(words, device=attention.device)])


@dataclass(frozen=True)
class TranslationOutputs:
    """Where :func:`translate_file` writes: the translations (or n-best list), and optionally the
    hard alignments and the soft attention of each best hypothesis."""

    output: str | os.PathLike[str]
    nbest: bool = False
    nbest_size: int | None = None  # hypotheses per sentence in the n-best list; none: all the search kept
    alignments: str | os.PathLike[str] | None = None
    attention: str | os.PathLike[str] | None = None


def translate_file(loaded: LoadedModel, sentences: Sequence[Tokens], outputs: TranslationOutputs,
                   config: SearchConfig, *, label: str, dictionary: Mapping[str, str] | None = None,
                   batch_size: int = BATCH_SIZE, device: str | torch.device = "cpu", first_id: int = 0,
                   batch_tokens: int | None = None, show_progress: bool = True, overlap: bool = True,
                   right_to_left: RightToLeft | None = None) -> None:
    """Translate ``sentences`` and write every output atomically: all of them at the end, or none on an error.

    ``label`` names the model's ln p in the n-best list; with ``dictionary`` (even an empty one) each
    ``<unk>`` is replaced (see :func:`~rerank.search.alignment.replace_unknowns`). The sentences' ids
    start at ``first_id`` (a shard's first line's place in its file). With ``overlap``, the outputs are
    formatted and written by a thread of their own while the next batches are searched (the same bytes).
    With ``right_to_left``, each sentence's hypotheses are reranked by the right-to-left models too
    (:mod:`rerank.search.right_to_left`), their ln p a second feature of the n-best list.
    """
    model = loaded.model
    require_attention_for(model, alignments=bool(outputs.alignments), attention=bool(outputs.attention),
                          unk_replace=dictionary is not None)
    progress = progress_bar("sentences", len(sentences), enabled=show_progress)
    results = translate(model, loaded.src_vocab, sentences, config, batch_size, device, batch_tokens=batch_tokens,
                        searched=progress.update)
    with contextlib.ExitStack() as files:
        out = files.enter_context(atomic_output(outputs.output))
        alignments = files.enter_context(atomic_output(outputs.alignments)) if outputs.alignments else None
        attention = files.enter_context(atomic_output(outputs.attention)) if outputs.attention else None

        def write(translated: tuple[int, Tokens, list[Hypothesis], list[Reranked] | None]) -> None:
            sentence_id, source, hypotheses, reranked = translated
            if reranked is not None:
                reranked = reranked[:outputs.nbest_size]
                hypotheses, words = [r.hypothesis for r in reranked], [r.words for r in reranked]
            else:
                words = [target_words(h, source, loaded.trg_vocab, dictionary) for h in hypotheses]
            where = f"sentence {sentence_id} (line {sentence_id - first_id + 1} of the input)"
            check_scores(where, hypotheses, words, label)
            if reranked is not None and right_to_left is not None:
                check_right_to_left(where, reranked, right_to_left.label)
            best = hypotheses[0].attention
            if best is not None and (alignments is not None or attention is not None):
                best = word_attention(best, loaded.src_vocab.encode(source), hypotheses[0].tokens, loaded.src_vocab,
                                      loaded.trg_vocab)
            if outputs.nbest:
                for i, (h, hypothesis_words) in enumerate(zip(hypotheses, words, strict=True)):
                    features, total = hypothesis_features(h, label, config.weights)
                    if reranked is not None and right_to_left is not None:
                        features, total = [*features, (right_to_left.label, [reranked[i].right_to_left])], \
                            reranked[i].total
                    out.write(NBestEntry.build(sentence_id, hypothesis_words, features, total).line() + "\n")
            else:
                out.write(" ".join(words[0]) + "\n")
            if alignments is not None:
                aligned = [] if best is None else alignment_of(best, len(words[0]), len(source))
                alignments.write(format_alignment(aligned) + "\n")
            if attention is not None and best is not None:
                record = attention_record(sentence_id, source, words[0], best)
                attention.write(json.dumps(record, ensure_ascii=False) + "\n")

        with Behind(write, depth=BATCH_SIZE * SORT_WINDOW, enabled=overlap) as writer:
            translated = zip(sentences, results, strict=True)
            if right_to_left is None:
                for sentence_id, (source, hypotheses) in enumerate(translated, first_id):
                    writer.put((sentence_id, source, hypotheses, None))
            else:  # the right-to-left models score a window of sentences' hypotheses at a time
                sentence_id = first_id
                for window in chunks(translated, batch_size * SORT_WINDOW):
                    sources, nbests = [source for source, _ in window], [hypotheses for _, hypotheses in window]
                    words = [[target_words(h, source, loaded.trg_vocab, dictionary) for h in hypotheses]
                             for source, hypotheses in window]
                    reranked = rerank_both_ways(sources, nbests, words, right_to_left, config.length_penalty)
                    for source, hypotheses, sentence in zip(sources, nbests, reranked, strict=True):
                        writer.put((sentence_id, source, hypotheses, sentence))
                        sentence_id += 1
    logger.info("translated %s", summary(progress))


def check_right_to_left(where: str, reranked: Sequence[Reranked], label: str) -> None:
    """A :class:`~rerank.errors.NonFiniteScore` where the right-to-left models' ln p of a hypothesis is NaN or
    infinite."""
    for r in reranked:
        if not math.isfinite(r.right_to_left):
            raise NonFiniteScore(f"{where}, hypothesis {quoted(shorten(' '.join(r.words)))}", label, r.right_to_left)


def read_feature_weights(path: str | os.PathLike[str], label: str) -> FeatureWeights:
    """The weights of the model's ln p (``label``) and of ``WP0`` in a YAML weights file or a
    ``moses.ini``; a missing one keeps its default (1 and 0), any other label is an error."""
    layout = FeatureLayout((label, WORD_PENALTY), (1, 1))
    defaults = {label: (1.0,), WORD_PENALTY: (0.0,)}
    model, word_penalty = weight_vector({**defaults, **load_weights(path)}, layout, source=f"{path}",
                                        owner="the search").tolist()
    try:
        return FeatureWeights(model, word_penalty)
    except ValueError as e:
        raise RerankError(f"{path}: {e}") from None


def check_scores(where: str, hypotheses: Sequence[Hypothesis], words: Sequence[Sequence[str]], label: str) -> None:
    """A :class:`~rerank.errors.NonFiniteScore` if a hypothesis' ln p is NaN or infinite, an error if the search
    found none (every candidate's score was NaN): a broken model writes nothing, not garbage."""
    if not hypotheses:
        raise RerankError(f"{where}: the search found no hypothesis with a finite score (are the model's weights "
                          "broken?); nothing was written")
    for hypothesis, hypothesis_words in zip(hypotheses, words, strict=True):
        if not math.isfinite(hypothesis.score):
            raise NonFiniteScore(f"{where}, hypothesis {quoted(shorten(' '.join(hypothesis_words)))}", label,
                                 hypothesis.score)


def hypothesis_features(hypothesis: Hypothesis, label: str,
                        weights: FeatureWeights | None) -> tuple[list[tuple[str, list[float]]], float]:
    """The n-best features of ``hypothesis`` and their total: ln p alone, with weight 1, or with
    ``weights`` ln p and ``WP0`` and their weighted sum, what the search ranked it by."""
    if weights is None:
        return [(label, [hypothesis.score])], hypothesis.score
    words = len(hypothesis.tokens)
    return [(label, [hypothesis.score]), (WORD_PENALTY, [-float(words)])], weights.total(hypothesis.score, words)


def check_source_lengths(sentences: Sequence[Tokens], model: Seq2Seq, path: str | os.PathLike[str],
                         first_line: int = 1) -> None:
    """Refuse sentences longer than the model can read (a location score has one output per source position),
    before searching (``first_line``: the line number of the first sentence in ``path``)."""
    most = model.max_source_length()
    if most is None:
        return
    limit = most - 1  # and </s>
    for lineno, sentence in enumerate(sentences, first_line):
        if len(sentence) > limit:
            raise FormatError(display_name(path), lineno, f"at most {limit} words: the model's location attention "
                              f"has max_source_length {limit + 1} (words and </s>)",
                              got=f"{len(sentence)} words")


