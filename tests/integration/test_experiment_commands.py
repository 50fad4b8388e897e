"""commands.sh of `rerank experiment` remakes every output: a tiny study with every kind of step (trainings, the
model filtered and Moses' n-best lists decoded, score-table, translate, score-nbest, merge-nbest with forced
decoding, cut-nbest, tune on lists and with Moses in the loop, apply, oracle, mert-moses.pl), run, then its
commands.sh run line by line in an emptied output directory: every file comes out byte-identical."""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from rerank.cli import main

REPO = Path(__file__).resolve().parents[2]
SAMPLE = REPO / "examples" / "data"
MOSES = REPO.parent / "shared" / "tools" / "moses"
SENTENCES = 12

# what the experiment writes itself (the feature configs, Moses' moses.ini with its paths filled in): the inputs
# of the logged commands, not their outputs
WRITTEN_BY_THE_STUDY = ("moses.decode.ini", "filter-input.txt", "rescore.yaml", "consensus.yaml",
                        "tuning/union-init.yaml")


def tiny_training(architecture: str) -> dict[str, object]:
    model: dict[str, object] = {"architecture": architecture, "embedding_size": 16, "hidden_size": 16,
                                "maxout_size": 8}
    if architecture == "rnnsearch":
        model["attention"] = {"hidden_size": 8}
    return {"model": model,
            "data": {"train": {"source": str(SAMPLE / "train.en.gz"), "target": str(SAMPLE / "train.fr.gz")},
                     "valid": {"source": str(SAMPLE / "val.en"), "target": str(SAMPLE / "val.fr")},
                     "src_vocab_size": 500, "trg_vocab_size": 500},
            "training": {"optimizer": "adam", "learning_rate": 0.01, "batch_size": 100, "max_updates": 10,
                         "valid_every": 10, "threads": 1}}


def tiny_study(tmp_path: Path) -> Path:
    """The first sentences of the sample's dev and test, tiny models, Moses' own 20-best lists, every part of
    the study on (consensus, list sizes, the union with forced decoding, the phrase-table route)."""
    splits = {}
    for name, prefix in (("dev", "val"), ("test", "test")):
        for side, suffix in (("source", "en"), ("reference", "fr")):
            path = tmp_path / f"{name}.{suffix}"
            path.write_text("".join((SAMPLE / f"{prefix}.{suffix}").read_text().splitlines(True)[:SENTENCES]))
            splits.setdefault(name, {})[side] = str(path)
    models = {}
    for architecture in ("encdec", "rnnsearch"):
        models[architecture] = tmp_path / f"{architecture}.yaml"
        models[architecture].write_text(yaml.safe_dump(tiny_training(architecture)))
    config = {
        "output_dir": str(tmp_path / "run"), "encdec": str(models["encdec"]), "rnnsearch": str(models["rnnsearch"]),
        "moses": {"ini": str(SAMPLE / "moses.ini"), "language_model": str(SAMPLE / "lm.fr.4.sample.arpa.gz"),
                  "phrase_table": str(SAMPLE / "phrase-table.gz"), "decoder": str(MOSES / "bin" / "moses"),
                  "filter_script": str(MOSES / "scripts" / "training" / "filter-model-given-input.pl"),
                  "nbest_size": 20},
        **splits, "optimizers": ["mert"], "seeds": [1], "restarts": 2, "beam": 3, "nbest": 3, "consensus": True,
        "list_sizes": [5], "threads": 1,
        "decoder_tuning": {"systems": ["baseline", "encdec"], "seeds": [1], "nbest_size": 10, "restarts": 2,
                           "iterations": 2, "rescore": "encdec",
                           "mert_moses": str(MOSES / "scripts" / "training" / "mert-moses.pl")}}
    path = tmp_path / "experiment.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


def outputs(directory: Path) -> dict[str, bytes]:
    """Every file the logged commands make, by its path in ``directory``: not the logs, the report, the copy of
    its input that filter-model-given-input.pl names by its process id (and its info file, which names it), or
    the working files and output of mert-moses.pl but its moses.ini, less the line with the time it finished."""
    files = {}
    for path in sorted(directory.rglob("*")):
        name = path.relative_to(directory).as_posix()
        if (not path.is_file() or path.name.endswith((".log", ".err")) or name in WRITTEN_BY_THE_STUDY
                or name in ("commands.sh", "results.md", "results.json", "bleu-by-length.png", "filtered/info",
                         "timings.json")
                or path.name == "checkpoint.pt" or path.name.startswith("input.")
                or (name.startswith("decoder-tuning/mert-moses") and name != "decoder-tuning/mert-moses/moses.ini")):
            continue
        files[name] = b"".join(line for line in path.read_bytes().splitlines(True)
                               if not (name.endswith("mert-moses/moses.ini") and line.startswith(b"# finished ")))
    return files


@pytest.mark.slow
@pytest.mark.skipif(not os.access(MOSES / "bin" / "moses", os.X_OK), reason=f"the Moses decoder not found in {MOSES}")
def test_commands_sh_remakes_every_output_byte_for_byte(tmp_path: Path) -> None:
    config = tiny_study(tmp_path)
    assert main(["-q", "experiment", str(config)]) == 0
    run, first = tmp_path / "run", tmp_path / "first"
    results = (run / "results.md").read_text()
    assert "| Moses, re-tuned by mert-moses.pl |" in results and "its n-best lists rescored" in results
    run.rename(first)
    run.mkdir()
    for name in WRITTEN_BY_THE_STUDY:
        (run / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(first / name, run / name)
    lines = (first / "commands.sh").read_text().splitlines()
    kinds = {shlex.split(line)[0 if not line.startswith("rerank ") else 1] for line in lines}
    assert {"train", "score-table", "translate", "score-nbest", "merge-nbest", "cut-nbest", "tune", "apply", "oracle",
            str(MOSES / "bin" / "moses"), str(MOSES / "scripts" / "training" / "mert-moses.pl"),
            str(MOSES / "scripts" / "training" / "filter-model-given-input.pl")} <= kinds
    for line in lines:
        if line.startswith("rerank "):
            assert main(["-q", *shlex.split(line)[1:]]) == 0, line
        else:
            subprocess.run(["bash", "-c", line + " 2> /dev/null"], check=True)
    expected, remade = outputs(first), outputs(run)
    assert sorted(remade) == sorted(expected)
    assert [name for name in expected if remade[name] != expected[name]] == []
    assert "dev.moses.20best" in expected and "decoder-tuning/encdec/seed1.moses.ini" in expected
