"""A NaN or infinite score is never written into a Moses file: every command that writes scores (n-best
features, totals, translations' n-best lists, tuned weights) stops with exit status 2, names the line or
sentence and the feature, and leaves no output behind. The scores come from a model whose output bias
is NaN, as a diverged training leaves it, or from weights whose products overflow."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
import torch
import yaml
from helpers import leftovers
from tiny_models import output_layer, save_model_dir, tiny_config, tiny_model

from rerank.cli import main
from rerank.errors import NonFiniteScore
from rerank.formats.nbest import NBestEntry, read_nbest
from rerank.formats.weights import save_weights
from rerank.models.vocab import Vocabulary

TEST_DATA = Path(__file__).resolve().parents[1] / "data"


def run(argv: list[object], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    code = main([str(a) for a in argv])
    return code, capsys.readouterr().err


@pytest.fixture(scope="module")
def broken_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny model over the toy data's words whose every log-probability is NaN."""
    source = Vocabulary.build((line.split() for line in (TEST_DATA / "toy.en").read_text().splitlines()), 50)
    target = Vocabulary.build((entry.tokens for entry in read_nbest(TEST_DATA / "toy.nbest")), 50)
    model = tiny_model(tiny_config("rnnsearch"), len(source), len(target), dtype=torch.float32)
    with torch.no_grad():
        output_layer(model).bias.fill_(float("nan"))
    return save_model_dir(tmp_path_factory.mktemp("model") / "broken", model, source, target)


def test_score_nbest_refuses_a_nan_feature(broken_model: Path, tmp_path: Path,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    config = tmp_path / "rescore.yaml"
    config.write_text(yaml.safe_dump({"features": [{"kind": "nmt", "model": str(broken_model), "name": "RNN1"}]}))
    out = tmp_path / "scored.nbest"
    nbest = TEST_DATA / "toy.nbest"
    code, err = run(["score-nbest", nbest, "--source", TEST_DATA / "toy.en", "--config", config, "-o", out], capsys)
    assert code == 2, err
    assert f"rerank: error: {nbest}: line 1 (sentence 0): RNN1 is nan, not a finite number; nothing was written" in err
    assert "Traceback" not in err
    assert not out.exists() and leftovers(tmp_path) == []


def test_translate_refuses_a_nan_score_in_its_nbest_list(broken_model: Path, tmp_path: Path,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "out.nbest"
    code, err = run(["translate", "--model", broken_model, "-i", TEST_DATA / "toy.en", "-o", out, "--nbest", 3,
                     "--beam", 3], capsys)
    assert code == 2, err
    assert "rerank: error: sentence 0 (line 1 of the input)" in err and "Traceback" not in err
    assert not out.exists() and leftovers(tmp_path) == []
    # the greedy search finds words, whose ln p is NaN; the 1-best output refuses them too
    code, err = run(["translate", "--model", broken_model, "-i", TEST_DATA / "toy.en", "-o", out, "--beam", 1],
                    capsys)
    assert code == 2, err
    assert "rerank: error: sentence 0 (line 1 of the input), hypothesis '" in err and "is nan, not a finite" in err
    assert not out.exists() and leftovers(tmp_path) == []


@pytest.mark.parametrize("resort", [True, False], ids=["with --nbest-out", "1-best only"])
def test_apply_refuses_a_total_that_overflows(resort: bool, tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    """No hypothesis is chosen on a score that is not a number, whether or not the list is written."""
    nbest = TEST_DATA / "toy.nbest"
    first = next(iter(read_nbest(nbest)))
    weights = {label: [1e308] * size for label, size in zip(first.layout.labels, first.layout.sizes, strict=True)}
    weights_file = tmp_path / "weights.yaml"
    weights_file.write_text(yaml.safe_dump(weights))
    out, resorted = tmp_path / "1best", tmp_path / "resorted.nbest"
    code, err = run(["apply", nbest, "--weights", weights_file, "-o", out,
                     *(["--nbest-out", resorted] if resort else [])], capsys)
    assert code == 2, err
    assert f"rerank: error: {nbest}: line 1 (sentence 0): the total score is " in err
    assert "not a finite number; nothing was written" in err and "Warning" not in err
    assert not out.exists() and not resorted.exists() and leftovers(tmp_path) == []


@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf])
def test_every_nbest_writer_refuses_a_non_finite_value(value: float) -> None:
    """NBestEntry.build writes translate's, forced decoding's and the union's lines; with_features
    score-nbest's; with_total apply's and the reranked lists'."""
    with pytest.raises(NonFiniteScore, match=r"sentence 4, hypothesis 'un chat': LM0 is (nan|-?inf)"):
        NBestEntry.build(4, ["un", "chat"], [("TM0", (0.5, -1.0)), ("LM0", (value,))], 0.0)
    with pytest.raises(NonFiniteScore, match="sentence 4, hypothesis 'un chat': the total score is"):
        NBestEntry.build(4, ["un", "chat"], [("LM0", (-2.0,))], value)
    entry = next(iter(read_nbest(TEST_DATA / "toy.nbest")))
    layout = entry.layout.extended(["RNN0"], [2])
    with pytest.raises(NonFiniteScore, match=r"line 1 \(sentence 0\): RNN0 is"):
        entry.with_features([("RNN0", (1.0, value))], layout)
    with pytest.raises(NonFiniteScore, match=r"line 1 \(sentence 0\): the total score is"):
        entry.with_total(value)


def test_tuned_weights_that_are_not_finite_are_not_written(tmp_path: Path) -> None:
    path = tmp_path / "weights.yaml"
    with pytest.raises(NonFiniteScore, match=f"{path}: the weight of LM0 is nan"):
        save_weights({"TM0": [0.1, 0.2], "LM0": [float(np.float64("nan"))]}, path)
    assert not path.exists() and leftovers(tmp_path) == []
