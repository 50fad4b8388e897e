"""The command line: a mistyped command or option is an error (exit 2) that names the closest known one, and
torch's threads wait asleep unless the user said otherwise."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from rerank.cli import main

TOY = Path(__file__).resolve().parents[1] / "data"


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


def test_torch_threads_wait_asleep_unless_told_otherwise(monkeypatch: pytest.MonkeyPatch) -> None:
    """Spinning OpenMP threads on a shared machine cost many times the CPU of the work: the CLI asks for passive
    waiting before torch loads, and leaves a policy the user set alone."""
    monkeypatch.delenv("OMP_WAIT_POLICY", raising=False)
    assert main(["-q", "evaluate", str(TOY / "toy.1best"), "-r", str(TOY / "toy.fr")]) == 0
    assert os.environ["OMP_WAIT_POLICY"] == "PASSIVE"
    monkeypatch.setenv("OMP_WAIT_POLICY", "ACTIVE")
    assert main(["-q", "evaluate", str(TOY / "toy.1best"), "-r", str(TOY / "toy.fr")]) == 0
    assert os.environ["OMP_WAIT_POLICY"] == "ACTIVE"
