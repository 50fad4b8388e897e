"""The ctranslate2 feature on the tiny Marian model converted here: it agrees with the hf feature on the same model
to 1e-3 (the same tokens, the end of sentence included) in every form, int8 stays close, and a directory that is
no CTranslate2 model or a precision it does not offer is one clear error."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from helpers import nbest_pairs

from rerank.errors import ConfigError, RerankError
from rerank.features.registry import build_feature, read_spec

pytest.importorskip("ctranslate2", reason="the ctranslate2 extra is not installed")


def slice_pairs(multi30k_slice: dict[str, Path], count: int = 12) -> list[tuple[list[str], list[str]]]:
    return nbest_pairs(multi30k_slice["nbest"], multi30k_slice["source"], 3, count)


def spec(kind: str, model: Path, **keys: object) -> dict[str, object]:
    return {"kind": kind, "model": str(model), "source_language": "en", "target_language": "fr", **keys}


@pytest.mark.parametrize("form", [{}, {"per_word": True}, {"channel": True, "per_word": True, "sum": False}])
def test_ctranslate2_agrees_with_hugging_face(pretrained_models: dict[str, Path], multi30k_slice: dict[str, Path],
                                              form: dict[str, bool]) -> None:
    pairs = slice_pairs(multi30k_slice)
    suffix = "_reverse" if form.get("channel") else ""
    hf = build_feature(spec("hf", pretrained_models[f"hf{suffix}"], **form)).score(pairs)
    ct2 = build_feature(spec("ctranslate2", pretrained_models[f"ct2{suffix}"], threads=1, **form)).score(pairs)
    assert ct2.shape == hf.shape
    np.testing.assert_allclose(ct2, hf, atol=1e-3)


def test_int8_stays_close_to_fp32(pretrained_models: dict[str, Path], multi30k_slice: dict[str, Path]) -> None:
    pairs = slice_pairs(multi30k_slice)
    fp32 = build_feature(spec("ctranslate2", pretrained_models["ct2"])).score(pairs)
    int8 = build_feature(spec("ctranslate2", pretrained_models["ct2"], precision="int8")).score(pairs)
    assert not np.array_equal(int8, fp32)  # the int8 matrix multiplies ran
    np.testing.assert_allclose(int8, fp32, rtol=1e-3, atol=0.05)


def test_labels_and_the_tokenizer_of_another_directory(pretrained_models: dict[str, Path],
                                                       multi30k_slice: dict[str, Path]) -> None:
    assert read_spec(spec("ctranslate2", pretrained_models["ct2"])).label == "CT0"
    assert read_spec(spec("ctranslate2", pretrained_models["ct2"], channel=True)).label == "CTChan0"
    pairs = slice_pairs(multi30k_slice, 3)
    own = build_feature(spec("ctranslate2", pretrained_models["ct2"])).score(pairs)
    given = build_feature(spec("ctranslate2", pretrained_models["ct2"], tokenizer=str(pretrained_models["hf"])))
    np.testing.assert_array_equal(given.score(pairs), own)


def test_a_directory_that_is_no_model(pretrained_models: dict[str, Path], tmp_path: Path) -> None:
    with pytest.raises(RerankError, match=r"^ctranslate2 feature \(.*\): .* is not a CTranslate2 model directory "
                                          r"\(it has no model.bin\)$"):
        build_feature(spec("ctranslate2", pretrained_models["hf"]))
    (tmp_path / "model.bin").write_bytes(b"not a model")
    with pytest.raises(RerankError, match=r"^ctranslate2 feature \(.*\): CTranslate2 cannot load"):
        build_feature(spec("ctranslate2", tmp_path, tokenizer=str(pretrained_models["hf"])))


def test_precisions(pretrained_models: dict[str, Path]) -> None:
    with pytest.raises(ConfigError, match=r"ctranslate2: precision: expected fp32, int8 or one of CTranslate2's "
                                          r"compute types \(.*\), got 'int4'"):
        read_spec(spec("ctranslate2", pretrained_models["ct2"], precision="int4"))
    with pytest.raises(RerankError, match=r"precision float16 \(float16\) is not offered on cpu here"):
        build_feature(spec("ctranslate2", pretrained_models["ct2"], precision="float16"))
