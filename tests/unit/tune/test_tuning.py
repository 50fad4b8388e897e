"""One tuning run on fixed n-best lists: references read and checked, only the features asked for tuned, the
result's BLEU that of its weights, and the figures written where Moses and the study read them."""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import signal
import time
from pathlib import Path

import pytest
from sacrebleu.metrics import BLEU

from rerank.cli import _terminate
from rerank.config import with_overrides
from rerank.errors import FormatError, RerankError
from rerank.formats.files import committed_together
from rerank.formats.moses_ini import MosesIni
from rerank.formats.weights import save_weights
from rerank.rescore.rerank import rerank_nbest
from rerank.tune.config import TuneConfig
from rerank.tune.tuning import Tuning, read_references, write_cv_report, write_moses_ini

FAST = with_overrides(TuneConfig(), {"mert.restarts": 2})
TUNE = Path(__file__).resolve().parents[2] / "data" / "tune"


def test_references_must_have_as_many_lines_as_the_first(tmp_path: Path) -> None:
    (tmp_path / "a").write_text("x\ny\n")
    (tmp_path / "b").write_text("x\n")
    assert read_references([tmp_path / "a", tmp_path / "a"]) == [["x", "y"], ["x", "y"]]
    with pytest.raises(FormatError, match=r"b:2: expected 2 lines, as .*a has, got '1 lines'"):
        read_references([tmp_path / "a", tmp_path / "b"])


def test_only_the_features_asked_for_are_tuned_and_the_bleu_is_that_of_the_weights(
        multi30k_slice: dict[str, Path], tmp_path: Path) -> None:
    nbest, reference = multi30k_slice["val_nbest"], multi30k_slice["val_reference"]
    result = Tuning([reference], FAST, init=multi30k_slice["moses_ini"]).on_nbest([nbest], ["LM0", "WordPenalty0"])
    assert set(result.weights) == {"Distortion0", "LM0", "WordPenalty0", "PhrasePenalty0", "TranslationModel0"}
    assert result.weights["TranslationModel0"] == (0.0,) * 4 and result.weights["Distortion0"] == (0.0,)
    assert abs(result.weights["LM0"][0]) + abs(result.weights["WordPenalty0"][0]) == pytest.approx(1.0)
    assert (result.nbest_lists, result.cross_validated, result.choice) == (1, None, None)
    weights = {label: tuple(values) for label, values in result.weights.items()}
    rerank_nbest(nbest, weights, tmp_path / "1best")
    hypotheses = (tmp_path / "1best").read_text().splitlines()
    references = reference.read_text().splitlines()
    assert result.bleu.score == pytest.approx(BLEU(tokenize="none").corpus_score(hypotheses, [references]).score)
    assert result.signature == Tuning([reference], FAST).bleu.signature()
    with pytest.raises(RerankError, match="no n-best lists to tune on"):
        Tuning([reference], FAST).on_nbest([])
    with pytest.raises(RerankError, match="a decoder in the loop needs starting weights"):
        Tuning([reference], FAST).with_decoder("moses", multi30k_slice["val_source"], tmp_path / "work")


def test_the_tuned_weights_in_a_moses_ini_and_the_cross_validation_as_json(multi30k_slice: dict[str, Path],
                                                                           tmp_path: Path) -> None:
    nbest, reference, ini = multi30k_slice["val_nbest"], multi30k_slice["val_reference"], multi30k_slice["moses_ini"]
    plain = Tuning([reference], FAST, init=ini).on_nbest([nbest])
    with pytest.raises(RerankError, match="no cross-validation to report"):
        write_cv_report(plain, tmp_path / "cv.json")
    write_moses_ini(MosesIni.read(ini), {**plain.weights, "LM1": (0.5,)}, tmp_path / "moses.ini")
    written = MosesIni.read(tmp_path / "moses.ini").weights()
    assert "LM1" not in written and written["LM0"] == pytest.approx(plain.weights["LM0"])
    crossed = Tuning([reference], with_overrides(FAST, {"cv.folds": 2}), init=ini).on_nbest([nbest])
    assert crossed.cross_validated is not None and crossed.weights == plain.weights  # the same final tuning
    write_cv_report(crossed, tmp_path / "cv.json")
    report = json.loads((tmp_path / "cv.json").read_text())
    assert report["bleu"] == crossed.cross_validated.bleu and report["tuning_bleu"] == crossed.bleu.score
    assert report["chosen"] is None and report["candidates"] == {}


def test_tune_stopped_by_sigterm_before_its_renames_never_says_it_wrote_its_moses_ini(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """``rerank tune``'s last step, its weights and its moses.ini committed together, with a real SIGTERM (rerank's
    handler, which unwinds) after both are written but before their renames: neither is there, and nothing says
    "wrote". Once the renames are made, the moses.ini is said written."""
    ini = MosesIni.read(TUNE / "moses.ini")
    weights = {"lm": (0.25,), "w": (-0.5,)}
    out = tmp_path / "t.moses.ini"
    caplog.set_level(logging.INFO, logger="rerank")
    previous = signal.signal(signal.SIGTERM, _terminate)
    try:
        with pytest.raises(SystemExit), committed_together():
            save_weights(weights, tmp_path / "t.yaml")
            write_moses_ini(ini, weights, out)
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(5)  # the handler raises first
    finally:
        signal.signal(signal.SIGTERM, previous)
    assert list(tmp_path.iterdir()) == [] and "wrote" not in caplog.text
    with committed_together():
        write_moses_ini(ini, weights, out)
        assert "wrote" not in caplog.text
    assert f"wrote {out}" in caplog.text and "lm= 0.25" in out.read_text()


def test_activate_names_are_checked_against_the_starting_weights_before_the_decoder_runs(
        multi30k_slice: dict[str, Path], tmp_path: Path) -> None:
    config = dataclasses.replace(FAST, activate=("TranslationModel0_7",))
    tuning = Tuning([multi30k_slice["val_reference"]], config, init=multi30k_slice["moses_ini"])
    with pytest.raises(RerankError, match=r"activate TranslationModel0_7: not a feature or value of the starting "
                                          r"weights \(those are .*TranslationModel0_3"):
        tuning.with_decoder("no-such-decoder {weights_overwrite}", multi30k_slice["val_source"], tmp_path / "work")
    assert not (tmp_path / "work").exists()
