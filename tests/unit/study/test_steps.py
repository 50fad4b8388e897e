"""The study's steps make the files their logged ``rerank`` command lines make, byte for byte."""

from __future__ import annotations

import json
from pathlib import Path

from helpers import content

from rerank.cli import main
from rerank.rescore.cut import cut_nbest
from rerank.study.steps import (
    first_hypotheses_file,
    merge_nbest_file,
    oracle_file,
    rerank_once,
    tuning_work_dir,
)


def test_the_json_of_the_command_is_what_the_experiment_step_writes(tmp_path: Path, test_data: Path) -> None:
    """The experiment logs `rerank oracle ... --json OUT` for its oracle step: that line recreates the file."""
    nbest, reference = test_data / "toy.nbest", test_data / "toy.fr"
    oracle_file(nbest, str(reference), "none", tmp_path / "step.json")
    assert main(["oracle", "-r", str(reference), "--tokenize", "none", str(nbest), "--json",
                 str(tmp_path / "command.json")]) == 0
    assert (tmp_path / "command.json").read_bytes() == (tmp_path / "step.json").read_bytes()
    figures = json.loads((tmp_path / "command.json").read_text())
    assert list(figures) == [str(nbest)] and figures[str(nbest)]["first"] < figures[str(nbest)]["oracle"]


def test_cut_and_merge_are_their_commands(tmp_path: Path, test_data: Path) -> None:
    nbest = test_data / "toy.nbest"
    cut_nbest(nbest, 2, tmp_path / "step.cut")  # the function the study's cut step calls
    assert main(["-q", "cut-nbest", str(nbest), "-n", "2", "-o", str(tmp_path / "command.cut")]) == 0
    assert content(tmp_path / "step.cut") == content(tmp_path / "command.cut")
    assert len(content(tmp_path / "step.cut").splitlines()) == 6
    merge_nbest_file([("Moses", nbest), ("Cut", tmp_path / "step.cut")], tmp_path / "step.merged")
    assert main(["-q", "merge-nbest", f"Moses={nbest}", f"Cut={tmp_path / 'step.cut'}", "-o",
                 str(tmp_path / "command.merged")]) == 0
    assert content(tmp_path / "step.merged") == content(tmp_path / "command.merged")


def test_the_first_hypotheses_are_apply_with_the_models_weight_0(tmp_path: Path, test_data: Path) -> None:
    """A model's n-best list, one feature: the 1-best is each sentence's first hypothesis, the search's best."""
    source = str(test_data / "toy.en")
    lines = [line.split(" ||| ") for line in (test_data / "toy.nbest").read_text(encoding="utf-8").splitlines()]
    nbest = tmp_path / "model.nbest"
    nbest.write_text("".join(f"{s} ||| {hyp} ||| RNNsearch0= {-k} ||| {-k}\n" for k, (s, hyp, *_) in enumerate(lines)),
                     encoding="utf-8")
    first_hypotheses_file(nbest, "RNNsearch0", source, tmp_path / "step.1best")
    assert main(["-q", "apply", str(nbest), "--weight", "RNNsearch0=0", "--source", source, "-o",
                 str(tmp_path / "command.1best")]) == 0
    assert content(tmp_path / "step.1best") == content(tmp_path / "command.1best")
    assert content(tmp_path / "step.1best").decode().splitlines() == [lines[i][1] for i in (0, 3, 6)]


def test_rerank_once_is_apply_with_a_weights_file(tmp_path: Path, test_data: Path) -> None:
    nbest, source = test_data / "toy.nbest", str(test_data / "toy.en")
    weights = tmp_path / "weights.yaml"
    weights.write_text("LM0: 1.0\n", encoding="utf-8")
    rerank_once(nbest, weights, source, tmp_path / "step.1best")
    assert main(["-q", "apply", str(nbest), "--weights", str(weights), "--missing-weight", "0", "--source", source,
                 "-o", str(tmp_path / "command.1best")]) == 0
    assert content(tmp_path / "step.1best") == content(tmp_path / "command.1best")
    assert tuning_work_dir(tmp_path / "run" / "dev.weights.yaml") == tmp_path / "run" / "dev.weights.work"
