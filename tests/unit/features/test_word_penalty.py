"""The word penalty, as Moses' WordPenalty0, and the count of unknown words, by a vocabulary or a corpus's
shortlist."""


from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from helpers import hypothesis_pairs

from rerank.errors import ConfigError
from rerank.features.registry import build_feature
from rerank.features.word_penalty import WORD_START, UnknownWordCount, WordPenalty
from rerank.formats.nbest import read_nbest


def test_word_penalty_as_moses(test_data: Path) -> None:
    feature = build_feature({"kind": "word-penalty"})
    entries = list(read_nbest(test_data / "toy.nbest"))
    values = feature.score([((), e.tokens) for e in entries])
    assert feature.name == "WP1" and values.shape == (len(entries), 1)
    assert values[:, 0].tolist() == [e.dense[2] for e in entries]  # WordPenalty0
    assert feature.score([]).shape == (0, 1)


def test_unk_penalty_from_vocab_and_corpus(tmp_path: Path) -> None:
    (tmp_path / "vocab").write_text("le 10\nchat 3\n\nnoir\n")
    (tmp_path / "corpus").write_text("le chat le chien\nle chat\n")
    hyps = hypothesis_pairs(["le chat noir", "le chien blanc", ""])
    from_vocab = build_feature({"kind": "unk-penalty", "vocab": str(tmp_path / "vocab")})
    assert from_vocab.score(hyps)[:, 0].tolist() == [0, 2, 0]
    from_corpus = build_feature({"kind": "unk-penalty", "corpus": str(tmp_path / "corpus"), "shortlist": 2,
                                 "name": "UNK2"})
    assert from_corpus.words == {"le", "chat"}
    assert from_corpus.score(hyps)[:, 0].tolist() == [1, 2, 0]


PAIRS = [(("a", "dog"), ["un", "chien", "court", "."]), ((), []), (("x",), ["zèbre", "un", "zèbre"])]


def test_word_penalty_is_minus_the_words_as_moses_word_penalty0(test_data: Path) -> None:
    feature = WordPenalty(WordPenalty.Config())
    assert (feature.name, feature.dims, feature.needs_source) == ("WP1", 1, False)
    assert WordPenalty.label(WordPenalty.Config(name="WP2")) == "WP2"
    values = feature.score(PAIRS)
    assert values.shape == (3, 1) and values.dtype == np.float64
    np.testing.assert_array_equal(values[:, 0], [-4, 0, -3])
    entries = list(read_nbest(test_data / "toy.nbest"))
    moses = [entry.dense[entry.layout.offsets()["WordPenalty0"]][0] for entry in entries]
    np.testing.assert_array_equal(feature.score([((), e.tokens) for e in entries])[:, 0], moses)


def test_word_penalty_of_no_pairs_is_an_empty_column() -> None:
    assert WordPenalty(WordPenalty.Config()).score([]).shape == (0, 1)


def test_unknown_words_against_a_vocabulary_file(tmp_path: Path) -> None:
    vocab = tmp_path / "vocab.trg.txt"
    vocab.write_text("un 120\nchien 7\n\n.\t30\n", encoding="utf-8")  # first column; a blank line is skipped
    feature = UnknownWordCount(UnknownWordCount.Config(vocab=str(vocab)))
    assert feature.words == {"un", "chien", "."}
    assert (feature.name, feature.dims, feature.needs_source) == ("UNK1", 1, False)
    np.testing.assert_array_equal(feature.score(PAIRS)[:, 0], [1, 0, 2])  # court; zèbre twice


def test_the_shortlist_of_a_corpus_is_its_most_frequent_words(tmp_path: Path) -> None:
    corpus = tmp_path / "train.fr"
    corpus.write_text("un chien court .\nun chien .\nun zèbre .\n", encoding="utf-8")  # un 3, . 3, chien 2, ...
    three = UnknownWordCount(UnknownWordCount.Config(corpus=str(corpus), shortlist=3, name="UNK2"))
    assert three.words == {"un", ".", "chien"} and three.name == "UNK2"
    np.testing.assert_array_equal(three.score(PAIRS)[:, 0], [1, 0, 2])
    every = UnknownWordCount(UnknownWordCount.Config(corpus=str(corpus)))
    np.testing.assert_array_equal(every.score(PAIRS)[:, 0], [0, 0, 0])


@pytest.mark.parametrize("settings,message", [
    ({}, "give exactly one of 'vocab' (a word list) or 'corpus' (text to count words in)"),
    ({"vocab": "v", "corpus": "c"}, "give exactly one of 'vocab'"),
    ({"corpus": "c", "shortlist": 0}, "shortlist must be positive, got 0"),
])
def test_the_config_needs_one_word_source_and_a_positive_shortlist(settings: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError) as error:
        UnknownWordCount.Config(**settings)  # type: ignore[arg-type]
    assert str(error.value).startswith(message)


def test_an_empty_vocabulary_is_refused(tmp_path: Path) -> None:
    empty = tmp_path / "empty.txt"
    empty.write_text("\n\n", encoding="utf-8")
    with pytest.raises(ConfigError) as error:
        UnknownWordCount(UnknownWordCount.Config(vocab=str(empty), name="UNK3"))
    assert str(error.value) == f"{empty}: empty vocabulary for feature UNK3"


def test_a_subword_vocabulary_is_refused(tmp_path: Path) -> None:
    pieces = tmp_path / "subwords.vocab"
    pieces.write_text(f"{WORD_START}un -1\n{WORD_START}chien -2\n{WORD_START}court -3\ns -4\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=rf"^{pieces}: feature UNK1: expected words, got the pieces of a subword "
                                          r"model \(▁\.\.\.\), against which every word is known: give corpus:"):
        UnknownWordCount(UnknownWordCount.Config(vocab=str(pieces)))
    pieces.write_text(f"{WORD_START}un -1\n{WORD_START}chien -2\ns -3\nt -4\n", encoding="utf-8")  # half: words
    assert len(UnknownWordCount(UnknownWordCount.Config(vocab=str(pieces))).words) == 4
