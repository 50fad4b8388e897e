"""Config dataclasses from YAML: every key checked, errors with the dotted path and the file; YAML read safely
(aliases within a budget, none inside its own anchor, duplicate keys and syntax errors named at their line)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import pytest
import yaml
from helpers import BOMB, write

from rerank.config import from_dict, load_config, load_yaml
from rerank.errors import ConfigError, FormatError
from rerank.models.checkpoint import save_config

REPO = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class Attention:
    kind: Literal["additive", "dot"] = "additive"
    size: int = 8


@dataclass(frozen=True)
class Model:
    name: str
    attention: Attention = field(default_factory=Attention)
    dropout: float = 0.1
    layers: tuple[int, ...] = (1,)
    vocab: str | None = None
    tied: bool = False


def test_defaults_and_nesting() -> None:
    model = from_dict(Model, {"name": "m", "attention": {"kind": "dot"}, "dropout": 0, "layers": [2, 3]})
    assert model == Model("m", Attention("dot", 8), 0.0, (2, 3))
    assert isinstance(model.dropout, float) and isinstance(model.layers, tuple)


@pytest.mark.parametrize("data, message", [
    ({"name": "m", "atention": {}},
     r"c.yaml: unknown key 'atention' \(did you mean 'attention'\?\); known keys here: attention, dropout"),
    ({"name": "m", "attention": {"szie": 8}}, r"unknown key 'attention.szie' \(did you mean 'attention.size'\?\)"),
    ({"name": "m", "colour": 1}, r"unknown key 'colour'; known keys here"),  # nothing close: no guess
    ({"name": "m", "attention": {"kind": "luong"}}, r"'attention.kind': expected one of 'additive', 'dot'"),
    ({"name": "m", "attention": {"kind": "dott"}}, r"got 'dott' \(did you mean 'dot'\?\)"),
    ({"name": "m", "attention": {"size": "8"}}, r"'attention.size': expected an integer, got '8'"),
    ({"name": "m", "attention": {"size": True}}, r"'attention.size': expected an integer"),
    ({"name": "m", "dropout": "high"}, r"'dropout': expected a number"),
    ({"name": "m", "layers": 3}, r"'layers': expected a list"),
    ({"name": "m", "layers": [1, "x"]}, r"'layers\[1\]': expected an integer"),
    ({"name": "m", "vocab": 3}, r"'vocab': expected a string"),
    ({"name": "m", "tied": "yes"}, r"'tied': expected true or false"),
    ({}, r"missing required key 'name'"),
    ([1], r"top level: expected a mapping"),
])
def test_errors_name_the_key(data: object, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        from_dict(Model, data, source="c.yaml")


def test_save_and_load_round_trip(tmp_path: Path) -> None:
    model = Model("m", Attention("dot", 4), 0.3, (2, 2), "v.json", True)
    save_config(model, tmp_path / "c.yaml")
    assert load_config(Model, tmp_path / "c.yaml") == model


def test_invalid_yaml_names_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text("name: m\nlayers: [1,\n")
    with pytest.raises(ConfigError, match=r"c.yaml:3: invalid YAML"):
        load_yaml(path)


def test_non_utf8_yaml(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    path.write_bytes(b"name: m\nvocab: f\xfcr\n")
    with pytest.raises(FormatError, match=r"c.yaml:2: expected UTF-8 text"):
        load_yaml(path)


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read"):
        load_yaml(tmp_path / "none.yaml")


def test_flags_override_a_config_by_dotted_key_and_unset_flags_leave_it() -> None:
    from rerank.config import with_overrides
    from rerank.tune.config import TuneConfig

    base = TuneConfig()
    config = with_overrides(base, {"optimizer": "pro", "seed": None, "mert.restarts": 3, "bleu.tokenize": "13a"})
    assert (config.optimizer, config.seed, config.mert.restarts, config.bleu.tokenize) == \
        ("pro", base.seed, 3, "13a")
    assert config.pro == base.pro and config.loop == base.loop
    with pytest.raises(ConfigError, match=r"^the command line: mert.restarts: expected an integer of at least 1, got"):
        with_overrides(base, {"mert.restarts": -1})
    with pytest.raises(ConfigError, match=r"^the command line: cv.folds: expected 0 \(none\) or at least 2, got 1$"):
        with_overrides(base, {"cv.folds": 1})


def test_a_config_that_cannot_be_written_leaves_the_old_file_whole(tmp_path: Path) -> None:
    path = tmp_path / "config.yaml"
    save_config(Model("m", Attention("dot", 4), 0.3, (2, 2), "v.json", True), path)
    before = path.read_bytes()
    with pytest.raises(Exception, match="cannot represent"):
        save_config({"model": {object()}}, path)  # YAML has no way to write it
    assert path.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["config.yaml"]


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
