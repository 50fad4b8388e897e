"""The CSLM feature on a model directory and a real ARPA back-off model: a network with a flat output gives each
shortlist word P_S(h)/|S| and every other word KenLM's own probability (both worked out with KenLM alone), a
shortlist of ``</s>`` alone gives KenLM's ln p, and a KenLM binary file is refused with the reason."""

from __future__ import annotations

import math
import os
import subprocess
from pathlib import Path

import kenlm
import numpy as np
import pytest
import torch
import yaml

from rerank.errors import FormatError
from rerank.features.cslm import ContinuousSpaceLM
from rerank.features.language_model import LanguageModel
from rerank.models.checkpoint import WEIGHTS, save_state
from rerank.models.config import CONFIG, CSLMConfig
from rerank.models.cslm import VOCAB, CSLMNet
from rerank.models.vocab import SPECIALS, Vocabulary

BUILD_BINARY = Path(__file__).resolve().parents[4] / "shared" / "tools" / "moses" / "bin" / "build_binary"
LM = "tests/misc.binarize-compress-pt/lm.en.arpa"  # a real trigram model (the slice keeps these words' n-grams)
# "zebra" is in the shortlist but unknown to the back-off model: it is scored as a word outside the shortlist
SHORTLIST = ["the", "of", "european", "parliament", "zebra"]
SENTENCES = ["the european parliament", "resumption of the session", "the zebra of mr president", "", "of of of"]


def cslm_dir(directory: Path, words: list[str], flat: bool, order: int = 3) -> Path:
    """A CSLM model directory over ``words``: random weights, or (``flat``) an output layer of zeros."""
    torch.manual_seed(1)
    vocab = Vocabulary([*SPECIALS, *words])
    config = CSLMConfig(order=order, embedding_size=4, hidden_sizes=(6,))
    net = CSLMNet(config, len(vocab))
    if flat:
        with torch.no_grad():
            net.output.weight.zero_()
            net.output.bias.zero_()
    directory.mkdir(parents=True)
    (directory / CONFIG).write_text(yaml.safe_dump({"model": {"architecture": "cslm", "order": order,
                                                              "embedding_size": 4, "hidden_sizes": [6]}}))
    vocab.save(directory / VOCAB)
    save_state({"model": net.state_dict()}, directory / WEIGHTS)
    return directory


def kenlm_log10(model: kenlm.Model, history: list[str], word: str) -> float:
    """log10 P_B(word | <s> history) from KenLM's states."""
    state, out = kenlm.State(), kenlm.State()
    model.BeginSentenceWrite(state)
    for w in history:
        model.BaseScore(state, w, out)
        state, out = out, state
    return float(model.BaseScore(state, word, out))


@pytest.fixture(scope="module")
def lm(regression_slice: Path) -> Path:
    return regression_slice / LM


def pairs(sentences: list[str]) -> list[tuple[tuple[str, ...], list[str]]]:
    return [(("ignored",), sentence.split()) for sentence in sentences]


def test_a_flat_network_shares_the_shortlists_mass_equally(lm: Path, tmp_path: Path) -> None:
    feature = ContinuousSpaceLM(ContinuousSpaceLM.Config(model=str(cslm_dir(tmp_path / "m", SHORTLIST, True)),
                                                         lm=str(lm)))
    assert (feature.name, feature.dims, feature.needs_source) == ("CSLM0", 1, False)
    model = kenlm.Model(str(lm))
    shortlist = ["</s>", *(w for w in SHORTLIST if w in model)]  # S: what the network predicts
    assert "zebra" not in shortlist and len(shortlist) == 5
    expected = []
    for sentence in SENTENCES:
        words = sentence.split()
        total = 0.0
        for i, word in enumerate([*words, "</s>"]):
            history = words[:i]
            if word in shortlist:  # P_NN = 1/|S|, times P_S(h), the back-off model's mass of S after h
                mass = sum(10 ** kenlm_log10(model, history, s) for s in shortlist)
                total += math.log(mass / len(shortlist))
            else:
                total += kenlm_log10(model, history, word) * math.log(10)
        expected.append(total)
    values = feature.score(pairs(SENTENCES))
    assert values.shape == (len(SENTENCES), 1) and values.dtype == np.float64
    np.testing.assert_allclose(values[:, 0], expected, rtol=0, atol=1e-5)  # KenLM's float32


def test_a_shortlist_of_end_of_sentence_alone_gives_kenlms_values(lm: Path, tmp_path: Path) -> None:
    """P_NN(</s>) = 1 and P_S(h) = P_B(</s> | h): every token gets the back-off model's probability."""
    feature = ContinuousSpaceLM(ContinuousSpaceLM.Config(model=str(cslm_dir(tmp_path / "m", [], False)), lm=str(lm),
                                                         name="CSLM1"))
    assert ContinuousSpaceLM.label(ContinuousSpaceLM.Config(model="m", lm="l", name="CSLM1")) == feature.name
    kenlm_values = LanguageModel(LanguageModel.Config(path=str(lm))).score(pairs(SENTENCES))
    np.testing.assert_allclose(feature.score(pairs(SENTENCES)), kenlm_values, rtol=0, atol=1e-5)


@pytest.mark.skipif(not os.access(BUILD_BINARY, os.X_OK), reason=f"KenLM's build_binary not found in "
                                                                  f"{BUILD_BINARY.parent}")
def test_a_kenlm_binary_file_is_refused_with_the_reason(lm: Path, tmp_path: Path) -> None:
    binary = tmp_path / "lm.binary"
    subprocess.run([str(BUILD_BINARY), str(lm), str(binary)], check=True, capture_output=True)
    model = cslm_dir(tmp_path / "m", SHORTLIST, False)
    with pytest.raises(FormatError) as error:
        ContinuousSpaceLM(ContinuousSpaceLM.Config(model=str(model), lm=str(binary)))
    message = str(error.value)
    assert message.startswith(f"{binary}:"), message
    assert ": the CSLM0 feature reads the back-off structure of an ARPA text file (a KenLM binary file does " \
           "not do)" in message
