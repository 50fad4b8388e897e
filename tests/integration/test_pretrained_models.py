"""``rerank score-nbest`` and ``rerank score-table`` with the pretrained models' features (kind hf and ctranslate2)
on tiny Marian models built here and the real slices of Multi30k: the n-best list and the phrase table come out
byte for byte as they went in but for the new values, which are the features' own; and a missing extra, a
directory that is no model, a sentence the model cannot read each stop the command with one line and status 2,
nothing written."""

from __future__ import annotations

import gzip
import math
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import yaml
from helpers import nbest_pairs

from rerank.cli import main
from rerank.features.registry import build_feature

REPO = Path(__file__).resolve().parents[2]


def run(argv: list[object], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    code = main([str(a) for a in argv])
    return code, capsys.readouterr().err


def features_config(tmp_path: Path, *features: dict[str, object]) -> Path:
    path = tmp_path / "features.yaml"
    path.write_text(yaml.safe_dump({"features": list(features)}), encoding="utf-8")
    return path


def pretrained(kind: str, model: Path, **keys: object) -> dict[str, object]:
    return {"kind": kind, "model": str(model), "source_language": "en", "target_language": "fr", **keys}


def test_score_nbest_adds_the_columns_and_keeps_every_other_byte(pretrained_models: dict[str, Path],
                                                                multi30k_slice: dict[str, Path], tmp_path: Path,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    specs = [pretrained("hf", pretrained_models["hf"]),
             pretrained("ctranslate2", pretrained_models["ct2"], per_word=True),
             pretrained("ctranslate2", pretrained_models["ct2_reverse"], channel=True)]
    output = tmp_path / "scored.nbest"
    code, err = run(["score-nbest", multi30k_slice["nbest"], "--source", multi30k_slice["source"], "--config",
                     features_config(tmp_path, *specs), "--threads", 1, "-o", output], capsys)
    assert code == 0, err
    original = gzip.decompress(multi30k_slice["nbest"].read_bytes()).decode("utf-8").splitlines(keepends=True)
    scored = output.read_text(encoding="utf-8").splitlines(keepends=True)
    assert len(scored) == len(original) == 1310
    added = re.compile(r" HF0= (\S+) CT0= (\S+) (\S+) CTChan0= (\S+) \|\|\|")
    values = []
    for before, after in zip(original, scored, strict=True):
        match = added.search(after)
        assert match is not None, after
        assert after[:match.start()] + " |||" + after[match.end():] == before
        values.append([float(v) for v in match.groups()])
    table = np.array(values)
    pairs = nbest_pairs(multi30k_slice["nbest"], multi30k_slice["source"], per_sentence=100, count=len(original))
    np.testing.assert_allclose(table[:, 0], build_feature(specs[0]).score(pairs)[:, 0], rtol=1e-5)
    np.testing.assert_allclose(table[:, 1], table[:, 0], rtol=1e-5, atol=1e-3)  # CTranslate2 agrees with HF
    words = np.array([len(hypothesis) + 1 for _, hypothesis in pairs])
    np.testing.assert_allclose(table[:, 2], table[:, 1] / words, rtol=1e-5)
    np.testing.assert_allclose(table[:, 3], build_feature(specs[2]).score(pairs)[:, 0], rtol=1e-5)


def test_score_table_appends_the_features_probability(pretrained_models: dict[str, Path],
                                                      multi30k_slice: dict[str, Path], tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    feature = tmp_path / "opus-mt.yaml"
    feature.write_text(yaml.safe_dump(pretrained("hf", pretrained_models["hf"])), encoding="utf-8")
    output = tmp_path / "phrase-table.hf.gz"
    code, err = run(["score-table", multi30k_slice["phrase_table"], "--feature", feature, "--window", 64, "-o",
                     output], capsys)
    assert code == 0, err
    original = gzip.decompress(multi30k_slice["phrase_table"].read_bytes()).decode("utf-8").splitlines()
    scored = gzip.decompress(output.read_bytes()).decode("utf-8").splitlines()
    assert len(scored) == len(original) == 300
    pairs, values = [], []
    for before, after in zip(original, scored, strict=True):
        fields, new = before.split(" ||| "), after.split(" ||| ")
        scores = new[2].split()
        assert new[:2] + new[3:] == fields[:2] + fields[3:] and " ".join(scores[:-1]) == fields[2]
        pairs.append((fields[0].split(), fields[1].split()))
        values.append(float(scores[-1]))
    expected = build_feature(pretrained("hf", pretrained_models["hf"])).score(pairs)[:, 0]
    np.testing.assert_allclose(values, [math.exp(max(v, -100.0)) for v in expected], rtol=1e-5)


def one_line_error(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("rerank: error: "), err
    return lines[0]


def test_a_missing_extra_exits_2_with_the_line_that_installs_it(pretrained_models: dict[str, Path],
                                                                 multi30k_slice: dict[str, Path],
                                                                 tmp_path: Path) -> None:
    config = features_config(tmp_path, pretrained("hf", pretrained_models["hf"]))
    output = tmp_path / "scored.nbest"
    absent = "import sys; sys.modules['transformers'] = None; from rerank.cli import main; sys.exit(main())"
    done = subprocess.run([sys.executable, "-c", absent, "score-nbest", str(multi30k_slice["nbest"]), "--source",
                           str(multi30k_slice["source"]), "--config", str(config), "-o", str(output)],
                          capture_output=True, text=True, cwd=REPO, timeout=300,
                          env={**os.environ, "PYTHONPATH": str(REPO)})
    assert done.returncode == 2
    line = one_line_error(done.stderr)
    assert line.endswith("hf: needs the transformers package, which is not installed: pip install '.[hf]' in "
                         "rerank's clone, or the wheel's path followed by [hf] "
                         "('dist/rerank_moses-VERSION-py3-none-any.whl[hf]')"), line
    assert not output.exists()


def test_no_model_and_an_unreadable_sentence_exit_2(pretrained_models: dict[str, Path],
                                                    multi30k_slice: dict[str, Path], tmp_path: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    output = tmp_path / "scored.nbest"
    command = ["score-nbest", multi30k_slice["nbest"], "--source", multi30k_slice["source"], "-o", output]
    code, err = run([*command, "--config", features_config(tmp_path, pretrained("hf", tmp_path))], capsys)
    assert code == 2 and "is not a Hugging Face model directory (it has no config.json)" in one_line_error(err)
    code, err = run([*command, "--config", features_config(tmp_path, pretrained("ctranslate2", pretrained_models[
        "hf"]))], capsys)
    assert code == 2 and "is not a CTranslate2 model directory (it has no model.bin)" in one_line_error(err)
    long_source = tmp_path / "long.en"
    lines = multi30k_slice["source"].read_text(encoding="utf-8").splitlines()
    long_source.write_text("\n".join(["a dog runs " * 40, *lines[1:]]) + "\n", encoding="utf-8")
    for kind in ("hf", "ctranslate2"):
        model = pretrained_models["hf" if kind == "hf" else "ct2"]
        config = features_config(tmp_path, pretrained(kind, model, tokenizer=str(pretrained_models["hf"]))
                                 if kind == "ctranslate2" else pretrained(kind, model))
        code, err = run([*command[:3], long_source, *command[4:], "--config", config], capsys)
        assert code == 2
        assert re.search(r"expected sentences of at most 256 subwords \(the model's positions\), got \d+ for "
                         r"'a dog runs a dog runs", one_line_error(err)), err
    assert not output.exists()


def test_score_table_refuses_a_feature_of_two_values_and_ray(pretrained_models: dict[str, Path],
                                                            multi30k_slice: dict[str, Path], tmp_path: Path,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    feature = tmp_path / "per-word.yaml"
    feature.write_text(yaml.safe_dump(pretrained("hf", pretrained_models["hf"], per_word=True)), encoding="utf-8")
    output = tmp_path / "table.gz"
    command = ["score-table", multi30k_slice["phrase_table"], "--feature", feature, "-o", output]
    code, err = run(command, capsys)
    assert code == 2 and one_line_error(err).endswith("got kind hf with per_word")
    feature.write_text(yaml.safe_dump(pretrained("hf", pretrained_models["hf"])), encoding="utf-8")
    code, err = run([*command, "--ray", "local"], capsys)
    assert code == 2 and "--ray scores with a model of rerank train's (--model), not with --feature" in err
    with pytest.raises(SystemExit) as exited:
        run([*command[:2], "--model", pretrained_models["hf"], *command[2:]], capsys)
    assert exited.value.code == 2 and "argument --feature: not allowed with argument --model" in capsys.readouterr().err
    assert not output.exists()
