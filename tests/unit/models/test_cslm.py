"""The CSLM: its distribution over the whole vocabulary (network over the shortlist, back-off model elsewhere)
sums to 1, the shortlist's back-off mass from the ARPA structure equals the plain sum, scoring and batch
invariance."""

from __future__ import annotations

from pathlib import Path

import kenlm
import numpy as np
import pytest
import torch

from rerank.formats.arpa import read_arpa_structure
from rerank.models.cslm import CSLM, LN_10, BackoffLM, CSLMConfig, CSLMNet
from rerank.models.vocab import Vocabulary


def tiny_cslm(arpa: Path, shortlist: list[str], order: int = 4) -> CSLM:
    """A random network over ``shortlist`` (its words and ``</s>``) with the back-off model ``arpa``."""
    torch.manual_seed(0)
    vocab = Vocabulary(["<pad>", "<unk>", "<s>", "</s>", *shortlist])
    net = CSLMNet(CSLMConfig(order=order, embedding_size=6, hidden_sizes=(12, 8)), len(vocab))
    with torch.no_grad():
        net.output.weight.mul_(8)  # peaked: far from the back-off model's distribution
    model = kenlm.Model(str(arpa))
    structure = read_arpa_structure(arpa, keep=vocab.ids.__contains__)
    return CSLM(net, vocab, BackoffLM(model, structure, vocab.tokens), chunk=3)


# "swims" is in the shortlist but unknown to the back-off model: the back-off model gives it (as <unk>)
SHORTLIST = ["a", "the", "dog", "in", "park", "runs", "with", "man", "swims"]
HISTORIES = [[], ["a"], ["a", "dog"], ["the", "man", "walks"], ["zebra", "in"], ["a", "girl", "plays", "in", "the"],
             ["the", "dog", "plays", "with", "a", "ball", "in", "the", "park"], ["ball", "ball", "street"]]


@pytest.mark.parametrize("history", HISTORIES)
def test_the_distribution_over_the_whole_vocabulary_sums_to_one(arpa: Path, history: list[str]) -> None:
    cslm = tiny_cslm(arpa, SHORTLIST)
    vocab = sorted(cslm.backoff.structure.vocab - {"<s>"})  # the back-off model's words, </s> and <unk>
    assert "</s>" in vocab and "<unk>" in vocab and "swims" not in vocab
    values = np.exp(cslm.log_probs([history] * len(vocab), vocab))
    assert values.sum() == pytest.approx(1.0, abs=1e-6)
    # not the back-off model's distribution: the network shares out the shortlist's mass
    context = cslm.backoff.context(history)
    backoff = np.array([10 ** cslm.backoff.log10(context, w) for w in vocab])
    assert backoff.sum() == pytest.approx(1.0, abs=1e-6)
    in_shortlist = np.array([w in cslm.backoff.shortlist for w in vocab])
    assert np.abs(values - backoff)[in_shortlist].max() > 1e-3
    np.testing.assert_allclose(values[~in_shortlist], backoff[~in_shortlist], rtol=1e-12)
    assert values[in_shortlist].sum() == pytest.approx(backoff[in_shortlist].sum(), abs=1e-6)  # float32 softmax


@pytest.mark.parametrize("history", HISTORIES)
def test_the_shortlist_mass_from_the_arpa_structure_is_the_plain_sum(arpa: Path, history: list[str]) -> None:
    backoff = tiny_cslm(arpa, SHORTLIST).backoff
    assert set(backoff.shortlist) == {"</s>", *SHORTLIST} - {"swims"}
    context = backoff.context(history)
    for h in (context[i:] for i in range(len(context) + 1)):  # the context and every shorter one
        plain = sum(10 ** backoff.log10(h, w) for w in backoff.shortlist)
        assert backoff.shortlist_mass(h) == pytest.approx(plain, abs=2e-7)  # KenLM adds log10 values in float32


def test_the_shortlist_mass_on_the_real_4_gram(multi30k_moses: Path) -> None:
    path = multi30k_moses / "lm" / "train.fr.4.arpa"
    shortlist = ["</s>", "un", "une", "homme", "chien", "dans", "la", "rue", "de", "le", "avec", "sur"]
    structure = read_arpa_structure(path, keep=set(shortlist).__contains__)
    assert structure.order == 4 and len(structure.vocab) == 11222
    backoff = BackoffLM(kenlm.Model(str(path)), structure, shortlist)
    for history in [[], ["un"], ["un", "homme"], ["un", "homme", "marche", "dans"], ["zzz", "dans", "la"],
                    ["deux", "chiens", "jouent", "sur", "la"]]:
        h = backoff.context(history)
        plain = sum(10 ** backoff.log10(h, w) for w in backoff.shortlist)
        assert backoff.shortlist_mass(h) == pytest.approx(plain, abs=2e-7)  # KenLM adds log10 values in float32


def test_scoring_sums_the_tokens_and_does_not_depend_on_the_batch(arpa: Path) -> None:
    cslm = tiny_cslm(arpa, SHORTLIST)
    sentences = [s.split() for s in ["a dog runs in the park", "the zebra swims", "", "park park park the a",
                                     "a man walks with the dog in the park with a ball"]]
    scores = cslm.score(sentences)
    for sentence, score in zip(sentences, scores, strict=True):
        words = [*sentence, "</s>"]
        tokens = cslm.log_probs([sentence[:i] for i in range(len(words))], words)
        assert score == pytest.approx(tokens.sum(), abs=1e-5)
        assert cslm.score([sentence])[0] == pytest.approx(score, abs=1e-5)
    assert cslm.score(sentences[::-1]) == pytest.approx(scores[::-1], abs=1e-5)
    # a word neither model knows gets the back-off model's <unk> probability (KenLM's, in natural log)
    unknown = cslm.sentence_log_probs([["the", "zebra"]])[0][1]
    kenlm_values = [lp for lp, _, _ in cslm.backoff.model.full_scores("the zebra")]
    assert unknown == pytest.approx(kenlm_values[1] * LN_10, abs=1e-6)
