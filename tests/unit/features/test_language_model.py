"""The KenLM feature: ln p against kenlm itself and against Moses' LM0, gzipped ARPA files, files that are not
language models refused, and a batch scored as its hypotheses one by one."""


from __future__ import annotations

import gzip
import itertools
import logging
import math
import os
import subprocess
from pathlib import Path

import kenlm
import numpy as np
import pytest
from helpers import cut_in_unigrams, hypothesis_pairs
from slices import LM_SENTENCES

from rerank.errors import FormatError, RerankError
from rerank.features.language_model import LanguageModel, stderr_lines
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


LM = "tests/misc.binarize-compress-pt/lm.en.arpa"  # a real trigram model
BUILD_BINARY = Path(__file__).resolve().parents[4] / "shared" / "tools" / "moses" / "bin" / "build_binary"

# log10 p, words, log10 back-off
BIGRAM = """\
\\data\\
ngram 1=5
ngram 2=3

\\1-grams:
-1.0\t<unk>
-99\t<s>\t-0.5
-0.5\t</s>
-0.3\ta\t-0.2
-0.7\tdog\t-0.1

\\2-grams:
-0.1\t<s> a
-0.2\ta dog
-0.4\tdog </s>

\\end\\
"""
# each sentence's log10 p, n-gram by n-gram, and its words the model does not know
BY_HAND = {
    "a dog": (-0.1 + -0.2 + -0.4, 0),  # <s> a, a dog, dog </s>: all explicit
    "dog a": ((-0.5 + -0.7) + (-0.1 + -0.3) + (-0.2 + -0.5), 0),  # each backs off: bo(h) + p(w)
    "cat": ((-0.5 + -1.0) + -0.5, 1),  # bo(<s>) + p(<unk>), then </s> after an unknown word
    "": (-0.5 + -0.5, 0),  # bo(<s>) + p(</s>)
    "a cat dog": (-0.1 + (-0.2 + -1.0) + -0.7 + -0.4, 1),  # after <unk>: p(dog), no back-off; dog </s> explicit
}


