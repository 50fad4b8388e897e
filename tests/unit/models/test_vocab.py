"""Word vocabularies: the shortlist by falling frequency, ``<unk>`` outside it, decoding to ``</s>``, and a file
that reads back the same or is refused at its line."""

from __future__ import annotations

from pathlib import Path

import pytest

from rerank.errors import FormatError
from rerank.models.vocab import EOS_ID, PAD_ID, SPECIALS, UNK_ID, Vocabulary

SENTENCES = ["the dog runs".split(), "the cat runs".split(), "a dog <unk> the".split()]


def test_the_shortlist_is_the_most_frequent_words_ties_alphabetical() -> None:
    vocab = Vocabulary.build(SENTENCES, size=3)
    assert vocab.tokens == [*SPECIALS, "the", "dog", "runs"]  # the 3, dog 2, runs 2; a and cat once
    assert Vocabulary.build(SENTENCES, size=100, min_count=2).tokens == [*SPECIALS, "the", "dog", "runs"]
    assert Vocabulary.build(SENTENCES, size=100).tokens[-2:] == ["a", "cat"]  # the specials are never words


def test_words_outside_the_shortlist_are_unk_and_decoding_stops_at_the_end() -> None:
    vocab = Vocabulary.build(SENTENCES, size=3)
    ids = vocab.encode("the cat runs".split())
    assert ids == [vocab.ids["the"], UNK_ID, vocab.ids["runs"]] and "cat" not in vocab
    assert vocab.decode([PAD_ID, *ids, EOS_ID, vocab.ids["dog"]]) == ["the", "<unk>", "runs"]
    assert vocab.words(ids) == vocab.decode(ids)
    assert vocab.word_of_piece(ids).tolist() == [0, 1, 2]


def test_a_vocabulary_starts_with_the_specials_and_lists_each_token_once() -> None:
    with pytest.raises(ValueError, match="starts with"):
        Vocabulary(["the", *SPECIALS])
    with pytest.raises(ValueError, match="every token once"):
        Vocabulary([*SPECIALS, "the", "the"])


def test_a_saved_vocabulary_loads_the_same(tmp_path: Path) -> None:
    vocab = Vocabulary.build(SENTENCES, size=100)
    vocab.save(tmp_path / "vocab.txt")
    assert (tmp_path / "vocab.txt").read_text(encoding="utf-8") == "\n".join(vocab.tokens) + "\n"
    assert Vocabulary.load(tmp_path / "vocab.txt").tokens == vocab.tokens


@pytest.mark.parametrize(("text", "message"), [
    ("<s>\n<pad>\n<unk>\n</s>\n", r"vocab.txt:1: expected a vocabulary starting with <pad> <unk> <s> </s>"),
    ("<pad>\n<unk>\n<s>\n</s>\nthe dog\n", r"vocab.txt:5: expected one token \(no spaces\) per line"),
    ("<pad>\n<unk>\n<s>\n</s>\n\n", r"vocab.txt:5: expected one token"),
    ("<pad>\n<unk>\n<s>\n</s>\nthe\nthe\n", r"vocab.txt: expected every token once"),
])
def test_a_bad_vocabulary_file_is_refused_at_its_line(tmp_path: Path, text: str, message: str) -> None:
    (tmp_path / "vocab.txt").write_text(text, encoding="utf-8")
    with pytest.raises(FormatError, match=message):
        Vocabulary.load(tmp_path / "vocab.txt")
