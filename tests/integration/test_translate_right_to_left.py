"""`rerank translate --r2l-model`: the beam's hypotheses reranked by left-to-right and right-to-left models
together, checked against the combined score computed apart over the plain search's n-best list."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
import torch
from tiny_models import save_model_dir, teach, tiny_config, tiny_model

from rerank.cli import main
from rerank.formats.files import read_text
from rerank.formats.nbest import group_by_sentence, read_nbest
from rerank.models.vocab import Vocabulary
from rerank.scoring.pairs import Scorer

TOY = Path(__file__).resolve().parents[2] / "tests" / "data"
BEAM = 4


def vocabularies() -> tuple[Vocabulary, Vocabulary]:
    read = lambda name: [line.split() for line in read_text(TOY / name)]  # noqa: E731
    return Vocabulary.build(read("toy.en"), 100), Vocabulary.build(read("toy.fr"), 100)


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A left-to-right RNNsearch that has learnt a little of the toy pairs, and a random right-to-left one."""
    src_vocab, trg_vocab = vocabularies()
    pairs = ([src_vocab.encode(line.split()) for line in read_text(TOY / "toy.en")],
             [trg_vocab.encode(line.split()) for line in read_text(TOY / "toy.fr")])
    l2r = teach(tiny_model(tiny_config(), len(src_vocab), len(trg_vocab), dtype=torch.float32, biases={}),
                [pairs] * 10)
    r2l = tiny_model(dataclasses.replace(tiny_config(), reverse_target=True), len(src_vocab), len(trg_vocab),
                     seed=5, dtype=torch.float32)
    directory = tmp_path_factory.mktemp("models")
    return (save_model_dir(directory / "l2r", l2r, src_vocab, trg_vocab),
            save_model_dir(directory / "r2l", r2l, src_vocab, trg_vocab))


def translate(l2r: Path, output: Path, *options: str) -> int:
    return main(["-q", "translate", "--model", str(l2r), "-i", str(TOY / "toy.en"), "-o", str(output),
                 "--beam", str(BEAM), *options])


@pytest.mark.parametrize(("penalty", "weight"), [("average", "0.3"), ("none", "0.8"), ("wu", "0.5")])
def test_the_best_hypothesis_maximises_the_combined_score(models: tuple[Path, Path], tmp_path: Path, penalty: str,
                                                          weight: str) -> None:
    l2r, r2l = models
    assert translate(l2r, tmp_path / "plain.nbest", "--nbest", str(BEAM), "--length-penalty", penalty) == 0
    assert translate(l2r, tmp_path / "both.txt", "--length-penalty", penalty, "--r2l-model", str(r2l),
                     "--r2l-weight", weight) == 0
    assert translate(l2r, tmp_path / "both.nbest", "--nbest", "3", "--length-penalty", penalty,
                     "--r2l-model", str(r2l), "--r2l-weight", weight) == 0
    sources = [line.split() for line in read_text(TOY / "toy.en")]
    scorer = Scorer.load(r2l)
    w = float(weight)
    best, values = [], {}
    for sentence_id, entries in group_by_sentence(read_nbest(tmp_path / "plain.nbest")):
        r2l_scores = list(scorer.score([(sources[sentence_id], e.tokens) for e in entries]))
        lp = [1.0 if penalty == "none" else len(e.tokens) + 1.0 if penalty == "average" else
              ((5 + len(e.tokens) + 1) / 6) ** 0.6 for e in entries]
        combined = [(1 - w) * e.dense[0] / p + w * r / p for e, r, p in zip(entries, r2l_scores, lp, strict=True)]
        best.append(entries[max(range(len(entries)), key=lambda i: (combined[i], -i))].hypothesis)
        values.update({(sentence_id, e.hypothesis): (r, c) for e, r, c in zip(entries, r2l_scores, combined,
                                                                                strict=True)})
    assert read_text(tmp_path / "both.txt") == best
    reranked = list(read_nbest(tmp_path / "both.nbest"))
    assert [e.layout.labels for e in reranked[:1]] == [("RNNsearch0", "R2L0")]
    for sentence_id, entries in group_by_sentence(reranked):
        assert len(entries) == 3 and entries[0].hypothesis == best[sentence_id]
        assert [e.total for e in entries] == sorted((e.total for e in entries), reverse=True)
        for e in entries:
            r, c = values[(sentence_id, e.hypothesis)]
            assert e.dense[1] == pytest.approx(r, rel=1e-5) and e.total == pytest.approx(c, rel=1e-5)


def test_weight_zero_keeps_the_best_of_the_search_s_nbest_list(models: tuple[Path, Path], tmp_path: Path) -> None:
    """The reranked list is the beam's K best (a search for the 1-best alone may stop sooner, on another)."""
    l2r, r2l = models
    assert translate(l2r, tmp_path / "plain.nbest", "--length-penalty", "average", "--nbest", str(BEAM)) == 0
    assert translate(l2r, tmp_path / "both.txt", "--length-penalty", "average", "--r2l-model", str(r2l),
                     "--r2l-weight", "0") == 0
    firsts = [entries[0].hypothesis for _, entries in group_by_sentence(read_nbest(tmp_path / "plain.nbest"))]
    assert read_text(tmp_path / "both.txt") == firsts


@pytest.mark.parametrize(("swap", "options", "message"), [
    (True, [], "--model"),
    (False, ["--r2l-weight", "1.5"], "between 0 and 1"),
    (False, ["--weights", str(TOY / "weights.yaml")], "--r2l-model with --weights"),
])
def test_models_in_the_wrong_direction_and_bad_options(models: tuple[Path, Path], tmp_path: Path,
                                                       capsys: pytest.CaptureFixture[str], swap: bool,
                                                       options: list[str], message: str) -> None:
    l2r, r2l = models
    first, second = (r2l, l2r) if swap else (l2r, r2l)
    assert translate(first, tmp_path / "out", "--r2l-model", str(second), *options) == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_a_left_to_right_model_as_r2l_model_is_refused(models: tuple[Path, Path], tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    l2r, _ = models
    assert translate(l2r, tmp_path / "out", "--r2l-model", str(l2r)) == 2
    assert f"--r2l-model {l2r}: expected a model that reads targets right to left" in capsys.readouterr().err


def test_r2l_weight_without_r2l_models(models: tuple[Path, Path], tmp_path: Path,
                                       capsys: pytest.CaptureFixture[str]) -> None:
    assert translate(models[0], tmp_path / "out", "--r2l-weight", "0.5") == 2
    assert "--r2l-weight is the weight of the --r2l-model models" in capsys.readouterr().err
