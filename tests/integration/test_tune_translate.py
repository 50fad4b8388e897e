"""``rerank tune --decoder`` driving our own decoder, ``rerank translate --weights``, on real text."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

import pytest
import torch
import yaml
from tiny_models import save_model_dir, teach, tiny_config, tiny_model

from rerank.cli import main
from rerank.formats.nbest import read_nbest
from rerank.models.vocab import Vocabulary

SENTENCES = 20


@pytest.fixture(scope="module")
def tuning_set(multi30k_slice: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """20 Multi30k val pairs and an RNNsearch that has half learnt them: its 1-best is far from BLEU 100."""
    directory = tmp_path_factory.mktemp("tune_translate")
    files = {"source": multi30k_slice["val_source"], "reference": multi30k_slice["val_reference"]}
    sentences = {side: [line.split() for line in path.read_text(encoding="utf-8").splitlines()]
                 for side, path in files.items()}
    assert len(sentences["source"]) == len(sentences["reference"]) == SENTENCES
    src_vocab, trg_vocab = (Vocabulary.build(sentences[side], 1000) for side in ("source", "reference"))
    pairs = ([src_vocab.encode(s) for s in sentences["source"]], [trg_vocab.encode(s) for s in sentences["reference"]])
    model = teach(tiny_model(tiny_config(), len(src_vocab), len(trg_vocab), dtype=torch.float32, biases={}),
                  [pairs] * 35)
    files["model"] = save_model_dir(directory / "rnnsearch", model, src_vocab, trg_vocab)
    files["init"] = directory / "init.yaml"
    files["init"].write_text("RNNsearch0: 1\nWP0: 0\n")
    return files


@pytest.mark.slow
def test_the_loop_tunes_our_decoders_weights(tuning_set: dict[str, Path], tmp_path: Path,
                                             capsys: pytest.CaptureFixture) -> None:
    decoder = (f"{shlex.quote(sys.executable)} -m rerank translate --model {shlex.quote(str(tuning_set['model']))} "
               "-i {source} --beam 4 --nbest {nbest_size} --weights {weights_file} --threads 1 -o {nbest}")
    work, tuned = tmp_path / "work", tmp_path / "tuned.yaml"
    assert main(["-q", "tune", "--decoder", decoder, "--source", str(tuning_set["source"]),
                 "-r", str(tuning_set["reference"]), "--init", str(tuning_set["init"]), "-o", str(tuned),
                 "--work-dir", str(work), "--nbest-size", "4", "--restarts", "2", "--iterations", "3"]) == 0
    out = capsys.readouterr().out
    rows = [line.split() for line in out.splitlines() if line[:9].strip().isdigit()]
    assert 2 <= len(rows) <= 3  # the first weights are not the best: the decoder runs again
    assert "converged: no weight moved" in out or "stopped after 3 iterations" in out
    for i in range(1, len(rows) + 1):
        assert (work / f"run{i}.weights.yaml").exists() and (work / f"run{i}.decoder.log").exists()
        entries = list(read_nbest(work / f"run{i}.best4.out.gz"))
        assert {entry.layout.labels for entry in entries} == {("RNNsearch0", "WP0")}
        assert len({entry.sentence_id for entry in entries}) == SENTENCES
    first, second = (yaml.safe_load((work / f"run{i}.weights.yaml").read_text()) for i in (1, 2))
    assert first == {"RNNsearch0": 1.0, "WP0": 0.0} and second != first  # the tuned weights drove run 2
    weights = yaml.safe_load(tuned.read_text())
    assert set(weights) == {"RNNsearch0", "WP0"} and weights["RNNsearch0"] != 0
