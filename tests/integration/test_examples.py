"""The shipped sample: its filtered language model, its config, and the end-to-end script."""

from __future__ import annotations

import gzip
import json
import os
import random
import shutil
import subprocess
import sys
from pathlib import Path

import kenlm
import pytest
import sacrebleu

from rerank.formats.files import read_lines
from rerank.formats.nbest import read_nbest

REPO = Path(__file__).resolve().parents[2]
SAMPLE = REPO / "examples" / "data"


def quiet_model(path: Path) -> kenlm.Model:
    options = kenlm.Config()
    options.show_progress = False
    return kenlm.Model(str(path), options)


def test_sample_is_small() -> None:
    """It ships with every clone: n-best lists, LM, phrase tables (the second for the tuning set: 1.9 MB), tuning
    set and training slice stay under 5 MB, and each shipped model (float16 weights and vocabularies) under 6 MB."""
    assert sum(p.stat().st_size for p in (REPO / "examples" / "data").rglob("*") if p.is_file()) < 5e6
    models = [p for p in (REPO / "examples" / "models").iterdir() if p.is_dir()]
    assert sorted(p.name for p in models) == ["encdec", "rnnsearch", "rnnsearch-phrases"]
    for model in models:
        assert sum(p.stat().st_size for p in model.rglob("*") if p.is_file()) < 6e6, model


def test_sample_files_line_up() -> None:
    for split in ("val", "test"):
        counts = {suffix: sum(1 for _ in read_lines(SAMPLE / f"{split}.{suffix}")) for suffix in ("en", "fr", "1best")}
        ids = {entry.sentence_id for entry in read_nbest(SAMPLE / f"{split}.100best.gz")}
        assert set(counts.values()) == {len(ids)} and ids == set(range(len(ids)))


def test_tuning_set_starts_with_val_and_its_table_holds_the_samples() -> None:
    """``tune.{en,fr}`` is the whole of ``val``, of which the sample's ``val`` is the head; the tuning set's
    table has every pair of the sample's table (both are filtered from one table, the second for more
    sentences)."""
    for lang in ("en", "fr"):
        tune, val = ((SAMPLE / f"{name}.{lang}").read_bytes().splitlines() for name in ("tune", "val"))
        assert len(tune) == 1014 and tune[:len(val)] == val
    with gzip.open(SAMPLE / "phrase-table.gz", "rb") as small, gzip.open(SAMPLE / "phrase-table.tune.gz", "rb") as big:
        assert set(small) <= set(big)


def test_filtered_lm_scores_every_hypothesis_as_the_full_model(multi30k_moses: Path) -> None:
    """Every hypothesis of the sample's lists (and so of tests/data's, their first sentences) gets the full
    model's score, and a sentence with n-grams the lists lack need not: the filter is by n-grams, not words.
    (tests/integration/test_docs.py checks the RNNsearch lists that the main job merges with them.)"""
    sample = quiet_model(SAMPLE / "lm.fr.4.sample.arpa.gz")
    full = quiet_model(multi30k_moses / "lm" / "train.fr.4.arpa")
    lists = [directory / f"{split}.100best.gz" for directory in (SAMPLE, REPO / "tests" / "data" / "multi30k")
             for split in ("val", "test")]
    hypotheses = [" ".join(e.tokens) for path in lists for e in read_nbest(path)]
    for sentence in hypotheses:
        assert sample.score(sentence) == full.score(sentence), sentence
    rng = random.Random(1)
    shuffled = [" ".join(rng.sample(tokens, len(tokens))) for tokens in map(str.split, rng.sample(hypotheses, 100))]
    assert any(sample.score(sentence) != full.score(sentence) for sentence in shuffled)


@pytest.mark.slow
def test_run_lm_rerank_script(tmp_path: Path) -> None:
    if shutil.which("bash") is None:
        pytest.skip("bash not found")
    weights = tmp_path / "weights.yaml"
    weights.write_text("LM1: 0.05\nWP1: 0\nUNK1: -0.1\n")
    env = {**os.environ, "WEIGHTS": str(weights)}
    if not (REPO / ".venv" / "bin" / "rerank").exists():  # no set-up venv: the script takes rerank from PATH
        env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"
    # From another directory, without an activated virtualenv.
    result = subprocess.run(["bash", str(REPO / "examples" / "run_lm_rerank.sh"), str(tmp_path / "out")],
                            cwd=tmp_path, env=env, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert "reproduce Moses' 1-best exactly" in result.stdout
    assert "BLEU signature: nrefs:1|case:mixed|eff:no|tok:none" in result.stdout
    produced = {p.name for p in (tmp_path / "out").iterdir()}
    assert {"test.scored.100best.gz", "val.scored.100best.gz", "test.rerank.1best", "test.reranked.100best.gz",
            "test.bleu-by-length.png", "test.scores.json"} <= produced
    # the outputs' content: the 1-best is the re-sorted list's first hypotheses, and the BLEU and chrF the
    # report gives are sacrebleu's on the files
    out = tmp_path / "out"
    reranked = [entry for entry in read_nbest(out / "test.reranked.100best.gz")]
    firsts = {}
    for entry in reranked:
        firsts.setdefault(entry.sentence_id, entry.hypothesis)
    onebest = (out / "test.rerank.1best").read_text(encoding="utf-8")
    assert onebest == "".join(firsts[s] + "\n" for s in range(len(firsts)))
    references = (SAMPLE / "test.fr").read_text(encoding="utf-8").splitlines()
    report = json.loads((out / "test.scores.json").read_text(encoding="utf-8"))
    for system, path in (("moses", SAMPLE / "test.1best"), ("rerank", out / "test.rerank.1best")):
        scores = next(s for s in report["systems"] if s["name"] == system)
        lines = path.read_text(encoding="utf-8").splitlines()
        assert scores["bleu"] == pytest.approx(sacrebleu.corpus_bleu(lines, [references], tokenize="none").score)
        assert scores["chrf"] == pytest.approx(sacrebleu.corpus_chrf(lines, [references]).score)
