"""``rerank train``'s resume hint: the whole command that resumes the run, every option in it, shell-quoted."""

from __future__ import annotations

import shlex

from rerank.cli import parse
from rerank.commands.train import resume_command


def test_the_resume_command_is_whole_and_quoted() -> None:
    argv = ["-q", "train", "--config", "configs/my run.yaml", "--output-dir", "models/en-de quick", "--threads", "2",
            "--seed", "3", "--init-from", "models/en-fr base", "--device", "cuda:1"]
    command = resume_command(parse(argv))
    assert "..." not in command and "…" not in command
    assert shlex.split(command) == ["rerank", *argv]
    assert resume_command(parse(["train", "--config", "c.yaml"])) == "rerank train --config c.yaml"
