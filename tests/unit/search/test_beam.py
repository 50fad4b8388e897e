"""Beam search: its pieces against references, and its invariants on tiny models of every decoder style."""

from __future__ import annotations

import itertools
import math
from typing import Any

import numpy as np
import pytest
import torch
from tiny_models import all_models, taught_model, teach, tiny_config, tiny_model

from rerank.models.batching import pad
from rerank.models.seq2seq import Seq2Seq
from rerank.models.vocab import BOS_ID, EOS_ID, PAD_ID, UNK_ID
from rerank.search.beam import (
    FeatureWeights,
    Finished,
    Hypothesis,
    LengthPenalty,
    SearchConfig,
    beam_search,
    live_candidates,
    restrict,
    top_candidates,
)

SOURCES = [[5, 6, 7, 8, 9, 10, 11, EOS_ID], [12, EOS_ID], [13, 14, 15, 16, EOS_ID], [EOS_ID],
           [17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, EOS_ID], [7, 7, 7, EOS_ID]]
MODELS = all_models()



@pytest.fixture(scope="module", params=MODELS, ids=[name for name, _ in MODELS])
def model(request: pytest.FixtureRequest) -> Seq2Seq:
    return taught_model(request.param[1])


def search(model: Seq2Seq, sources: list[list[int]], **options: Any) -> list[list[Hypothesis]]:
    src, src_len = pad(sources)
    return beam_search(model, src, src_len, SearchConfig(**options))


def forced_scores(model: Seq2Seq, source: list[int], targets: list[list[int]]) -> torch.Tensor:
    """ln p of each target (words, then </s> is added) by forced decoding."""
    src, src_len = pad([source] * len(targets))
    trg, _ = pad([t + [EOS_ID] for t in targets])
    with torch.inference_mode():
        return model.score(model.encode(src, src_len), trg)


def every_hypothesis(max_words: int) -> list[list[int]]:
    """Every target of at most ``max_words`` words <unk>, a and b (ids 1, 4, 5 of a 6-word vocabulary)."""
    return [list(t) for n in range(max_words + 1) for t in itertools.product([UNK_ID, 4, 5], repeat=n)]


def greedy(model: Seq2Seq, source: list[int], max_ratio: float = 2.0) -> list[int]:
    """The most probable word at every step, one sentence, a plain loop: the reference for beam 1."""
    src, src_len = pad([source])
    max_words = math.ceil(max_ratio * (len(source) - 1))
    tokens: list[int] = []
    with torch.inference_mode():
        state, prev = model.encode(src, src_len), torch.tensor([BOS_ID])
        while len(tokens) < max_words:
            log_probs, state = model.step(prev, state)
            log_probs[0, [PAD_ID, BOS_ID]] = -math.inf
            prev = log_probs.argmax(-1)
            if int(prev) == EOS_ID:
                break
            tokens.append(int(prev))
    return tokens


# --- pieces ---

@pytest.mark.parametrize("kind, alpha, length, expected", [
    ("none", 0.6, 10, 1.0),
    ("average", 0.6, 10, 10.0),
    ("wu", 0.6, 1, 1.0),
    ("wu", 0.6, 10, 2.5 ** 0.6),  # ((5 + 10) / 6)^0.6 = 1.7329...
    ("wu", 0.0, 10, 1.0),
    ("wu", 1.0, 7, 2.0),
])
def test_length_penalty(kind: str, alpha: float, length: int, expected: float) -> None:
    penalty = LengthPenalty(kind, alpha)
    assert float(penalty(torch.tensor(float(length)))) == pytest.approx(expected)
    assert float(penalty.normalise(torch.tensor(-6.0), length)) == pytest.approx(-6.0 / expected)


def test_length_penalty_and_search_config_refuse_bad_values() -> None:
    with pytest.raises(ValueError, match="none, average or wu"):
        LengthPenalty("log")
    with pytest.raises(ValueError, match="alpha"):
        LengthPenalty("wu", -1.0)
    with pytest.raises(ValueError, match="n-best size"):
        SearchConfig(beam_size=5, nbest=6)
    with pytest.raises(ValueError, match="beam size"):
        SearchConfig(beam_size=0)
    with pytest.raises(ValueError, match="max_ratio"):
        SearchConfig(max_ratio=0)