@pytest.fixture(scope="module")
def bigram(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("lm") / "bigram.arpa"
    path.write_text(BIGRAM, encoding="utf-8")
    return path


def score(feature: LanguageModel, sentences: list[str]) -> np.ndarray:
    return feature.score([(("source",), sentence.split()) for sentence in sentences])


def test_ln_p_is_the_arpa_models_worked_out_by_hand(bigram: Path) -> None:
    feature = LanguageModel(LanguageModel.Config(path=str(bigram), oov=True))
    assert (feature.name, feature.dims, feature.needs_source) == ("LM1", 2, False)
    values = score(feature, list(BY_HAND))
    assert values.shape == (len(BY_HAND), 2)
    expected = np.array([[log10 * math.log(10), oov] for log10, oov in BY_HAND.values()])
    np.testing.assert_allclose(values, expected, rtol=0, atol=1e-6)  # KenLM keeps float32 values


def test_without_oov_one_value(bigram: Path) -> None:
    feature = LanguageModel(LanguageModel.Config(path=str(bigram), name="LM2"))
    assert (feature.name, feature.dims, LanguageModel.label(feature.config)) == ("LM2", 1, "LM2")
    assert score(feature, ["a dog"])[0, 0] == pytest.approx(-0.7 * math.log(10), abs=1e-6)


def test_loading_an_arpa_file_advises_a_binary_once_as_ours(tmp_path: Path, caplog: pytest.LogCaptureFixture,
                                                            capfd: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "advice.arpa"
    path.write_text(BIGRAM, encoding="utf-8")
    with caplog.at_level(logging.INFO, logger="rerank.features.language_model"):
        LanguageModel(LanguageModel.Config(path=str(path)))
        LanguageModel(LanguageModel.Config(path=str(path)))
    said = [r.getMessage() for r in caplog.records]
    assert said == [f"{path}: an ARPA file loads faster once converted with KenLM's build_binary"]
    assert "build a binary file" not in capfd.readouterr().err  # KenLM's own line went nowhere


@pytest.mark.skipif(not os.access(BUILD_BINARY, os.X_OK), reason=f"KenLM's build_binary not found in "
                                                                  f"{BUILD_BINARY.parent}")
def test_a_kenlm_binary_file_gives_the_arpa_files_values(bigram: Path, tmp_path: Path) -> None:
    binary = tmp_path / "bigram.binary"
    subprocess.run([str(BUILD_BINARY), str(bigram), str(binary)], check=True, capture_output=True)
    arpa = score(LanguageModel(LanguageModel.Config(path=str(bigram), oov=True)), list(BY_HAND))
    np.testing.assert_array_equal(score(LanguageModel(LanguageModel.Config(path=str(binary), oov=True)),
                                        list(BY_HAND)), arpa)


def test_a_missing_model_is_named(tmp_path: Path) -> None:
    with pytest.raises(RerankError) as error:
        LanguageModel(LanguageModel.Config(path=str(tmp_path / "none.arpa"), name="LM3"))
    assert str(error.value) == f"{tmp_path / 'none.arpa'}: language model not found (feature LM3)"


def test_an_arpa_file_cut_short_is_refused_at_its_last_line(regression_slice: Path, tmp_path: Path) -> None:
    whole = (regression_slice / LM).read_bytes()
    cut = tmp_path / "cut.arpa"
    cut.write_bytes(cut_in_unigrams(whole))
    lines = cut.read_bytes().count(b"\n")
    with pytest.raises(FormatError) as error:
        LanguageModel(LanguageModel.Config(path=str(cut)))
    assert str(error.value) == (f"{cut}:{lines}: expected an ARPA or KenLM binary language model (feature LM1), "
                                f"got 'End of file in the 1-gram at byte {len(cut.read_bytes())}'")


@pytest.mark.parametrize("line,broken,reason", [
    (10, "abc\tthe\t-0.876477", 'Could not parse "abc" into a float in the 1-gram at byte 101'),  # at a line's start
    (11, "-1.35392\tof\tzz", 'Could not parse "zz" into a float in the 1-gram at byte 136'),
    (10, "-1.12261 the\t-0.876477", "Expected tab after probability in the 1-gram at byte 110"),
    (26, "\\3-grams:", "Was expecting n-gram header \\2-grams: but got \\3-grams: instead"),
])
def test_a_broken_line_is_named_with_kenlms_reason(regression_slice: Path, tmp_path: Path, line: int, broken: str,
                                                   reason: str) -> None:
    lines = (regression_slice / LM).read_text(encoding="utf-8").split("\n")
    lines[line - 1] = broken
    bad = tmp_path / "bad.arpa"
    bad.write_text("\n".join(lines), encoding="utf-8")
    with pytest.raises(FormatError) as error:
        LanguageModel(LanguageModel.Config(path=str(bad)))
    assert str(error.value) == (f"{bad}:{line}: expected an ARPA or KenLM binary language model (feature LM1), "
                                f"got '{reason}'")  # without KenLM's C++ source location


def test_a_file_that_is_no_model_is_refused(tmp_path: Path) -> None:
    text = tmp_path / "notes.txt"
    text.write_text("this is not a language model\n", encoding="utf-8")
    with pytest.raises(FormatError, match=rf"^{text}(:\d+)?: expected an ARPA or KenLM binary language model "
                                          r"\(feature LM1\), got '.+'$"):
        LanguageModel(LanguageModel.Config(path=str(text)))


def test_stderr_lines_catches_what_is_written_to_descriptor_2(capfd: pytest.CaptureFixture[str]) -> None:
    with stderr_lines() as printed:
        os.write(2, b"first line\n\nsecond \xff line\n")
        assert printed == []  # filled at the end of the block
    assert printed == ["first line", "", "second \ufffd line"]
    os.write(2, b"after\n")
    assert capfd.readouterr().err == "after\n"  # descriptor 2 is itself again
