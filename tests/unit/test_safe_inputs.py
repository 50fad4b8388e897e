"""Hostile inputs: YAML aliases and duplicate keys, numbers that are not finite, each refused with exit status 2
naming where it came from, before any work."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml

from rerank.cli import main
from rerank.config import load_yaml
from rerank.errors import ConfigError

DATA = Path(__file__).resolve().parents[1] / "data"
BOMB = "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"{chr(98 + i)}: &{chr(98 + i)} [*{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, "
    f"*{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}]\n" for i in range(9))


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_an_alias_bomb_is_refused_at_the_alias_that_passes_the_budget(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"bomb.yaml:5: the YAML aliases \(\*d\) repeat more than 10,000 values"):
        load_yaml(write(tmp_path, "bomb.yaml", BOMB))


def test_aliases_within_the_budget_and_merge_keys_are_read(tmp_path: Path) -> None:
    shared = [1, 2]
    assert load_yaml(write(tmp_path, "dump.yaml", yaml.safe_dump({"a": shared, "b": shared}))) == \
        {"a": [1, 2], "b": [1, 2]}  # safe_dump writes &id001 and *id001 for a shared value
    merged = "base: &b {x: 1, y: 1}\nother:\n  <<: *b\n  x: 2\n"
    assert load_yaml(write(tmp_path, "m.yaml", merged))["other"] == {"x": 2, "y": 1}


def test_a_recursive_alias_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"r.yaml:1: the YAML alias \*a is inside its own anchor's value"):
        load_yaml(write(tmp_path, "r.yaml", "a: &a [1, *a]\n"))


def test_a_duplicate_key_names_both_lines(tmp_path: Path) -> None:
    text = "features:\n  - kind: word-penalty\nbatch_sentences: 8\nfeatures: []\n"
    with pytest.raises(ConfigError, match=r"dup.yaml:4: duplicate key 'features' \(first at line 1\)"):
        load_yaml(write(tmp_path, "dup.yaml", text))
    nested = "a:\n  b: 1\n  c: 2\n  b: 3\n"
    with pytest.raises(ConfigError, match=r"nested.yaml:4: duplicate key 'b' \(first at line 2\)"):
        load_yaml(write(tmp_path, "nested.yaml", nested))


def test_a_syntax_error_names_the_line(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"bad.yaml:3: invalid YAML: mapping values are not allowed here"):
        load_yaml(write(tmp_path, "bad.yaml", "a: 1\nb: 2\n  c: 3\n"))


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
