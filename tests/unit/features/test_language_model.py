"""The KenLM feature: ln p against kenlm itself and against Moses' LM0, gzipped ARPA files, files that are not
language models refused, and a batch scored as its hypotheses one by one."""

from __future__ import annotations

import gzip
import itertools
import math
from pathlib import Path

import kenlm
import numpy as np
import pytest
from helpers import cut_in_unigrams, hypothesis_pairs
from slices import LM_SENTENCES

from rerank.errors import FormatError
from rerank.features.registry import build_feature
from rerank.formats.nbest import group_by_sentence, read_nbest

SENTENCES = LM_SENTENCES  # the slices of the regression LMs keep the n-grams of their words


@pytest.fixture(scope="module")
def europarl_lm(regression_slice: Path) -> Path:
    return regression_slice / "models/lexicalized-reordering/europarl.lm"


@pytest.fixture(scope="module")
def multi30k_lm(multi30k_slice: dict[str, Path]) -> Path:
    """The sample's LM (examples/data): it gives the hypotheses of the slice and of toy.nbest the full model's
    scores."""
    return multi30k_slice["lm"]


@pytest.mark.parametrize("lm", ["models/lexicalized-reordering/europarl.lm",
                                "tests/misc.binarize-compress-pt/lm.en.arpa"])
def test_kenlm_feature_is_ln_of_kenlm_log10(regression_slice: Path, lm: str) -> None:
    path = regression_slice / lm
    feature = build_feature({"kind": "kenlm", "path": str(path), "oov": True})
    model = kenlm.Model(str(path))
    values = feature.score(hypothesis_pairs(SENTENCES))
    assert values.shape == (len(SENTENCES), 2)
    for sentence, (ln_p, oov) in zip(SENTENCES, values, strict=True):
        words = list(model.full_scores(sentence, bos=True, eos=True))
        assert len(words) == len(sentence.split()) + 1  # </s> included
        assert ln_p == model.score(sentence, bos=True, eos=True) * math.log(10)
        # KenLM adds the words up in single precision; summed in double they differ in the 7th digit
        assert ln_p == pytest.approx(sum(p for p, _, _ in words) * math.log(10), abs=1e-4)
        assert oov == sum(is_oov for _, _, is_oov in words)
    assert values[2, 1] == 1  # zzzunknown


def test_kenlm_feature_equals_moses_lm0(multi30k_lm: Path, test_data: Path) -> None:
    """Moses' LM0 on the same ARPA, printed with 6 significant digits."""
    feature = build_feature({"kind": "kenlm", "path": str(multi30k_lm)})
    entries = list(read_nbest(test_data / "toy.nbest"))
    values = feature.score([((), e.tokens) for e in entries])[:, 0]
    lm0 = np.array([e.dense[e.layout.labels.index("LM0")] for e in entries])
    np.testing.assert_allclose(values, lm0, atol=1e-3, rtol=0)


def test_kenlm_feature_equals_moses_lm0_on_a_real_slice(multi30k_lm: Path, multi30k_slice: dict[str, Path]) -> None:
    feature = build_feature({"kind": "kenlm", "path": str(multi30k_lm)})
    entries = list(read_nbest(multi30k_slice["nbest"]))
    assert len(entries) > 1000
    values = feature.score([((), e.tokens) for e in entries])[:, 0]
    np.testing.assert_allclose(values, [e.dense[1] for e in entries], atol=1e-3, rtol=0)


def test_kenlm_reads_gzipped_arpa(europarl_lm: Path, tmp_path: Path) -> None:
    packed = tmp_path / "europarl.lm.gz"
    packed.write_bytes(gzip.compress(europarl_lm.read_bytes()))
    plain = build_feature({"kind": "kenlm", "path": str(europarl_lm)}).score(hypothesis_pairs(SENTENCES))
    gzipped = build_feature({"kind": "kenlm", "path": str(packed)}).score(hypothesis_pairs(SENTENCES))
    np.testing.assert_array_equal(gzipped, plain)


def test_not_an_arpa(tmp_path: Path) -> None:
    path = tmp_path / "text.arpa"
    path.write_text("hello world\n")
    with pytest.raises(FormatError, match=r"text.arpa:1: expected an ARPA or KenLM binary language model "
                                          r"\(feature LM1\), got .*first non-empty line was \"hello world\""):
        build_feature({"kind": "kenlm", "path": str(path)})


def test_truncated_arpa(europarl_lm: Path, tmp_path: Path) -> None:
    path = tmp_path / "cut.arpa"
    path.write_bytes(cut_in_unigrams(europarl_lm.read_bytes()))
    with pytest.raises(FormatError, match=r"cut.arpa:\d+: expected an ARPA .*got 'End of file"):
        build_feature({"kind": "kenlm", "path": str(path)})


def test_directory_as_lm(tmp_path: Path) -> None:
    with pytest.raises(FormatError, match=r"expected an ARPA or KenLM binary language model.*Is a directory"):
        build_feature({"kind": "kenlm", "path": str(tmp_path)})


def test_batched_equals_one_by_one(multi30k_lm: Path, multi30k_slice: dict[str, Path]) -> None:
    feature = build_feature({"kind": "kenlm", "path": str(multi30k_lm), "oov": True})
    hyps = [((), e.tokens) for _, g in itertools.islice(group_by_sentence(read_nbest(multi30k_slice["nbest"])), 3)
            for e in g]
    together = feature.score(hyps)
    np.testing.assert_array_equal(np.vstack([feature.score([p]) for p in hyps]), together)
