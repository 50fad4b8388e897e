"""The hf feature on a tiny Marian model built here: its ln p is the model's own loss over the same tokens (the
hypothesis detokenized, its end of sentence included), in every batching; the per-word and channel forms; the
labels; and a directory that is no model, a language code the tokenizer lacks, a sentence longer than the
model's positions: one clear error each."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from helpers import nbest_pairs

from rerank.errors import ConfigError, RerankError
from rerank.features.registry import build_feature, read_spec

pytest.importorskip("transformers", reason="the hf extra is not installed")


def slice_pairs(multi30k_slice: dict[str, Path], count: int = 12) -> list[tuple[list[str], list[str]]]:
    """Sources and Moses' hypotheses of the slice's first sentences, three hypotheses each (tokenized, escaped)."""
    return nbest_pairs(multi30k_slice["nbest"], multi30k_slice["source"], 3, count)


def loss_log_prob(model: Path, source: str, target: str) -> float:
    """ln p(target | source) as the model's loss counts it: the mean over the labels, times their number."""
    import torch
    from transformers import AutoModelForSeq2SeqLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(model)
    loaded = AutoModelForSeq2SeqLM.from_pretrained(model).eval()
    encoded = tokenizer(source, text_target=target, return_tensors="pt")
    with torch.no_grad():
        return -float(loaded(**encoded).loss) * encoded["labels"].shape[1]


def detokenized(tokens: list[str], language: str) -> str:
    from sacremoses import MosesDetokenizer

    return str(MosesDetokenizer(language).detokenize(tokens, unescape=True))


def spec(model: Path, **keys: object) -> dict[str, object]:
    return {"kind": "hf", "model": str(model), "source_language": "en", "target_language": "fr", **keys}


def test_ln_p_is_the_models_own_loss_over_the_detokenized_pair(pretrained_models: dict[str, Path],
                                                               multi30k_slice: dict[str, Path]) -> None:
    pairs = slice_pairs(multi30k_slice)
    assert any("&apos;" in " ".join(h) for _, h in pairs) or any("," in h for _, h in pairs)
    values = build_feature(spec(pretrained_models["hf"])).score(pairs)
    assert values.shape == (len(pairs), 1)
    expected = [loss_log_prob(pretrained_models["hf"], detokenized(s, "en"), detokenized(h, "fr")) for s, h in pairs]
    np.testing.assert_allclose(values[:, 0], expected, rtol=1e-6, atol=1e-5)
    assert len(set(values[:, 0].round(4))) > len(pairs) // 2  # the hypotheses differ, and so do their scores


def test_the_batches_do_not_change_the_values(pretrained_models: dict[str, Path],
                                              multi30k_slice: dict[str, Path]) -> None:
    pairs = slice_pairs(multi30k_slice)
    whole = build_feature(spec(pretrained_models["hf"])).score(pairs)
    one_by_one = build_feature(spec(pretrained_models["hf"], max_tokens=1)).score(pairs)
    np.testing.assert_allclose(one_by_one, whole, atol=1e-5)
    reordered = build_feature(spec(pretrained_models["hf"])).score(pairs[::-1])
    np.testing.assert_allclose(reordered[::-1], whole, atol=1e-5)


def test_per_word_divides_by_moses_tokens_plus_one(pretrained_models: dict[str, Path],
                                                   multi30k_slice: dict[str, Path]) -> None:
    pairs = slice_pairs(multi30k_slice, 6)
    both = build_feature(spec(pretrained_models["hf"], per_word=True)).score(pairs)
    alone = build_feature(spec(pretrained_models["hf"], per_word=True, sum=False)).score(pairs)
    words = np.array([len(h) + 1 for _, h in pairs], dtype=np.float64)
    np.testing.assert_allclose(both[:, 1], both[:, 0] / words)
    np.testing.assert_allclose(alone[:, 0], both[:, 1])
    assert alone.shape == (6, 1)


def test_the_channel_is_the_reverse_models_ln_p_of_the_source(pretrained_models: dict[str, Path],
                                                               multi30k_slice: dict[str, Path]) -> None:
    pairs = slice_pairs(multi30k_slice, 4)
    feature = build_feature(spec(pretrained_models["hf_reverse"], channel=True))
    assert feature.name == "HFChan0"
    expected = [loss_log_prob(pretrained_models["hf_reverse"], detokenized(h, "fr"), detokenized(s, "en"))
                for s, h in pairs]
    np.testing.assert_allclose(feature.score(pairs)[:, 0], expected, rtol=1e-6, atol=1e-5)


