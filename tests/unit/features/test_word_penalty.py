"""The word penalty, as Moses' WordPenalty0, and the count of unknown words, by a vocabulary or a corpus's
shortlist."""

from __future__ import annotations

from pathlib import Path

from helpers import hypothesis_pairs

from rerank.features.registry import build_feature
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
