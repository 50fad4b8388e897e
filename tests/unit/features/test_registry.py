"""The feature registry: specs checked (kinds, labels, keys, files) before any model loads, and the kinds it knows."""

from __future__ import annotations

from pathlib import Path

import pytest

from rerank.cli import main
from rerank.errors import ConfigError, RerankError
from rerank.features.registry import FEATURES, build_feature, build_features


def test_missing_files_are_named_with_the_config_and_its_key(tmp_path: Path) -> None:
    with pytest.raises(RerankError, match=r"^rescore.yaml: kenlm.path: .*none.arpa: no such file or directory$"):
        build_feature({"kind": "kenlm", "path": str(tmp_path / "none.arpa")}, source="rescore.yaml")
    with pytest.raises(RerankError, match=r"^rescore.yaml: nmt.model: .*gone: no such file or directory$"):
        build_feature({"kind": "nmt", "model": [str(tmp_path), str(tmp_path / "gone")]}, source="rescore.yaml")


@pytest.mark.parametrize("spec, message", [
    ({"kind": "unk-penalty"}, "give exactly one of 'vocab'"),
    ({"kind": "unk-penalty", "vocab": "v", "corpus": "c"}, "give exactly one of 'vocab'"),
    ({"kind": "unk-penalty", "corpus": "c", "shortlist": 0}, "shortlist must be positive"),
    ({"kind": "kenlm"}, "missing required key 'kenlm.path'"),
    ({"kind": "kenlm", "path": "x", "order": 4}, "unknown key 'kenlm.order'"),
    ({"kind": "word-penalty", "name": "WP_1"}, "word-penalty: feature label 'WP_1' must be a letter"),
    ({"kind": "rnn"}, "unknown feature kind 'rnn'; known kinds: .*kenlm.*unk-penalty"),
    ({"name": "WP1"}, "a feature needs a 'kind'"),
])
def test_bad_specs(spec: dict, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        build_feature(spec, source="rescore.yaml")


def test_duplicate_labels() -> None:
    with pytest.raises(ConfigError, match="feature label.s. used twice: WP1"):
        build_features([{"kind": "word-penalty"}, {"kind": "word-penalty"}])
    assert [f.name for f in build_features([{"kind": "word-penalty"}, {"kind": "word-penalty", "name": "WP2"}])] \
        == ["WP1", "WP2"]


def test_registry_lists_the_backbone_features() -> None:
    assert {"kenlm", "word-penalty", "unk-penalty"} <= set(FEATURES)


def test_a_mistyped_feature_kind(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = tmp_path / "rescore.yaml"
    config.write_text("features:\n  - {kind: word-penalti}\n", encoding="utf-8")
    nbest = tmp_path / "x.nbest"
    nbest.write_text("0 ||| a b ||| F0= 1 ||| 1\n", encoding="utf-8")
    assert main(["score-nbest", str(nbest), "--config", str(config), "-o", str(tmp_path / "out")]) == 2
    assert "unknown feature kind 'word-penalti' (did you mean 'word-penalty'?)" in capsys.readouterr().err


def test_the_identity_of_a_feature_is_what_its_values_depend_on(tmp_path: Path) -> None:
    """Kind, the options that change values, each file's digest (a model directory's: its weights'), and the source
    for a feature that reads it; not the label or where and how the model runs."""
    import hashlib

    from rerank.features.registry import read_spec

    model = tmp_path / "model"
    model.mkdir()
    (model / "model.pt").write_bytes(b"weights")
    (model / "config.yaml").write_text("model: {}\n")
    source = tmp_path / "src.en"
    source.write_text("a b\n")
    spec = read_spec({"kind": "nmt", "model": str(model), "name": "X0", "device": "cpu", "max_tokens": 99})
    assert spec.identity(str(source)) == {
        "kind": "nmt", "model": {"file": str(model), "sha256": hashlib.sha256(b"weights").hexdigest()},
        "channel": False, "per_word": False, "sum": True, "precision": "fp32",
        "source": {"file": str(source), "sha256": hashlib.sha256(b"a b\n").hexdigest()}}
    assert read_spec({"kind": "word-penalty", "name": "WP2"}).identity(str(source)) == {"kind": "word-penalty"}
