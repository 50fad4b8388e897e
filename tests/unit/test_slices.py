"""The slices of the real data in tests/data: every one listed in tests/slices.py and its README, and,
where the real data is present, cut from it as they say."""

from __future__ import annotations

from pathlib import Path

import kenlm
from helpers import content
from slices import LM_SENTENCES, SLICES, cut

SLICE_DIRECTORIES = ("moses-regression-tests", "multi30k")


def test_every_slice_is_listed_and_described(test_data: Path) -> None:
    files = {str(path.relative_to(test_data))
             for directory in SLICE_DIRECTORIES for path in (test_data / directory).rglob("*") if path.is_file()}
    assert files == {piece.path for piece in SLICES}
    readme = (test_data / "README.md").read_text(encoding="utf-8")
    assert [piece.path for piece in SLICES if f"`{piece.path}`" not in readme] == []
    assert [piece.origin for piece in SLICES if f"`{piece.origin}`" not in readme] == []


def test_every_slice_is_cut_from_its_original(test_data: Path, shared_data: Path) -> None:
    for piece in SLICES:
        path, origin = test_data / piece.path, shared_data / piece.origin
        assert content(path) == cut(piece, shared_data), piece.path
        if piece.how == "whole":
            assert path.read_bytes() == origin.read_bytes(), piece.path


def test_language_model_slices_score_their_sentences_as_the_whole_models(test_data: Path, shared_data: Path) -> None:
    options = kenlm.Config()
    options.show_progress = False
    for piece in (piece for piece in SLICES if piece.how == "arpa"):
        whole = kenlm.Model(str(shared_data / piece.origin), options)
        sliced = kenlm.Model(str(test_data / piece.path), options)
        for sentence in LM_SENTENCES:
            assert list(sliced.full_scores(sentence)) == list(whole.full_scores(sentence)), (piece.path, sentence)
