"""moses.ini: byte-identical round trips, weights (modern and old), rewriting weights and phrase-table arity."""

from __future__ import annotations

from pathlib import Path

import pytest

from rerank.errors import FormatError, RerankError
from rerank.formats.moses_ini import MosesIni

REGRESSION_INIS = ["misc.binarize-compress-pt", "phrase.basic-surface-only", "phrase.lexicalized-reordering",
                   "phrase.nbest-with-alignment", "phrase.sparse-features"]
MULTI30K_WEIGHTS = {"Distortion0": (0.138061,), "LM0": (0.15949,), "WordPenalty0": (-0.225306,),
                    "PhrasePenalty0": (0.105148,), "TranslationModel0": (0.126263, 0.0567749, 0.12818, 0.0607768),
                    "UnknownWordPenalty0": (1.0,)}


@pytest.fixture
def multi30k_ini(multi30k_slice: dict[str, Path]) -> MosesIni:
    return MosesIni.read(multi30k_slice["moses_ini"])


@pytest.mark.parametrize("test", REGRESSION_INIS)
def test_round_trip_regression_inis(regression_slice: Path, tmp_path: Path, test: str) -> None:
    path = regression_slice / "tests" / test / "moses.ini"
    MosesIni.read(path).write(tmp_path / "moses.ini")
    assert (tmp_path / "moses.ini").read_bytes() == path.read_bytes()


def test_round_trip_multi30k(multi30k_slice: dict[str, Path], multi30k_ini: MosesIni, tmp_path: Path) -> None:
    multi30k_ini.write(tmp_path / "moses.ini")
    assert (tmp_path / "moses.ini").read_bytes() == multi30k_slice["moses_ini"].read_bytes()


def test_modern_weights_and_feature_names(multi30k_ini: MosesIni) -> None:
    assert multi30k_ini.weights() == MULTI30K_WEIGHTS
    assert not multi30k_ini.is_old_format
    names = [f.name for f in multi30k_ini.features()]
    assert names == ["UnknownWordPenalty0", "WordPenalty0", "PhrasePenalty0", "TranslationModel0", "Distortion0",
                     "LM0"]
    assert multi30k_ini.features()[3].args["num-features"] == "4"


def test_unnamed_features_are_numbered_per_class(regression_slice: Path) -> None:
    ini = MosesIni.read(regression_slice / "tests/phrase.sparse-features/moses.ini")
    assert [f.name for f in ini.features()] == ["UnknownWordPenalty0", "WordPenalty0", "Distortion0", "twi", "LM0",
                                               "LexicalReordering0", "pl", "wt", "TranslationModel0"]
    assert len(ini.weights()["TranslationModel0"]) == 12


def test_old_format_weights_use_old_nbest_labels(regression_slice: Path) -> None:
    ini = MosesIni.read(regression_slice / "tests/misc.binarize-compress-pt/moses.ini")
    assert ini.is_old_format
    weights = ini.weights()
    assert {k: len(v) for k, v in weights.items()} == {"d": 7, "lm": 1, "tm": 5, "w": 1}
    assert weights["w"] == (0.197944,)


def test_with_weights_changes_only_weight_lines(multi30k_ini: MosesIni, tmp_path: Path) -> None:
    changed = multi30k_ini.with_weights({"LM0": [0.2], "LM1": [0.05]})
    assert changed.weights() == {**MULTI30K_WEIGHTS, "LM0": (0.2,), "LM1": (0.05,)}
    diff = [(a, b) for a, b in zip(multi30k_ini.lines, changed.lines, strict=False) if a != b]
    assert diff[0] == ("LM0= 0.15949", "LM0= 0.2")
    assert changed.lines[-1] == "LM1= 0.05" and len(changed.lines) == len(multi30k_ini.lines) + 1
    assert multi30k_ini.weights()["LM0"] == (0.15949,)  # the original is untouched
    changed.write(tmp_path / "moses.ini")
    assert MosesIni.read(tmp_path / "moses.ini").weights() == changed.weights()


def test_with_weights_old_format(regression_slice: Path) -> None:
    ini = MosesIni.read(regression_slice / "tests/misc.binarize-compress-pt/moses.ini")
    assert ini.with_weights({"w": [-1.5]}).weights()["w"] == (-1.5,)
    with pytest.raises(RerankError, match=r"\[weight-w\] has 1 weights, got 2"):
        ini.with_weights({"w": [1, 2]})
    with pytest.raises(RerankError, match="old-format moses.ini has no place for weights"):
        ini.with_weights({"LM1": [1]})


def test_with_added_score_modern_changes_arity_and_weights_together(multi30k_ini: MosesIni) -> None:
    changed = multi30k_ini.with_added_score("TranslationModel0", 0.1)
    table = next(f for f in changed.features() if f.name == "TranslationModel0")
    assert table.args["num-features"] == "5"
    assert changed.weights()["TranslationModel0"] == MULTI30K_WEIGHTS["TranslationModel0"] + (0.1,)
    assert sum(a != b for a, b in zip(multi30k_ini.lines, changed.lines, strict=True)) == 2


def test_with_added_score_old_format(regression_slice: Path) -> None:
    ini = MosesIni.read(regression_slice / "tests/misc.binarize-compress-pt/moses.ini")
    changed = ini.with_added_score("${RESULTS_PATH}/phrase-table.0-0.1.1", 0.3)
    assert changed.weights()["tm"] == ini.weights()["tm"] + (0.3,)
    assert "12 0 0 6 ${RESULTS_PATH}/phrase-table.0-0.1.1" in changed.lines
    assert changed.weights()["w"] == ini.weights()["w"]


def test_with_added_score_errors(multi30k_ini: MosesIni) -> None:
    with pytest.raises(RerankError, match="no feature named 'TM9'"):
        multi30k_ini.with_added_score("TM9", 0.1)
    with pytest.raises(FormatError, match="a num-features= argument for LM0"):
        multi30k_ini.with_added_score("LM0", 0.1)


def test_bad_weight_line(tmp_path: Path) -> None:
    path = tmp_path / "moses.ini"
    path.write_text("[weight]\nLM0= 0.5\nWordPenalty0= x\n")
    with pytest.raises(FormatError, match=r"moses.ini:3: expected finite numbers after 'WordPenalty0='"):
        MosesIni.read(path).weights()


def test_bad_feature_line(tmp_path: Path) -> None:
    path = tmp_path / "moses.ini"
    path.write_text("[feature]\nKENLM name=LM0 factor\n")
    with pytest.raises(FormatError, match=r"moses.ini:2: expected key=value arguments"):
        MosesIni.read(path).features()
