"""rerank.search.translate: corpus order, hard alignments, UNK replacement, dictionaries and output lines."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch
from tiny_models import tiny_config, tiny_model

from rerank.errors import FormatError
from rerank.formats.dictionaries import phrase_table_dictionary, read_dictionary
from rerank.formats.nbest import NBestEntry, read_nbest
from rerank.models.batching import pad, to_ids
from rerank.models.vocab import UNK, Vocabulary
from rerank.search.alignment import attention_record, hard_alignment, replace_unknowns
from rerank.search.beam import Hypothesis, SearchConfig, beam_search
from rerank.search.translate import translate

# rows: target words then </s>; columns: source words then </s>
ATTENTION = torch.tensor([[0.1, 0.7, 0.1, 0.1],
                          [0.6, 0.1, 0.1, 0.2],
                          [0.1, 0.1, 0.2, 0.6],  # most on </s>: the heaviest word is 2
                          [0.0, 0.0, 0.1, 0.9]])


def hypothesis(tokens: list[int], attention: torch.Tensor | None = ATTENTION) -> Hypothesis:
    return Hypothesis(tokens=tokens, score=-3.0, normalised=-3.0, token_scores=[-1.0] * (len(tokens) + 1),
                      attention=attention)


def test_hard_alignment_links_each_target_word_to_its_heaviest_source_word() -> None:
    assert hard_alignment(hypothesis([7, 8, 9]), source_words=3) == [(0, 1), (1, 0), (2, 2)]
    assert hard_alignment(hypothesis([]), source_words=0) == []
    assert hard_alignment(hypothesis([7, 8, 9], attention=None), source_words=3) == []


def test_replace_unknowns_with_the_dictionary_or_the_source_word() -> None:
    source = ["the", "Zorglub", "sleeps"]
    words = [UNK, UNK, "dort"]
    assert replace_unknowns(words, source, ATTENTION, {}) == ["Zorglub", "the", "dort"]
    assert replace_unknowns(words, source, ATTENTION, {"the": "le"}) == ["Zorglub", "le", "dort"]
    assert replace_unknowns(["le", "chat"], source, ATTENTION, {}) == ["le", "chat"]
    assert replace_unknowns([UNK], [], ATTENTION[:, 3:], {}) == [UNK]  # nothing to copy from an empty source


def test_read_dictionary(tmp_path: Path) -> None:
    path = tmp_path / "dict.txt"
    path.write_text("house maison\n\nhouse maison\ncat chat\n")
    assert read_dictionary(path) == {"house": "maison", "cat": "chat"}
    path.write_text("house maison\ncat chat chatte\n")
    with pytest.raises(FormatError, match=r"dict.txt:2: expected a source word and its translation"):
        read_dictionary(path)
    path.write_text("house maison\nhouse domicile\n")
    with pytest.raises(FormatError, match=r"dict.txt:2: expected one translation of 'house' \(already 'maison'\)"):
        read_dictionary(path)


def test_phrase_table_dictionary_takes_the_most_probable_one_word_translation(tmp_path: Path) -> None:
    path = tmp_path / "phrase-table"
    path.write_text("cat ||| chat ||| 0.1 0.1 0.3 0.1\n"
                    "cat ||| chatte ||| 0.9 0.9 0.6 0.9\n"
                    "cat ||| le chat ||| 0.9 0.9 0.9 0.9\n"  # two target words: left out
                    "the cat ||| le chat ||| 0.9 0.9 0.9 0.9\n"  # two source words: left out
                    "dog ||| chien ||| 0.5 0.5 0.5 0.5\n"
                    "dog ||| chienne ||| 0.5 0.5 0.5 0.5\n")  # a tie: the first stays
    assert phrase_table_dictionary(path) == {"cat": "chatte", "dog": "chien"}
    assert phrase_table_dictionary(path, score_index=0) == {"cat": "chatte", "dog": "chien"}
    path.write_text("cat ||| chat ||| 0.1 0.2\n")
    with pytest.raises(FormatError, match="phrase-table:1: expected at least 3 scores"):
        phrase_table_dictionary(path)


def test_a_built_nbest_entry_is_a_moses_line_that_reads_back(tmp_path: Path) -> None:
    entries = [NBestEntry.build(0, ["un", "chat"], [("RNNsearch0", [-1.23456789])], -1.23456789),
               NBestEntry.build(0, [], [("RNNsearch0", [-0.5])], -0.5),
               NBestEntry.build(1, ["x"], [("RNNsearch0", [-10.0])], -10.0)]
    assert entries[0].line() == "0 ||| un chat ||| RNNsearch0= -1.23457 ||| -1.23457"
    path = tmp_path / "out.nbest"
    path.write_text("".join(e.line() + "\n" for e in entries))
    back = list(read_nbest(path))
    assert [e.hypothesis for e in back] == ["un chat", "", "x"]
    assert [e.dense for e in back] == [(-1.23457,), (-0.5,), (-10.0,)]
    assert [e.total for e in back] == [-1.23457, -0.5, -10.0]


def test_attention_record() -> None:
    record = attention_record(3, ["a", "b", "c"], ["x", "y", "z"], ATTENTION / 3 * 3)
    assert record["id"] == 3 and record["source"] == ["a", "b", "c", "</s>"] and record["target"][-1] == "</s>"
    assert record["attention"][0] == [0.1, 0.7, 0.1, 0.1]


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