def test_restrict_forbids_specials_and_forces_eos_at_max() -> None:
    log_probs = torch.log_softmax(torch.randn(3, 7, generator=torch.Generator().manual_seed(1)), -1)
    restricted = restrict(log_probs.clone(), at_max=torch.tensor([False, True, False]))
    allowed = [UNK_ID, EOS_ID, 4, 5, 6]
    for row in (0, 2):
        assert torch.equal(restricted[row, allowed], log_probs[row, allowed])
        assert restricted[row, PAD_ID] == restricted[row, BOS_ID] == -math.inf
    assert restricted[1, EOS_ID] == log_probs[1, EOS_ID]
    assert torch.isinf(restricted[1, [i for i in range(7) if i != EOS_ID]]).all()


@pytest.mark.parametrize("width, vocab, k", [(3, 11, 6), (1, 11, 6), (4, 2, 3), (1, 3, 5)])
def test_top_candidates_matches_a_sort_of_all_extensions(width: int, vocab: int, k: int) -> None:
    generator = torch.Generator().manual_seed(2)
    scores = torch.randn(4, width, generator=generator, dtype=torch.float64)
    log_probs = torch.randn(4, width, vocab, generator=generator, dtype=torch.float64)
    values, beams, tokens = top_candidates(scores, log_probs, k)
    every = (scores[:, :, None] + log_probs).view(4, -1).numpy()  # (B', W·V)
    order = np.argsort(-every, axis=1, kind="stable")[:, :k]
    found = min(k, width * vocab)  # the rest are impossible fillers
    np.testing.assert_array_equal(values[:, :found].numpy(), np.take_along_axis(every, order, axis=1)[:, :found])
    np.testing.assert_array_equal(beams[:, :found].numpy(), order[:, :found] // vocab)
    np.testing.assert_array_equal(tokens[:, :found].numpy(), order[:, :found] % vocab)
    assert torch.isinf(values[:, found:]).all() and (tokens[:, found:] == PAD_ID).all()


def test_live_candidates_skips_eos_and_keeps_rank_order() -> None:
    is_eos = torch.tensor([[True, False, True, False, False, False],
                           [False, False, False, True, True, True],
                           [True, True, True, False, False, False]])
    assert live_candidates(is_eos, 3).tolist() == [[1, 3, 4], [0, 1, 2], [3, 4, 5]]


def test_finished_keeps_the_n_best_of_each_sentence() -> None:
    inf = math.inf
    finished = Finished.empty(sentences=3, nbest=2, dtype=torch.float64, device=torch.device("cpu"))
    ones = torch.ones(2, 2, 4, dtype=torch.float64)
    # step 1: sentences 0 and 2 get candidates; -inf is no candidate
    finished.add(torch.tensor([0, 2]), torch.tensor([[-2.0, -inf], [-1.0, -3.0]], dtype=torch.float64),
                 torch.tensor([[-4.0, 0.0], [-2.0, -6.0]], dtype=torch.float64), 1, torch.tensor([[5, 6], [7, 8]]),
                 torch.tensor([[-0.5, 0.0], [-0.1, -0.2]], dtype=torch.float64), ones)
    assert finished.normalised.tolist() == [[-2.0, -inf], [-inf, -inf], [-1.0, -3.0]]
    assert finished.worst(torch.tensor([0, 2])).tolist() == [-inf, -3.0]
    # step 3: a better and a worse one for sentence 2, one for sentence 0
    finished.add(torch.tensor([0, 2]), torch.tensor([[-inf, -inf], [-0.5, -9.0]], dtype=torch.float64),
                 torch.tensor([[0.0, 0.0], [-2.0, -36.0]], dtype=torch.float64), 3, torch.tensor([[1, 2], [3, 4]]),
                 torch.tensor([[0.0, 0.0], [-0.3, -0.4]], dtype=torch.float64), 2 * ones)
    assert finished.normalised.tolist() == [[-2.0, -inf], [-inf, -inf], [-0.5, -1.0]]
    assert finished.scores[2].tolist() == [-2.0, -2.0]
    assert finished.steps[2].tolist() == [3, 1]
    assert finished.rows[2].tolist() == [3, 7]
    assert finished.eos_scores[2].tolist() == [-0.3, -0.1]
    assert finished.eos_attention[2, :, 0].tolist() == [2.0, 1.0]
    assert finished.steps[0].tolist()[0] == 1 and finished.rows[0].tolist()[0] == 5


# --- invariants of the whole search ---

@pytest.mark.parametrize("penalty", [LengthPenalty("none"), LengthPenalty("average"), LengthPenalty("wu", 0.6)])
def test_beam_score_is_the_forced_decoding_score(model: Seq2Seq, penalty: LengthPenalty) -> None:
    results = search(model, SOURCES, beam_size=5, nbest=5, length_penalty=penalty)
    for source, hypotheses in zip(SOURCES, results, strict=True):
        forced = forced_scores(model, source, [h.tokens for h in hypotheses])
        for h, score in zip(hypotheses, forced.tolist(), strict=True):
            assert h.score == pytest.approx(score, abs=1e-9)
            assert sum(h.token_scores) == pytest.approx(h.score, abs=1e-9)
            assert len(h.token_scores) == len(h.tokens) + 1
            assert h.normalised == pytest.approx(h.score / float(penalty(len(h.tokens) + 1)))


def test_token_scores_are_the_forced_decoding_token_scores(model: Seq2Seq) -> None:
    from rerank.models.seq2seq import shift_right, token_log_probs

    [[best]] = search(model, SOURCES[:1], beam_size=3)
    src, src_len = pad(SOURCES[:1])
    trg = torch.tensor([best.tokens + [EOS_ID]])
    with torch.inference_mode():
        logits, attention = model.teacher_forced(model.encode(src, src_len), shift_right(trg))
    np.testing.assert_allclose(best.token_scores, token_log_probs(logits, trg)[0].numpy(), atol=1e-9)
    if attention is None:
        assert best.attention is None
    else:
        np.testing.assert_allclose(best.attention.numpy(), attention[0].numpy(), atol=1e-9)


def test_batched_equals_one_by_one(model: Seq2Seq) -> None:
    batched = search(model, SOURCES, beam_size=4, nbest=3, length_penalty=LengthPenalty("average"))
    for source, together in zip(SOURCES, batched, strict=True):
        [alone] = search(model, [source], beam_size=4, nbest=3, length_penalty=LengthPenalty("average"))
        assert [h.tokens for h in together] == [h.tokens for h in alone]
        np.testing.assert_allclose([h.score for h in together], [h.score for h in alone], atol=1e-9)


def test_beam_of_one_is_greedy(model: Seq2Seq) -> None:
    results = search(model, SOURCES, beam_size=1)
    assert [[h.tokens for h in r] for r in results] == [[greedy(model, s)] for s in SOURCES]


def test_nbest_lists_are_distinct_sorted_and_within_the_length_limit(model: Seq2Seq) -> None:
    results = search(model, SOURCES, beam_size=6, nbest=4, length_penalty=LengthPenalty("wu"), max_ratio=1.5)
    for source, hypotheses in zip(SOURCES, results, strict=True):
        words = len(source) - 1
        assert len(hypotheses) == (1 if words == 0 else 4)  # an empty source has only the empty translation
        assert len({tuple(h.tokens) for h in hypotheses}) == len(hypotheses)
        assert [h.normalised for h in hypotheses] == sorted((h.normalised for h in hypotheses), reverse=True)
        assert all(len(h.tokens) <= math.ceil(1.5 * words) for h in hypotheses)
        assert all(t not in (PAD_ID, BOS_ID, EOS_ID) for h in hypotheses for t in h.tokens)


def test_stopping_once_the_nbest_list_is_final_loses_nothing(model: Seq2Seq) -> None:
    """Without a length penalty a sentence stops when nothing live can enter its n-best list: a
    search that keeps going to fill a longer list finds the same first N."""
    for nbest in (1, 2):
        early = search(model, SOURCES, beam_size=5, nbest=nbest)
        late = search(model, SOURCES, beam_size=5, nbest=5)
        assert [[h.tokens for h in r] for r in early] == [[h.tokens for h in r[:nbest]] for r in late]


def test_attention_of_hypotheses_covers_the_source_and_sums_to_one(model: Seq2Seq) -> None:
    for source, hypotheses in zip(SOURCES, search(model, SOURCES, beam_size=3, nbest=3), strict=True):
        for h in hypotheses:
            if h.attention is None:
                assert model.config.architecture == "encdec"
                continue
            assert h.attention.shape == (len(h.tokens) + 1, len(source))
            np.testing.assert_allclose(h.attention.sum(-1).numpy(), 1.0, atol=1e-9)


@pytest.mark.parametrize("penalty", [LengthPenalty("none"), LengthPenalty("average"), LengthPenalty("wu", 1.0)])
def test_a_wide_beam_finds_every_hypothesis_in_order(penalty: LengthPenalty) -> None:
    """Target words <unk>, a, b and at most 2 of them: 13 hypotheses, all finished by a beam of 13."""
    model = tiny_model(tiny_config(), trg_vocab=6, biases={})
    source = [5, EOS_ID]
    everything = every_hypothesis(2)
    scores = forced_scores(model, source, everything).tolist()
    ranked = sorted(zip(everything, scores, strict=True), key=lambda x: -float(penalty.normalise(
        torch.tensor(x[1]), len(x[0]) + 1)))
    [hypotheses] = search(model, [source], beam_size=13, nbest=13, length_penalty=penalty)
    assert [h.tokens for h in hypotheses] == [t for t, _ in ranked]
    np.testing.assert_allclose([h.score for h in hypotheses], [s for _, s in ranked], atol=1e-9)


def test_search_refuses_a_model_in_training_mode() -> None:
    model = tiny_model(tiny_config()).train()
    with pytest.raises(ValueError, match="evaluation mode"):
        search(model, SOURCES[:1], beam_size=2)


def test_float32_scores_agree_with_forced_decoding() -> None:
    model = tiny_model(tiny_config(), dtype=torch.float32)
    for source, hypotheses in zip(SOURCES, search(model, SOURCES, beam_size=5, nbest=5), strict=True):
        forced = forced_scores(model, source, [h.tokens for h in hypotheses])
        np.testing.assert_allclose([h.score for h in hypotheses], forced.numpy(), atol=1e-5)


# --- feature weights: w_model · Σ ln p + w_wp · WP, WP = −(words) ---

def weighted_order(model: Seq2Seq, source: list[int], weights: FeatureWeights,
                   max_words: int) -> list[tuple[list[int], float]]:
    """Every hypothesis of at most ``max_words`` words with its forced score, best first by the
    weighted score: the reference for a beam that keeps everything."""
    everything = every_hypothesis(max_words)
    scores = forced_scores(model, source, everything).tolist()
    return sorted(zip(everything, scores, strict=True), key=lambda x: -weights.total(x[1], len(x[0])))


def test_feature_weights_gains_total_and_bound() -> None:
    inf = math.inf
    log_probs = torch.tensor([[-inf, -1.0, -2.0, -3.0], [-0.5, -inf, -inf, -4.0]], dtype=torch.float64)
    assert EOS_ID == 3
    weights = FeatureWeights(model=0.5, word_penalty=-2.0)  # a bonus of 2 per word, none for </s>
    assert weights.gains(log_probs).tolist() == [[-inf, 1.5, 1.0, -1.5], [1.75, -inf, -inf, -2.0]]
    assert FeatureWeights(-1.0, 0.0).gains(log_probs)[1].tolist() == [0.5, -inf, -inf, 4.0]  # -inf stays -inf
    assert weights.total(-6.0, 3) == -3.0 + 6.0
    scores, remaining = torch.tensor([-1.0, -inf, -2.0], dtype=torch.float64), torch.tensor([3, 2, 0])
    assert weights.bound(scores, remaining).tolist() == [5.0, -inf, -2.0]  # up to 2 per word still to come
    assert FeatureWeights(1.0, 2.0).bound(scores, remaining).tolist() == [-1.0, -inf, -2.0]  # a penalty never gains
    assert FeatureWeights(-1.0, 0.0).bound(scores, remaining).tolist() == [inf, -inf, inf]  # no bound


def test_feature_weights_refuse_a_zero_model_weight_and_a_length_penalty() -> None:
    with pytest.raises(ValueError, match="must not be 0"):
        FeatureWeights(model=0.0, word_penalty=1.0)
    with pytest.raises(ValueError, match="finite"):
        FeatureWeights(word_penalty=math.nan)
    with pytest.raises(ValueError, match="do not combine"):
        SearchConfig(length_penalty=LengthPenalty("average"), weights=FeatureWeights())


def test_weights_one_and_zero_are_the_unweighted_search(model: Seq2Seq) -> None:
    plain = search(model, SOURCES, beam_size=5, nbest=3)
    weighted = search(model, SOURCES, beam_size=5, nbest=3, weights=FeatureWeights(model=1.0, word_penalty=0.0))
    for a, b in zip(plain, weighted, strict=True):
        assert [(h.tokens, h.score, h.normalised, h.token_scores) for h in a] == \
               [(h.tokens, h.score, h.normalised, h.token_scores) for h in b]


@pytest.mark.parametrize("weights", [FeatureWeights(1.0, -1.5), FeatureWeights(0.4, 0.8), FeatureWeights(2.0, -0.3)],
                         ids=lambda w: f"model{w.model}-wp{w.word_penalty}")
def test_weighted_score_is_the_forced_decoding_score_and_ranks_by_the_total(model: Seq2Seq,
                                                                            weights: FeatureWeights) -> None:
    results = search(model, SOURCES, beam_size=5, nbest=5, weights=weights)
    for source, hypotheses in zip(SOURCES, results, strict=True):
        forced = forced_scores(model, source, [h.tokens for h in hypotheses])
        for h, score in zip(hypotheses, forced.tolist(), strict=True):
            assert h.score == pytest.approx(score, abs=1e-9)
            assert h.normalised == pytest.approx(weights.total(h.score, len(h.tokens)), abs=1e-9)
        assert [h.normalised for h in hypotheses] == sorted((h.normalised for h in hypotheses), reverse=True)


def test_weighted_batched_equals_one_by_one(model: Seq2Seq) -> None:
    weights = FeatureWeights(1.0, -1.0)  # a bonus: sentences stop at different steps
    batched = search(model, SOURCES, beam_size=4, nbest=3, weights=weights)
    for source, together in zip(SOURCES, batched, strict=True):
        [alone] = search(model, [source], beam_size=4, nbest=3, weights=weights)
        assert [h.tokens for h in together] == [h.tokens for h in alone]
        np.testing.assert_allclose([h.score for h in together], [h.score for h in alone], atol=1e-9)


@pytest.mark.parametrize("weights", [FeatureWeights(1.0, -3.0), FeatureWeights(1.0, -0.5), FeatureWeights(1.0, 0.0),
                                     FeatureWeights(0.5, 0.7), FeatureWeights(1.0, 3.0), FeatureWeights(-1.0, 0.5)],
                         ids=lambda w: f"model{w.model}-wp{w.word_penalty}")
def test_a_wide_weighted_beam_finds_every_hypothesis_in_order(weights: FeatureWeights) -> None:
    """Target words <unk>, a, b and at most 3 of them: a beam of 40 keeps all 40 hypotheses, so the
    search is exhaustive but for its early stop, which the 1-best search (N = 1) relies on most."""
    model = tiny_model(tiny_config(), trg_vocab=6)
    source = [5, 6, EOS_ID]  # 2 words: at most 3 with max_ratio 1.5
    ranked = weighted_order(model, source, weights, max_words=3)
    [hypotheses] = search(model, [source], beam_size=40, nbest=40, max_ratio=1.5, weights=weights)
    assert [h.tokens for h in hypotheses] == [t for t, _ in ranked]
    np.testing.assert_allclose([h.score for h in hypotheses], [s for _, s in ranked], atol=1e-9)
    [[best]] = search(model, [source], beam_size=40, nbest=1, max_ratio=1.5, weights=weights)
    assert best.tokens == ranked[0][0]


def test_a_bonus_per_word_lets_a_live_hypothesis_overtake_a_finished_one() -> None:
    """Taught that [5, 6] means nothing 3 times in 5 and ``a a a`` otherwise, a model ranks the empty
    translation first by ln p. A bonus of 0.1 per word makes ``a a a`` the best, though its first
    word alone scores below the finished empty translation: the search must not stop there."""
    pairs = ([[5, 6]] * 5, [[], [], [], [4, 4, 4], [4, 4, 4]])
    model = teach(tiny_model(tiny_config(), trg_vocab=6, dtype=torch.float32, biases={}), [pairs] * 60)
    source, weights = [5, 6, EOS_ID], FeatureWeights(1.0, -0.1)
    [[empty]] = search(model, [source], beam_size=40, max_ratio=1.5)
    [[best]] = search(model, [source], beam_size=40, max_ratio=1.5, weights=weights)
    assert empty.tokens == [] and best.tokens == [4, 4, 4] == weighted_order(model, source, weights, 3)[0][0]
    assert best.token_scores[0] + 0.1 < empty.score  # the live a, after step 0


def test_the_word_penalty_weight_moves_the_output_length(model: Seq2Seq) -> None:
    """A negative weight of WP = −words is a bonus per word: longer outputs; a positive one, shorter."""
    def words(word_penalty: float) -> list[int]:
        results = search(model, SOURCES, beam_size=5, weights=FeatureWeights(1.0, word_penalty))
        return [len(best.tokens) for [best] in results]

    bonus, neutral, penalty = words(-3.0), words(0.0), words(3.0)
    assert all(a >= b >= c for a, b, c in zip(bonus, neutral, penalty, strict=True))
    assert sum(bonus) > sum(neutral) > sum(penalty)
