"""The command line: a mistyped command or option is an error (exit 2) that names the closest known one, said
first, before a one-line usage; no option is taken for another by its first letters; and torch's threads wait
asleep unless the user said otherwise."""

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
    (["apply", "x", "--wieghts", "w.yaml"], "unrecognized option --wieghts (did you mean '--weights'?)"),
    (["apply", "x", "--weights=w.yaml", "--nbset-out=y"], "(did you mean '--nbest-out'?)"),
])
def test_a_mistyped_command_line(argv: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as stop:
        main(argv)
    assert stop.value.code == 2
    assert message in capsys.readouterr().err


@pytest.mark.parametrize("argv, message", [
    (["tune", "--optimiser", "pro", "--nbest", "x", "-r", "y", "-o", "z"],
     "rerank tune: error: unrecognized option --optimiser (did you mean '--optimizer'?)"),
    (["translate", "--beam", "0", "--model", "m"],
     "rerank translate: error: argument --beam: expected a positive integer, got 0"),
    (["translate", "-i", "x"], "rerank translate: error: the following arguments are required: --model"),
    (["tnue"], "rerank: error: argument COMMAND: invalid choice: 'tnue' (did you mean 'tune'?)"),
])
def test_the_error_comes_first_and_the_usage_is_one_line(argv: list[str], message: str,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as stop:
        main(argv)
    assert stop.value.code == 2
    error, usage = capsys.readouterr().err.splitlines()
    assert error.startswith(message)
    command = message.split(": error")[0]
    assert usage == f"usage: {command} [-h] ... (see {command} --help)"


@pytest.mark.parametrize("argv, option, meant", [
    (["score-nbest", "x", "-o", "y", "--word-penalt", "1"], "--word-penalt", "--word-penalty"),
    (["tune", "--nbest", "x", "-r", "y", "-o", "z", "--optim", "pro"], "--optim", "--optimizer"),
    (["evaluate", "x", "-r", "y", "--lower"], "--lower", "--lowercase"),
])
def test_an_option_is_never_taken_for_another_by_its_start(argv: list[str], option: str, meant: str,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as stop:
        main(argv)
    assert stop.value.code == 2
    assert f"unrecognized option {option} (did you mean {meant!r}?)" in capsys.readouterr().err


def test_no_parser_takes_abbreviations() -> None:
    from rerank.cli import build_parser

    parser = build_parser()
    subparsers = next(a for a in parser._actions if a.dest == "command")
    assert parser.allow_abbrev is False
    assert all(sub.allow_abbrev is False for sub in subparsers.choices.values())  # type: ignore[union-attr]


def test_torch_threads_wait_asleep_unless_told_otherwise(monkeypatch: pytest.MonkeyPatch) -> None:
    """Spinning OpenMP threads on a shared machine cost many times the CPU of the work: the CLI asks for passive
    waiting before torch loads, and leaves a policy the user set alone."""
    monkeypatch.delenv("OMP_WAIT_POLICY", raising=False)
    assert main(["-q", "evaluate", str(TOY / "toy.1best"), "-r", str(TOY / "toy.fr")]) == 0
    assert os.environ["OMP_WAIT_POLICY"] == "PASSIVE"
    monkeypatch.setenv("OMP_WAIT_POLICY", "ACTIVE")
    assert main(["-q", "evaluate", str(TOY / "toy.1best"), "-r", str(TOY / "toy.fr")]) == 0
    assert os.environ["OMP_WAIT_POLICY"] == "ACTIVE"
