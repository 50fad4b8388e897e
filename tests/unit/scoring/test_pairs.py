"""The batched scorer: input order kept across windows and batches, each source encoded once per window,
long pairs scored whole, and every score equal to ``model.score`` of the pair alone; the prefix tries of the
targets and of the sources."""

from __future__ import annotations

import dataclasses
import itertools
import random
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest
import torch
from tiny_models import DECODERS, tiny_config, tiny_model

from rerank.errors import RerankError
from rerank.formats.tokens import Pair
from rerank.models.batching import pad, to_ids
from rerank.models.device import torch_device
from rerank.models.seq2seq import DecoderState, Seq2Seq
from rerank.models.vocab import EOS_ID, Vocabulary
from rerank.scoring.pairs import PrefixTrie, Scorer, ScoringConfig, source_tries

SRC_WORDS = [f"s{i}" for i in range(26)]  # with the 4 specials: a source vocabulary of 30
TRG_WORDS = [f"t{i}" for i in range(21)]  # a target vocabulary of 25
MODELS = [(f"{architecture}-{decoder}{'-feed' if feeding else ''}", tiny_config(architecture, decoder, feeding))
          for architecture, decoder, feeding in DECODERS]


@pytest.fixture(scope="module")
def vocabularies() -> tuple[Vocabulary, Vocabulary]:
    return Vocabulary.build([SRC_WORDS], len(SRC_WORDS)), Vocabulary.build([TRG_WORDS], len(TRG_WORDS))


@pytest.fixture(scope="module", params=MODELS, ids=[name for name, _ in MODELS])
def model(request: pytest.FixtureRequest) -> Seq2Seq:
    return tiny_model(request.param[1])


def phrase_pairs(count: int, seed: int = 1, max_words: int = 7) -> list[Pair]:
    """Phrase-table-like pairs: sources sorted, each with 1-4 targets; a few unknown words."""
    rng = random.Random(seed)
    pairs: list[Pair] = []
    while len(pairs) < count:
        source = [rng.choice(SRC_WORDS + ["unknown"]) for _ in range(rng.randint(1, max_words))]
        pairs += [(source, [rng.choice(TRG_WORDS + ["?"]) for _ in range(rng.randint(1, max_words))])
                  for _ in range(rng.randint(1, 4))]
    return pairs[:count]


def alone(model: Seq2Seq, vocabularies: tuple[Vocabulary, Vocabulary], pairs: Sequence[Pair]) -> np.ndarray:
    """``model.score`` of each pair in a batch of its own: the reference."""
    src_vocab, trg_vocab = vocabularies
    scores = []
    with torch.inference_mode():
        for source, target in pairs:
            src, src_len = pad(to_ids([source], src_vocab))
            trg, _ = pad(to_ids([target], trg_vocab))
            scores.append(float(model.score(model.encode(src, src_len), trg)))
    return np.array(scores)


