"""``rerank oracle``: the corpus BLEU of the best hypothesis per sentence, a local maximum found by sweeps."""

from __future__ import annotations

import itertools
from pathlib import Path

import numpy as np
import pytest
import sacrebleu

from rerank.cli import main
from rerank.tune.data import NBestPool
from rerank.tune.oracle import corpus_statistics, oracle_choice
from rerank.tune.stats import BleuStatistics

REFERENCES = ["a man rides a red bike .", "two dogs play in the snow .", "a girl is reading a book ."]
HYPOTHESES = [
    ["a man rides a bike .", "man rides red bike", "a man rides a red bike", "a person on a bike ."],
    ["dogs play in snow .", "two dogs are playing in the snow .", "two dog play snow"],
    ["a girl reads a book .", "a girl is reading .", "a child is reading a book ."],
]


def write_nbest(path: Path, hypotheses: list[list[str]]) -> Path:
    path.write_text("".join(f"{s} ||| {h} ||| F0= {-k} ||| {-k}\n"
                            for s, sentence in enumerate(hypotheses) for k, h in enumerate(sentence)))
    return path


def pool(path: Path, references: list[str]) -> tuple[BleuStatistics, NBestPool, np.ndarray]:
    bleu = BleuStatistics([references])
    nbest = NBestPool(bleu)
    first = nbest.add(path)
    return bleu, nbest, first


def test_the_oracle_is_the_best_combination(tmp_path: Path) -> None:
    bleu, nbest, first = pool(write_nbest(tmp_path / "nbest", HYPOTHESES), REFERENCES)
    data = nbest.data()
    choice = oracle_choice(data)
    oracle = bleu.score(corpus_statistics(data, choice)).score
    every = [bleu.score(corpus_statistics(data, np.array(c))).score
             for c in itertools.product(*(range(n) for n in data.counts))]
    assert oracle == pytest.approx(max(every))
    assert oracle > bleu.score(corpus_statistics(data, first)).score


def test_a_list_holding_the_references_has_an_oracle_of_100(tmp_path: Path) -> None:
    hypotheses = [sentence + [reference] for sentence, reference in zip(HYPOTHESES, REFERENCES, strict=True)]
    bleu, nbest, _ = pool(write_nbest(tmp_path / "nbest", hypotheses), REFERENCES)
    data = nbest.data()
    choice = oracle_choice(data)
    assert bleu.score(corpus_statistics(data, choice)).score == pytest.approx(100.0)
    assert [nbest.text(s, int(k)) for s, k in enumerate(choice)] == REFERENCES


def test_the_command_prints_first_and_oracle_and_writes_the_oracle(tmp_path: Path,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    nbest = write_nbest(tmp_path / "nbest", HYPOTHESES)
    reference = tmp_path / "ref"
    reference.write_text("\n".join(REFERENCES) + "\n")
    assert main(["oracle", str(nbest), "-r", str(reference), "-o", str(tmp_path / "oracle")]) == 0
    row = [line for line in capsys.readouterr().out.splitlines() if line.startswith(str(nbest))][0].split()
    hyps_per_sentence, first, oracle = map(float, row[1:])
    assert hyps_per_sentence == pytest.approx(10 / 3, abs=0.05) and first < oracle
    # the printed figures and the written choice against sacrebleu, every combination tried
    def bleu(lines: list[str]) -> float:
        return sacrebleu.corpus_bleu(lines, [REFERENCES], tokenize="none").score

    assert first == pytest.approx(bleu([sentence[0] for sentence in HYPOTHESES]), abs=0.01)
    written = (tmp_path / "oracle").read_text()
    chosen = written.split("\n")
    assert written.endswith("\n") and len(chosen) == 4 and chosen[-1] == ""
    assert all(line in sentence for line, sentence in zip(chosen, HYPOTHESES, strict=False))
    best = max(bleu(list(lines)) for lines in itertools.product(*HYPOTHESES))
    assert bleu(chosen[:3]) == pytest.approx(best) and oracle == pytest.approx(best, abs=0.01)
    assert main(["oracle", str(nbest), "-r", str(tmp_path / "missing")]) == 2