def test_labels(pretrained_models: dict[str, Path]) -> None:
    assert read_spec(spec(pretrained_models["hf"])).label == "HF0"
    assert read_spec(spec(pretrained_models["hf"], name="OpusMT0")).label == "OpusMT0"


def test_a_directory_that_is_no_model(tmp_path: Path) -> None:
    with pytest.raises(RerankError, match=r"^hf feature \(.*\): .* is not a Hugging Face model directory "
                                          r"\(it has no config.json\)$"):
        build_feature(spec(tmp_path))
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "marian"}), encoding="utf-8")
    with pytest.raises(RerankError, match=r"^hf feature \(.*\): .* holds no Hugging Face tokenizer that loads"):
        build_feature(spec(tmp_path))


def test_a_language_code_the_tokenizer_lacks(pretrained_models: dict[str, Path]) -> None:
    with pytest.raises(RerankError, match=r"has no language code 'fra_Latn' \(target_code\)$"):
        build_feature(spec(pretrained_models["hf"], target_code="fra_Latn"))


def test_a_sentence_longer_than_the_models_positions(pretrained_models: dict[str, Path]) -> None:
    feature = build_feature(spec(pretrained_models["hf"]))
    with pytest.raises(RerankError, match=r"expected sentences of at most 256 subwords \(the model's positions\), "
                                          r"got \d+ for 'un chien un chien"):
        feature.score([("a dog".split(), "un chien".split() * 100)])


def test_config_errors() -> None:
    with pytest.raises(ConfigError, match=r"hf: sum: false leaves no value"):
        read_spec({**spec(Path(".")), "sum": False})
    with pytest.raises(ConfigError, match=r"hf: device: expected cpu, cuda or cuda:N, got 'gpu'"):
        read_spec({**spec(Path(".")), "device": "gpu"})
    with pytest.raises(ConfigError, match=r"missing required key 'hf.target_language'"):
        read_spec({"kind": "hf", "model": ".", "source_language": "en"})


def test_a_multilingual_models_language_codes(multi30k_slice: dict[str, Path], tmp_path: Path) -> None:
    """M2M-100: the codes reach the tokenizer (the source starts with __en__, the target with __fr__), and the
    target's code, which generation forces, is not counted: the loss over the other tokens."""
    import torch
    from tiny_models import tiny_m2m
    from transformers import AutoTokenizer, M2M100ForConditionalGeneration
    from transformers.models.m2m_100.modeling_m2m_100 import shift_tokens_right

    lines = [line for key in ("source", "reference") for line in
             multi30k_slice[key].read_text(encoding="utf-8").splitlines()]
    model = tiny_m2m(tmp_path / "m2m", lines)
    pairs = slice_pairs(multi30k_slice, 4)
    feature = build_feature(spec(model, source_code="en", target_code="fr", per_word=True))
    values = feature.score(pairs)
    tokenizer = AutoTokenizer.from_pretrained(model, src_lang="en", tgt_lang="fr")
    loaded = M2M100ForConditionalGeneration.from_pretrained(model).eval()
    for (source, hypothesis), (value, per_word) in zip(pairs, values, strict=True):
        encoded = tokenizer(detokenized(source, "en"), text_target=detokenized(hypothesis, "fr"), return_tensors="pt")
        labels = encoded["labels"].clone()
        assert encoded["input_ids"][0, 0] == tokenizer.convert_tokens_to_ids("__en__")
        assert labels[0, 0] == tokenizer.convert_tokens_to_ids("__fr__")
        decoder_input_ids = shift_tokens_right(labels, 1, 2)
        labels[0, 0] = -100  # the forced language code
        with torch.no_grad():
            loss = loaded(input_ids=encoded["input_ids"], decoder_input_ids=decoder_input_ids, labels=labels).loss
        assert value == pytest.approx(-float(loss) * (labels.shape[1] - 1), rel=1e-6, abs=1e-5)
        assert per_word == pytest.approx(value / (len(hypothesis) + 1))
    swapped = build_feature(spec(model, source_code="en", target_code="de")).score(pairs)  # another target code
    assert np.abs(swapped[:, 0] - values[:, 0]).min() > 1e-4  # the decoder read __de__ before the hypothesis
