"""A mistyped command, option or feature kind is an error (exit 2) that names the closest known one."""

from __future__ import annotations

from pathlib import Path

import pytest

from rerank.cli import main
from rerank.errors import did_you_mean


def test_the_closest_name_or_none() -> None:
    assert did_you_mean("score-nbset", ["score-nbest", "score-table"]) == " (did you mean 'score-nbest'?)"
    assert did_you_mean("learnin_rate", ["learning_rate"], "training.") == " (did you mean 'training.learning_rate'?)"
    assert did_you_mean("zzz", ["score-nbest", "tune"]) == ""


@pytest.mark.parametrize("argv, message", [
    (["score-nbset", "x"], "invalid choice: 'score-nbset' (did you mean 'score-nbest'?)"),
    (["tune", "--optimizer", "mertt", "--nbest", "x", "-r", "y", "-o", "z"],
     "invalid choice: 'mertt' (did you mean 'mert'?)"),
    (["apply", "x", "--wieghts", "w.yaml"], "unrecognized arguments: --wieghts w.yaml (did you mean '--weights'?)"),
    (["apply", "x", "--weights=w.yaml", "--nbset-out=y"], "(did you mean '--nbest-out'?)"),
])
def test_a_mistyped_command_line(argv: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as stop:
        main(argv)
    assert stop.value.code == 2
    assert message in capsys.readouterr().err


def test_a_mistyped_feature_kind(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = tmp_path / "rescore.yaml"
    config.write_text("features:\n  - {kind: word-penalti}\n", encoding="utf-8")
    nbest = tmp_path / "x.nbest"
    nbest.write_text("0 ||| a b ||| F0= 1 ||| 1\n", encoding="utf-8")
    assert main(["score-nbest", str(nbest), "--config", str(config), "-o", str(tmp_path / "out")]) == 2
    assert "unknown feature kind 'word-penalti' (did you mean 'word-penalty'?)" in capsys.readouterr().err
