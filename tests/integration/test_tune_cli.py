"""``rerank tune`` on fixed n-best lists: outputs, reproducibility, and the errors a user sees."""

from __future__ import annotations

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
    return main(["tune", "--nbest", *lists["nbest"], "-r", lists["reference"], "-o", str(output), *extra])


def flat(weights: dict) -> list[float]:
    return [v for value in weights.values() for v in (value if isinstance(value, list) else [value])]


def test_mert_writes_weights_and_a_moses_ini(lists, tmp_path, capsys):
    output = tmp_path / "tuned.yaml"
    assert tune(lists, output, "--moses-ini", str(FIXTURES / "moses.ini"), "--restarts", "4") == 0
    out = capsys.readouterr().out
    assert "tuning set BLEU (MERT, 2 n-best list(s)" in out and "BLEU = " in out
    assert "nrefs:1|case:mixed|eff:no|tok:none|smooth:exp|version:" in out
    weights = yaml.safe_load(output.read_text())
    assert list(weights) == ["d", "lm", "tm", "w"] and len(weights["d"]) == 7 and len(weights["tm"]) == 5
    assert sum(abs(v) for v in flat(weights)) == pytest.approx(1.0)
    ini = (tmp_path / "tuned.moses.ini").read_text().splitlines()
    original = (FIXTURES / "moses.ini").read_text().splitlines()
    assert ini[:5] == original[:5] and ini[-1] == "UnknownWordPenalty0= 1"  # the rest is kept as it was
    assert ini[5] == "d= " + " ".join(f"{v:.10g}" for v in weights["d"])


def test_activate_tunes_one_value_and_the_others_keep_their_starting_ratios(lists, tmp_path, capsys):
    output = tmp_path / "tuned.yaml"
    assert tune(lists, output, "--moses-ini", str(FIXTURES / "moses.ini"), "--restarts", "4",
                "--activate", "tm_4,w") == 0
    weights = flat(yaml.safe_load(output.read_text()))
    start = flat(yaml.safe_load((FIXTURES / "init.yaml").read_text()))
    tuned = [12, 13]  # tm's fifth value and w
    held = [i for i in range(len(start)) if i not in tuned]
    scale = weights[0] / start[0]
    assert scale > 0 and [weights[i] for i in held] == pytest.approx([scale * start[i] for i in held])
    assert weights[12] / scale != pytest.approx(start[12])  # tuned, it moved
    assert sum(abs(v) for v in weights) == pytest.approx(1.0)
    assert tune(lists, tmp_path / "bad.yaml", "--init", str(FIXTURES / "init.yaml"), "--activate", "tm_9") == 2
    err = capsys.readouterr().err
    assert "activate tm_9: not a feature or value of the n-best list (those are d_0, " in err
    assert not (tmp_path / "bad.yaml").exists()


def test_the_same_seed_gives_the_same_weights(lists, tmp_path):
    for name in ("a.yaml", "b.yaml"):
        assert tune(lists, tmp_path / name, "--init", str(FIXTURES / "init.yaml"), "--restarts", "3",
                    "--random-directions", "2", "--seed", "7") == 0
    assert (tmp_path / "a.yaml").read_text() == (tmp_path / "b.yaml").read_text()


@pytest.mark.parametrize("optimizer", ["pro", "mira"])
def test_pro_and_mira(lists, tmp_path, capsys, optimizer):
    config = tmp_path / "tune.yaml"
    config.write_text("mira:\n  epochs: 10\npro:\n  samples: 1000\n")
    assert tune(lists, tmp_path / "w.yaml", "--optimizer", optimizer, "--config", str(config),
                "--init", str(FIXTURES / "init.yaml")) == 0
    assert f"({optimizer.upper()}, " in capsys.readouterr().out


def test_the_config_file_in_the_repository_is_the_defaults():
    from rerank.config import load_config
    from rerank.tune.config import TuneConfig

    path = Path(__file__).resolve().parents[2] / "configs" / "tuning" / "tune.yaml"
    assert load_config(TuneConfig, path) == TuneConfig()


def test_reference_with_other_number_of_lines(lists, tmp_path, capsys):
    short = tmp_path / "short.ref"
    short.write_text("".join(Path(lists["reference"]).read_text().splitlines(keepends=True)[:9]))
    lists = {**lists, "reference": str(short)}
    assert tune(lists, tmp_path / "w.yaml") == 2
    assert "nbest.1.gz:901: expected sentence ids below 9, as " in capsys.readouterr().err


def test_weights_file_naming_unknown_features(lists, tmp_path, capsys):
    init = tmp_path / "init.yaml"
    init.write_text((FIXTURES / "init.yaml").read_text() + "RNN0: 0.3\n")
    assert tune(lists, tmp_path / "w.yaml", "--init", str(init)) == 2
    assert "init.yaml:6: expected weights for features of the n-best list (d, lm, tm, w), got 'RNN0'" \
        in capsys.readouterr().err


def test_unknown_config_key(lists, tmp_path, capsys):
    config = tmp_path / "tune.yaml"
    config.write_text("mert:\n  restart: 3\n")
    assert tune(lists, tmp_path / "w.yaml", "--config", str(config)) == 2
    assert "unknown key 'mert.restart'" in capsys.readouterr().err


def test_second_reference_of_other_length(lists, tmp_path, capsys):
    other = tmp_path / "other.ref"
    other.write_text("one line\n")
    assert main(["tune", "--nbest", lists["nbest"][0], "-r", lists["reference"], "-r", str(other),
                 "-o", str(tmp_path / "w.yaml")]) == 2
    assert "other.ref:2: expected 10 lines, as" in capsys.readouterr().err


@pytest.mark.parametrize("extra, message", [
    (["--seed", "-1"], "the command line: seed: expected an integer of at least 0, got -1"),
    (["--cv", "2", "--cv-seed", "-1"], "the command line: cv.seed: expected an integer of at least 0, got -1"),
    (["--cv", "2", "--choose", "seed=-1,1"], "the command line: cv.choose.seed: expected an integer of at least 0, "
                                             "got -1"),
    (["--cv", "2", "--choose", "pro.l2=-1,1"], "cv.choose.pro.l2: expected a number of at least 0, got -1.0"),
    (["--cv", "3", "--choose", "cv.folds=3,4"], "cv.choose: expected settings of the tuning, not of the "
                                                "cross-validation that chooses them, got 'cv.folds'"),
    (["--tie", "X$(touch PWN)=lm+w"], "--tie X$(touch PWN): feature label 'X$(touch PWN)' must be a letter"),
    (["--cv", "2", "--choose", "pro.l2=0.1,1", "--choose", "pro.l2=10"], "--choose pro.l2 given twice"),
    (["--tie", "A=lm+w", "--tie", "A=tm+d"], "--tie A given twice"),
    (["--range", "lm:0..1", "--range", "lm:-1..1"], "--range lm given twice"),
])
def test_bad_tuning_options_are_one_line_before_any_work(lists, tmp_path, monkeypatch, capsys, extra, message):
    """Out-of-range seeds and choices, a label that is not one and a repeated key: exit 2 and one line naming
    the option, nothing written, nothing run (no traceback from numpy or a label check)."""
    monkeypatch.chdir(tmp_path)
    assert tune(lists, tmp_path / "w.yaml", *extra) == 2
    err = capsys.readouterr().err
    assert err.startswith("rerank: error: ") and message in err and err.count("\n") == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == []  # no weights, no PWN
