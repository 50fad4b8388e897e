"""An ensemble searches with the mean of its members' log-probabilities: of one model, it is the model; its
search scores are the mean of the members' forced-decoding scores; models that cannot be one are refused."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from tiny_models import id_vocabulary, save_model_dir, search_ids, taught_model, tiny_config, tiny_model

from rerank.errors import RerankError
from rerank.models.checkpoint import load_model
from rerank.models.ensemble import Ensemble, ensemble
from rerank.scoring.pairs import Scorer

SOURCES = [[4, 5, 6], [7, 8], [9, 10, 11, 12, 13]]


def test_searching_with_an_ensemble_of_one_model_is_searching_with_the_model() -> None:
    model = taught_model(tiny_config("rnnsearch"), updates=30)
    alone, as_ensemble = search_ids(model, SOURCES), search_ids(Ensemble([model]).eval(), SOURCES)
    assert [[tokens for tokens, _ in s] for s in alone] == [[tokens for tokens, _ in s] for s in as_ensemble]
    np.testing.assert_allclose([score for s in alone for _, score in s],
                               [score for s in as_ensemble for _, score in s], rtol=1e-10)


def test_an_ensembles_search_scores_are_its_forced_decoding_scores() -> None:
    """Each hypothesis' score is the mean of the members' ln p of it (the ensemble feature's value)."""
    first = taught_model(tiny_config("rnnsearch"), updates=30, seed=1)
    second = taught_model(tiny_config("rnnsearch"), updates=30, seed=2)
    vocab = id_vocabulary()
    for source, hypotheses in zip(SOURCES, search_ids(Ensemble([first, second]).eval(), SOURCES), strict=True):
        pairs = [([vocab.tokens[i] for i in source], [vocab.tokens[i] for i in tokens]) for tokens, _ in hypotheses]
        means = (np.array(list(Scorer(first, vocab, vocab).score(pairs)))
                 + np.array(list(Scorer(second, vocab, vocab).score(pairs)))) / 2
        np.testing.assert_allclose([score for _, score in hypotheses], means, rtol=1e-9)


def test_an_ensemble_of_one_loaded_model_is_the_model_and_members_must_share_vocabularies(tmp_path: Path) -> None:
    vocab = id_vocabulary()
    model = tiny_model(tiny_config("rnnsearch"), len(vocab), len(vocab), dtype=torch.float32)
    first = load_model(save_model_dir(tmp_path / "a", model, vocab, vocab))
    assert ensemble([first]) is first
    both = ensemble([first, load_model(save_model_dir(tmp_path / "b", model, vocab, vocab))])
    assert isinstance(both.model, Ensemble) and len(both.model.members) == 2 and both.trg_vocab is first.trg_vocab
    other = id_vocabulary(31)
    odd = tiny_model(tiny_config("rnnsearch"), len(vocab), len(other), dtype=torch.float32)
    with pytest.raises(RerankError, match=r"odd: its target vocabulary differs from .*a's"):
        ensemble([first, load_model(save_model_dir(tmp_path / "odd", odd, vocab, other))])
