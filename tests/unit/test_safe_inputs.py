"""Hostile inputs through the command line: a YAML alias bomb as weights or config, numbers that are not finite
in YAML, a moses.ini, flags and configs; each refused with exit status 2 naming where it came from, before any
work."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from helpers import BOMB, write

from rerank.cli import main

DATA = Path(__file__).resolve().parents[1] / "data"


@pytest.mark.parametrize("command", ["weights", "config"])
def test_the_bomb_as_weights_or_config_is_exit_status_2(command: str, tmp_path: Path, capsys) -> None:
    bomb = write(tmp_path, "bomb.yaml", BOMB)
    nbest = str(DATA / "toy.nbest")
    argv = (["apply", nbest, "--weights", str(bomb)] if command == "weights"
            else ["score-nbest", nbest, "--config", str(bomb)])
    assert main(argv) == 2
    assert "repeat more than 10,000 values" in capsys.readouterr().err


@pytest.mark.parametrize("value", ["nan", ".nan", ".inf", "-.inf"])
def test_non_finite_weights_in_yaml(value: str, tmp_path: Path, capsys) -> None:
    weights = write(tmp_path, "w.yaml", (DATA / "weights.yaml").read_text().replace("0.15949", value))
    code = main(["apply", str(DATA / "toy.nbest"), "--weights", str(weights)])
    err = capsys.readouterr().err
    if value == "nan":  # a string in YAML, not a number
        assert code == 2 and "expected a number" in err
    else:
        assert code == 2 and "w.yaml: 'LM0': expected finite numbers" in err


@pytest.mark.parametrize("argv, message", [
    (["--weight", "LM0=nan"], "--weight 'LM0=nan'"),
    (["--weight", "LM0=inf"], "--weight 'LM0=inf'"),
    (["--missing-weight", "nan"], "--missing-weight: expected a finite number"),
    (["--missing-weight=-inf"], "--missing-weight: expected a finite number"),
])
def test_non_finite_weights_on_the_command_line(argv: list[str], message: str, capsys) -> None:
    full = ["apply", str(DATA / "toy.nbest"), "--weights", str(DATA / "weights.yaml"), *argv]
    with pytest.raises(SystemExit) as exit_:
        code = main(full)
        raise SystemExit(code)
    assert exit_.value.code == 2 and message in capsys.readouterr().err


def test_non_finite_weights_in_a_moses_ini(tmp_path: Path, capsys) -> None:
    ini = write(tmp_path, "moses.ini", "[weight]\nLM0= nan\nWordPenalty0= -1\n")
    assert main(["apply", str(DATA / "toy.nbest"), "--weights", str(ini), "--missing-weight", "0"]) == 2
    assert "moses.ini:2: expected finite numbers after 'LM0='" in capsys.readouterr().err


@pytest.mark.parametrize("bounds", ["nan..1", "-inf..1", "0..inf"])
def test_non_finite_ranges(bounds: str, tmp_path: Path, capsys) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["tune", "--nbest", str(DATA / "toy.nbest"), "-r", str(DATA / "toy.fr"), "-o", str(tmp_path / "w.yaml"),
              "--range", f"LM0:{bounds}"])
    assert exit_.value.code == 2 and "finite bounds" in capsys.readouterr().err


def test_non_finite_config_numbers(tmp_path: Path, capsys) -> None:
    config = write(tmp_path, "tune.yaml", "loop:\n  min_change: .nan\n")
    assert main(["tune", "--nbest", str(DATA / "toy.nbest"), "-r", str(DATA / "toy.fr"), "-o",
                 str(tmp_path / "w.yaml"), "--config", str(config)]) == 2
    assert "tune.yaml: 'loop.min_change': expected a finite number" in capsys.readouterr().err


def test_a_table_weight_must_be_finite(tmp_path: Path, capsys) -> None:
    shutil.copy(DATA / "toy.nbest", tmp_path / "x")
    with pytest.raises(SystemExit) as exit_:
        main(["merge-shards", str(tmp_path / "x"), "-o", str(tmp_path / "y"), "--weight", "inf"])
    assert exit_.value.code == 2 and "expected a finite number" in capsys.readouterr().err