class CountingScorer(Scorer):
    """A scorer that records how many sources each encoding pass receives."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.encoded: list[int] = []

    def encode(self, src_ids: Sequence[Sequence[int]]) -> tuple[DecoderState, np.ndarray, np.ndarray]:
        self.encoded.append(len(src_ids))
        return super().encode(src_ids)


@pytest.mark.parametrize("config", [ScoringConfig(), ScoringConfig(window=7, max_tokens=12),
                                    ScoringConfig(window=50, window_source_tokens=20, max_tokens=1)],
                         ids=["defaults", "small-batches", "one-pair-batches"])
def test_scores_equal_model_score_alone_in_input_order(model: Seq2Seq, vocabularies, config: ScoringConfig) -> None:
    pairs = phrase_pairs(60)
    scorer = Scorer(model, *vocabularies, config)
    np.testing.assert_allclose(list(scorer.score(pairs)), alone(model, vocabularies, pairs), rtol=0, atol=1e-10)


def test_each_distinct_source_is_encoded_once_per_window(vocabularies) -> None:
    model = tiny_model(tiny_config("rnnsearch"))
    pairs = phrase_pairs(100)
    scorer = CountingScorer(model, *vocabularies, ScoringConfig(window=40))
    list(scorer.score(pairs))
    windows = [pairs[i: i + 40] for i in range(0, len(pairs), 40)]
    assert scorer.encoded == [len({tuple(source) for source, _ in window}) for window in windows]


def test_a_window_ends_when_its_distinct_sources_reach_the_token_budget(vocabularies) -> None:
    scorer = Scorer(tiny_model(tiny_config("encdec")), *vocabularies,
                    ScoringConfig(window=100, window_source_tokens=10))
    same = [(["s1", "s2"], ["t1"])] * 30  # one source, 3 tokens with </s>: never reaches 10
    assert [len(w) for w in scorer.windows(same)] == [30]
    distinct = [([f"s{i}"] * 4, ["t1"]) for i in range(5)]  # 5 tokens each: a window per 2 sources
    assert [len(w) for w in scorer.windows(distinct)] == [2, 2, 1]


def test_long_pairs_are_scored_whole(model: Seq2Seq, vocabularies) -> None:
    rng = random.Random(3)
    long = ([rng.choice(SRC_WORDS) for _ in range(19)], [rng.choice(TRG_WORDS) for _ in range(120)])
    pairs = [*phrase_pairs(5), long, *phrase_pairs(5, seed=2)]
    scorer = Scorer(model, *vocabularies, ScoringConfig(max_tokens=16))  # the long target alone exceeds it
    scores = list(scorer.score(pairs))
    np.testing.assert_allclose(scores, alone(model, vocabularies, pairs), rtol=0, atol=1e-10)
    short_target = alone(model, vocabularies, [(long[0], long[1][:50])])[0]
    assert scores[5] < short_target  # every one of the 120 words counts


def test_a_source_longer_than_the_training_maximum_is_scored(vocabularies) -> None:
    model = tiny_model(tiny_config("rnnsearch", score="additive"))
    pairs = [(SRC_WORDS * 4, TRG_WORDS * 3), (["s1"], ["t1"])]  # 104 source words, beyond max_length 50
    scores = list(Scorer(model, *vocabularies, ScoringConfig(max_tokens=64)).score(pairs))
    np.testing.assert_allclose(scores, alone(model, vocabularies, pairs), rtol=0, atol=1e-10)


def test_empty_sources_and_targets_are_scored(model: Seq2Seq, vocabularies) -> None:
    pairs = [([], ["t1"]), (["s1"], []), ([], []), (["s1", "s2"], ["t3"])]  # an empty n-best hypothesis, say
    scores = list(Scorer(model, *vocabularies).score(pairs))
    np.testing.assert_allclose(scores, alone(model, vocabularies, pairs), rtol=0, atol=1e-10)


def test_float32_scores_match_float64_closely(vocabularies) -> None:
    config = tiny_config("rnnsearch")
    pairs = phrase_pairs(40)
    exact = list(Scorer(tiny_model(config), *vocabularies).score(pairs))
    single = list(Scorer(tiny_model(config, dtype=torch.float32), *vocabularies).score(pairs))
    np.testing.assert_allclose(single, exact, rtol=1e-5, atol=1e-4)


def test_no_pairs_no_scores(vocabularies) -> None:
    assert list(Scorer(tiny_model(tiny_config("encdec")), *vocabularies).score([])) == []


def test_the_scorer_reads_one_window_ahead(vocabularies) -> None:
    scorer = Scorer(tiny_model(tiny_config("encdec")), *vocabularies, ScoringConfig(window=10))
    read = itertools.count()
    pairs = ((next(read), pair)[1] for pair in phrase_pairs(1000))
    scores = scorer.score(pairs)
    next(scores)
    assert next(read) == 10  # ten pairs read for the first score: memory stays flat


def test_config_and_device_errors() -> None:
    with pytest.raises(ValueError, match="max_tokens must be at least 1"):
        ScoringConfig(max_tokens=0)
    with pytest.raises(RerankError, match="unknown device"):
        torch_device("tpu")
    if not torch.cuda.is_available():
        with pytest.raises(RerankError, match="no CUDA GPU"):
            torch_device("cuda")


def test_the_trie_has_one_node_per_distinct_prefix_of_each_source() -> None:
    targets = [[5, 6, EOS_ID], [5, 6, 7, EOS_ID], [5, EOS_ID], [5, 6, EOS_ID], [8, EOS_ID], [5, 6, EOS_ID]]
    sources = np.array([0, 0, 0, 0, 0, 1])
    padded, lengths = (x.numpy() for x in pad(targets))
    order = np.lexsort((*padded.T[::-1], sources))
    trie = PrefixTrie(padded[order], lengths[order], sources[order])
    distinct = {(int(s), tuple(t[:k])) for s, t in zip(sources, targets, strict=True) for k in range(len(t))}
    assert trie.first[-1] == len(distinct) == 8  # source 0: (), 5, 5 6, 5 6 7, 8; source 1: (), 5, 5 6
    assert sorted(trie.roots.tolist()) == [0, 1]
    levels = list(trie.levels())
    assert [len(words) for _, words in levels] == [2, 3, 2, 1]
    assert all(len(parents) == len(words) for parents, words in levels[1:])
    nodes, words, rows = trie.predictions()
    assert len(nodes) == int(lengths.sum()) and np.all(np.diff(nodes) >= 0)


def test_the_source_tries_end_each_source_at_its_own_node() -> None:
    sources = [[5, 6, EOS_ID], [5, EOS_ID], [5, 6, EOS_ID], [EOS_ID], [5, 6, 7, EOS_ID]]
    (rows, trie), = source_tries(sources, max_nodes=100)
    assert sorted(rows.tolist()) == list(range(len(sources)))
    assert trie.first[-1] == 1 + len({tuple(s[:k]) for s in sources for k in range(1, len(s) + 1)})  # root + 8
    lengths = np.array([len(sources[i]) for i in rows])
    final = trie.node[np.arange(len(rows)), lengths]
    assert len(set(final.tolist())) == 4  # the two equal sources end at one node, the others at their own
    levels = list(trie.levels())[1:]  # depth k ≥ 1 reads the k-th id
    expected = ([5, EOS_ID], [6, EOS_ID], [7, EOS_ID], [EOS_ID])
    assert [sorted(words.tolist()) for _, words in levels] == [sorted(ids) for ids in expected]


def test_an_ensemble_scores_the_mean_of_its_members_each_with_its_own_vocabularies(
        vocabularies: tuple[Vocabulary, Vocabulary], tmp_path: Path) -> None:
    from tiny_models import save_model_dir

    from rerank.scoring.pairs import EnsembleScorer

    src, trg = vocabularies
    small_trg = Vocabulary.build([TRG_WORDS[:10]], 10)  # the other words are <unk> to this member
    first = save_model_dir(tmp_path / "a", tiny_model(tiny_config(), len(src), len(trg), seed=1), src, trg)
    second = save_model_dir(tmp_path / "b", tiny_model(tiny_config("encdec"), len(src), len(small_trg), seed=2),
                            src, small_trg)
    pairs = phrase_pairs(40)
    alone = [np.array(list(Scorer.load(d).score(pairs))) for d in (first, second)]
    assert type(EnsembleScorer.load_all([first])) is Scorer  # one model: its own scorer
    both = EnsembleScorer.load_all([first, second], config=ScoringConfig(window=16))
    np.testing.assert_allclose(np.array(list(both.score(pairs))), (alone[0] + alone[1]) / 2, rtol=0, atol=1e-5)
    reverse = save_model_dir(tmp_path / "r", tiny_model(dataclasses.replace(tiny_config(), reverse_target=True),
                                                        len(src), len(trg)), src, trg)
    with pytest.raises(RerankError, match="read targets in different directions"):
        EnsembleScorer.load_all([first, reverse])
