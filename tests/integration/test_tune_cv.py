"""``rerank tune --cv``: the cross-validated BLEU printed and written as JSON beside the weights; settings chosen by
it; MERT's runs chosen by held-out folds; ties and seed averaging from the command line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from rerank.cli import main

FIXTURES = Path(__file__).resolve().parents[1] / "data" / "tune"


@pytest.fixture
def lists(regression_slice):
    data = regression_slice / "tests/mert.extractor-txt/data"
    return {"nbest": [str(data / "nbest.1.gz"), str(data / "nbest.2.gz")], "reference": str(data / "reference")}


def tune(lists, output: Path, *extra: str) -> int:
    return main(["tune", "--nbest", *lists["nbest"], "-r", lists["reference"], "-o", str(output),
                 "--init", str(FIXTURES / "init.yaml"), "--restarts", "2", *extra])


def test_cv_writes_the_held_out_figures_beside_the_same_weights(lists, tmp_path, capsys):
    assert tune(lists, tmp_path / "plain.yaml") == 0
    assert tune(lists, tmp_path / "w.yaml", "--cv", "3", "--cv-seed", "2") == 0
    out = capsys.readouterr().out
    assert (tmp_path / "w.yaml").read_text() == (tmp_path / "plain.yaml").read_text()  # the tuning is the same
    report = json.loads((tmp_path / "w.cv.json").read_text())
    assert report["folds"] == 3 and report["seed"] == 2 and sum(report["fold_sizes"]) == 10
    assert len(report["fold_bleu"]) == 3 and 0 <= report["bleu"] <= 100 and report["chosen"] is None
    assert f"3-fold cross-validated BLEU {report['bleu']:.2f}" in out
    assert f"tuning set BLEU {report['tuning_bleu']:.2f}" in out


def test_choose_picks_a_setting_by_the_held_out_bleu(lists, tmp_path, capsys):
    output = tmp_path / "w.yaml"
    assert tune(lists, output, "--optimizer", "pro", "--cv", "2", "--choose", "pro.l2=0.01,100",
                "--cv-output", str(tmp_path / "cv.json")) == 0
    report = json.loads((tmp_path / "cv.json").read_text())
    assert set(report["candidates"]) == {"pro.l2=0.01", "pro.l2=100"}
    best = max(report["candidates"], key=lambda name: report["candidates"][name]["bleu"])
    assert report["chosen"] == best and report["bleu"] == report["candidates"][best]["bleu"]
    assert f"chosen: {best}" in capsys.readouterr().out


def test_tie_shares_one_weight_among_its_features(lists, tmp_path):
    output = tmp_path / "w.yaml"
    assert tune(lists, output, "--tie", "LMW=lm+w", "--average-seeds", "2") == 0
    weights = yaml.safe_load(output.read_text())
    assert set(weights) == {"d", "lm", "tm", "w"}  # the list's own labels: rerank apply uses them as they are
    assert weights["lm"] == pytest.approx(weights["w"])


def test_restart_folds_choose_mert_runs_inside_each_cross_validation_part(lists, tmp_path, capsys):
    """--restart-folds K: MERT keeps the run of the held-out folds' best starting point, on all sentences and on
    each outer fold's training part; the same seed gives the same weights."""
    assert tune(lists, tmp_path / "a.yaml", "--restarts", "4", "--restart-folds", "3", "--seed", "2") == 0
    assert tune(lists, tmp_path / "b.yaml", "--restarts", "4", "--restart-folds", "3", "--seed", "2", "--cv", "2") == 0
    assert (tmp_path / "a.yaml").read_text() == (tmp_path / "b.yaml").read_text()
    assert json.loads((tmp_path / "b.cv.json").read_text())["folds"] == 2
    assert capsys.readouterr().err.count("chosen by 3 held-out folds") == 1 + 1 + 2  # a; b and its 2 parts


@pytest.mark.parametrize("extra, message", [
    (["--cv-output", "x.json"], "--cv-output is written by cross-validation: give --cv K"),
    (["--cv", "11"], "cross-validation needs 2 to 10 folds"),
    (["--restart-folds", "11"], "mert.restart_folds needs 2 to 10 folds"),
    (["--restart-folds", "6", "--cv", "2"],
     "mert.restart_folds (on the 5 sentences of a cross-validation part) needs 2 to 5 folds"),
    (["--tie", "X=lm+nothing"], "tie X: the n-best list has no feature nothing"),
    (["--config", str(FIXTURES / "init.yaml")], "unknown key 'd'"),
])
def test_bad_cv_and_tie_options_are_one_clear_error(lists, tmp_path, capsys, extra, message):
    assert tune(lists, tmp_path / "w.yaml", *extra) == 2
    assert message in capsys.readouterr().err


def test_an_unknown_optimizer_in_a_config_names_the_file(lists, tmp_path, capsys):
    config = tmp_path / "tune.yaml"
    config.write_text("optimizer: sgd\n")
    assert tune(lists, tmp_path / "w.yaml", "--config", str(config)) == 2
    assert f"{config}: optimizer: expected one of mert, pro, mira, got 'sgd'" in capsys.readouterr().err


def test_one_fold_is_refused_by_the_parser(lists, tmp_path, capsys):
    with pytest.raises(SystemExit) as stopped:
        tune(lists, tmp_path / "w.yaml", "--cv", "1")
    assert stopped.value.code == 2 and "argument --cv: expected at least 2 folds, got 1" in capsys.readouterr().err


def test_cv_is_for_fixed_lists(tmp_path, capsys):
    assert main(["tune", "--decoder", "true", "--source", str(FIXTURES / "init.yaml"), "-r",
                 str(FIXTURES / "init.yaml"), "--init", str(FIXTURES / "init.yaml"), "-o", str(tmp_path / "w.yaml"),
                 "--cv", "3"]) == 2
    assert "cross-validation and --average-seeds are for fixed n-best lists" in capsys.readouterr().err
