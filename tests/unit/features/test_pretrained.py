"""What the pretrained models' features share: Moses' escaped tokens made plain text for the model's tokenizer,
a missing optional package named with the line that installs it, padding, and the model's positions."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest

from rerank.errors import RerankError
from rerank.features.pretrained import MosesText, check_installed, max_positions, model_directory, padded

pytest.importorskip("sacremoses", reason="the hf extra is not installed")


def test_moses_text_is_unescaped_and_detokenized() -> None:
    french = MosesText("fr")
    assert french("un groupe d&apos; hommes , l&apos; homme &quot; dit &quot; : oui ?".split()) == \
        "un groupe d'hommes, l'homme \"dit\" : oui ?"
    assert MosesText("en")("a woman &apos;s shoulders &amp; a &#124; &lt; b &gt; &#91; c &#93; .".split()) == \
        "a woman's shoulders & a | < b > [c]."
    assert MosesText("en", detokenize=False)("a woman &apos;s shoulders .".split()) == "a woman 's shoulders ."


def test_a_missing_package_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    check_installed(("sacremoses",), "hf")
    monkeypatch.setitem(sys.modules, "transformers", None)  # as where the package is not installed
    with pytest.raises(ValueError, match=r"^needs the transformers package, which is not installed: pip install "
                                         r"'\.\[hf\]' in rerank's clone, or the wheel's path followed by \[hf\] "
                                         r"\('dist/rerank_moses-VERSION-py3-none-any\.whl\[hf\]'\)$"):
        check_installed(("sacremoses", "transformers"), "hf")


def test_padding_and_positions(tmp_path: Path) -> None:
    np.testing.assert_array_equal(padded([[1, 2, 3], [4]], 9), [[1, 2, 3], [4, 9, 9]])
    assert padded([[True], [True, False]], False, bool).dtype == np.bool_
    assert max_positions(str(tmp_path)) is None
    (tmp_path / "config.json").write_text(json.dumps({"max_position_embeddings": 512}), encoding="utf-8")
    assert max_positions(str(tmp_path)) == 512
    model_directory(str(tmp_path), "config.json", "a model", "here")
    with pytest.raises(RerankError, match=r"^here: .* is not a model \(it has no model.bin\)$"):
        model_directory(str(tmp_path), "model.bin", "a model", "here")


def test_the_optional_packages_load_only_with_a_feature_that_needs_them() -> None:
    import subprocess

    code = ("import sys, rerank.cli, rerank.features.registry, rerank.commands.score_table; "
            "print(sorted(m for m in ('transformers', 'ctranslate2', 'sacremoses') if m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                          cwd=Path(__file__).resolve().parents[3])
    assert done.returncode == 0 and done.stdout.strip() == "[]", done.stderr
