"""Word dictionaries for UNK replacement: a file of word pairs, or the most probable one-word translations of a
phrase table."""

from __future__ import annotations

from pathlib import Path

import pytest

from rerank.errors import FormatError
from rerank.formats.dictionaries import phrase_table_dictionary, read_dictionary


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
