"""Subword vocabularies: pieces learnt with the specials at ids 0-3, any Moses tokens encoded and spelt back
exactly (unseen characters as bytes), each piece mapped to its token, and files that are not such a model
refused."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from rerank.errors import RerankError
from rerank.models.config import SubwordConfig
from rerank.models.subwords import WORD_START, SubwordVocabulary, reservoir_sample, train_subwords
from rerank.models.vocab import EOS_ID, PAD_ID, SPECIALS, Vocabulary


@pytest.fixture(scope="module")
def model(multi30k_slice: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("subwords") / "subwords.fr.model"
    sample = multi30k_slice["reference"].read_text(encoding="utf-8").splitlines()
    train_subwords(sample, SubwordConfig(vocab_size=300), path, "train.fr")
    return path


def test_tokens_are_spelt_back_exactly_and_each_piece_has_its_token(model: Path) -> None:
    vocab = SubwordVocabulary.from_file(model)
    assert tuple(vocab.tokens[:4]) == SPECIALS and len(vocab) >= 300
    tokens = "un chien noir court dans l&apos; herbe , ŋ€ !".split()  # ŋ and € are in no training sentence
    ids = vocab.encode(tokens)
    assert len(ids) > len(tokens) and all(isinstance(i, int) for i in ids)
    assert vocab.words([*ids, EOS_ID, ids[0]]) == tokens and vocab.words([PAD_ID, *ids]) == tokens
    positions = vocab.word_of_piece(ids)
    assert positions[0] == 0 and positions[-1] == len(tokens) - 1 and (np.diff(positions) >= 0).all()
    starts = [vocab.tokens[i].startswith(WORD_START) for i in ids]
    assert np.diff(positions, prepend=-1).astype(bool).tolist() == [True, *starts[1:]]
    assert "ŋ€" in vocab and vocab.encode_lines([" ".join(tokens)]) == [ids]


def test_the_same_seed_resamples_the_same_pieces(model: Path) -> None:
    vocab = SubwordVocabulary.from_file(model)
    rows = [vocab.encode("une femme marche dans la rue".split())]
    first, again = vocab.resample(rows, 0.3, seed=5), vocab.resample(rows, 0.3, seed=5)
    assert first == again and vocab.words(first[0]) == vocab.words(rows[0])


def test_a_model_saved_loads_matching_its_vocabulary_and_other_files_are_refused(model: Path, tmp_path: Path) -> None:
    vocab = SubwordVocabulary.from_file(model)
    vocab.save_model(tmp_path / "copy.model")
    vocab.save(tmp_path / "vocab.txt")
    assert SubwordVocabulary.load_matching(tmp_path / "vocab.txt", tmp_path / "copy.model").digest == vocab.digest
    Vocabulary([*SPECIALS, "le"]).save(tmp_path / "words.txt")
    with pytest.raises(RerankError, match=r"copy.model: refused: its pieces are not those of .*words.txt"):
        SubwordVocabulary.load_matching(tmp_path / "words.txt", tmp_path / "copy.model")
    (tmp_path / "cut.model").write_bytes(model.read_bytes()[:100])
    with pytest.raises(RerankError, match=r"cut.model: refused: expected a sentencepiece model"):
        SubwordVocabulary.from_file(tmp_path / "cut.model")
    with pytest.raises(RerankError, match=r"missing.model: cannot read"):
        SubwordVocabulary.from_file(tmp_path / "missing.model")
    with pytest.raises(RerankError, match="^train.fr: no text to learn subword units from"):
        train_subwords(["", ""], SubwordConfig(vocab_size=300), tmp_path / "empty.model", "train.fr")


def test_a_reservoir_sample_keeps_all_of_a_short_text_and_draws_from_a_long_one() -> None:
    assert reservoir_sample(range(5), 10, np.random.default_rng(0)) == [0, 1, 2, 3, 4]
    drawn = reservoir_sample(range(1000), 10, np.random.default_rng(0))
    assert len(set(drawn)) == 10 and max(drawn) > 100
    assert drawn == reservoir_sample(range(1000), 10, np.random.default_rng(0))
