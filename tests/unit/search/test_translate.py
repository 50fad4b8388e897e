"""Translating a corpus: sentences come back in input order across batches and sort windows, each as the beam
search gives it alone."""

from __future__ import annotations

import math

from tiny_models import tiny_config, tiny_model

from rerank.models.batching import pad, to_ids
from rerank.models.vocab import Vocabulary
from rerank.search.beam import SearchConfig, beam_search
from rerank.search.translate import translate


def test_translate_returns_input_order_across_batches_and_windows() -> None:
    sentences = [("w" + str(i % 7) + " ") * (1 + (i * 5) % 9) for i in range(23)]
    sentences = [s.split() for s in sentences] + [[]]
    vocab = Vocabulary(["<pad>", "<unk>", "<s>", "</s>", *[f"w{i}" for i in range(7)]])
    config = SearchConfig(beam_size=3, nbest=2)
    model = tiny_model(tiny_config(), src_vocab=len(vocab))
    results = list(translate(model, vocab, sentences, config, batch_size=4, sort_window=2))  # 3 windows
    for ids, hypotheses in zip(to_ids(sentences, vocab), results, strict=True):
        src, src_len = pad([ids])
        [alone] = beam_search(model, src, src_len, config)
        assert [h.tokens for h in hypotheses] == [h.tokens for h in alone]
        assert all(math.isclose(a.score, b.score, abs_tol=1e-9) for a, b in zip(hypotheses, alone, strict=True))


def test_each_batch_is_counted_as_it_is_searched_before_its_window_comes_out() -> None:
    sentences = [["w1"] * (1 + i % 5) for i in range(10)]
    vocab = Vocabulary(["<pad>", "<unk>", "<s>", "</s>", "w1"])
    model = tiny_model(tiny_config(), src_vocab=len(vocab))
    searched: list[int] = []
    results = translate(model, vocab, sentences, SearchConfig(beam_size=2), batch_size=3, sort_window=2,
                        searched=searched.append)
    next(results)
    assert searched == [3, 3]  # the first window's two batches, before its first sentence is given
    list(results)
    assert sum(searched) == 10 and len(searched) == 4
