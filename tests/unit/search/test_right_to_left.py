"""The combined score of left-to-right and right-to-left models, and the n-best lists reranked by it with the
right-to-left models' real scores."""

from __future__ import annotations

import dataclasses
import math

import pytest
import torch
from tiny_models import id_vocabulary, save_model_dir, taught_model, tiny_config, tiny_model

from rerank.features.nmt import NeuralTranslationModel
from rerank.models.vocab import Vocabulary
from rerank.search.beam import Hypothesis, LengthPenalty, SearchConfig
from rerank.search.right_to_left import RightToLeft, combined_score, rerank_both_ways
from rerank.search.translate import translate


@pytest.mark.parametrize(("kind", "lp"), [("none", 1.0), ("average", 4.0), ("wu", (9 / 6) ** 0.6)])
def test_the_combined_score_weighs_both_directions_under_the_length_penalty(kind: str, lp: float) -> None:
    penalty = LengthPenalty(kind)  # type: ignore[arg-type]
    assert combined_score(-2.0, -6.0, 4, 0.25, penalty) == pytest.approx((0.75 * -2.0 + 0.25 * -6.0) / lp)
    assert combined_score(-2.0, -6.0, 4, 0.0, penalty) == pytest.approx(-2.0 / lp)
    assert combined_score(-2.0, -6.0, 4, 1.0, penalty) == pytest.approx(-6.0 / lp)


@pytest.mark.parametrize("weight", [-0.1, 1.1, math.nan])
def test_a_weight_outside_0_to_1_is_refused(right_to_left: NeuralTranslationModel, weight: float) -> None:
    with pytest.raises(ValueError, match="between 0 and 1"):
        RightToLeft(right_to_left, "R2L0", weight)


@pytest.fixture(scope="module")
def right_to_left(tmp_path_factory: pytest.TempPathFactory) -> NeuralTranslationModel:
    vocab = id_vocabulary()
    model = tiny_model(dataclasses.replace(tiny_config(), reverse_target=True), len(vocab), 25, seed=4,
                       dtype=torch.float32)
    directory = save_model_dir(tmp_path_factory.mktemp("r2l"), model, vocab, Vocabulary(vocab.tokens[:25]))
    return NeuralTranslationModel(NeuralTranslationModel.Config(model=str(directory)))


def test_each_nbest_list_is_ordered_by_the_combined_score(right_to_left: NeuralTranslationModel) -> None:
    vocab, trg = id_vocabulary(), Vocabulary(id_vocabulary().tokens[:25])
    model = taught_model(tiny_config())
    sources = [["w5", "w9", "w7"], ["w12", "w4"], ["w20", "w21", "w6", "w8"]]
    config = SearchConfig(beam_size=4, nbest=4, length_penalty=LengthPenalty("average"))
    nbests = list(translate(model, vocab, sources, config))
    words = [[trg.words(h.tokens) for h in hypotheses] for hypotheses in nbests]
    both = RightToLeft(right_to_left, "R2L0", 0.6)
    reranked = rerank_both_ways(sources, nbests, words, both, config.length_penalty)
    for source, hypotheses, spelled, sentence in zip(sources, nbests, words, reranked, strict=True):
        r2l = right_to_left.score([(source, w) for w in spelled])[:, 0]
        expected = sorted(((0.4 * h.score + 0.6 * r) / (len(h.tokens) + 1), i)
                          for i, (h, r) in enumerate(zip(hypotheses, r2l, strict=True)))[::-1]
        assert [r.total for r in sentence] == pytest.approx([total for total, _ in expected])
        assert {tuple(r.words) for r in sentence} == {tuple(w) for w in spelled}
        assert [r.right_to_left for r in sentence] == pytest.approx(
            [float(r2l[spelled.index(r.words)]) for r in sentence])


def test_weight_zero_keeps_the_search_s_order(right_to_left: NeuralTranslationModel) -> None:
    hypotheses = [[Hypothesis([5, 6], -1.0, -1 / 3, [0.0] * 3), Hypothesis([7], -1.5, -0.75, [0.0] * 2)]]
    words = [[["w5", "w6"], ["w7"]]]
    reranked = rerank_both_ways([["w4"]], hypotheses, words, RightToLeft(right_to_left, "R2L0", 0.0),
                                LengthPenalty("average"))
    assert [r.words for r in reranked[0]] == [["w5", "w6"], ["w7"]]
    assert rerank_both_ways([], [], [], RightToLeft(right_to_left, "R2L0", 0.5), LengthPenalty()) == []
