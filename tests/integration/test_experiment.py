"""rerank experiment on the shipped sample, with minute models: every step runs and the report is complete."""

from __future__ import annotations

import gzip
import json
import os
import shlex
from pathlib import Path

import pytest
import sacrebleu
import yaml

from rerank.cli import main
from rerank.formats.nbest import read_nbest
from rerank.study.rows import ROWS, consensus_rows, extended_rows, forced_rows, size_rows

REPO = Path(__file__).resolve().parents[2]
SAMPLE = REPO / "examples" / "data"


def tiny_training_config(architecture: str) -> dict:
    model = {"architecture": architecture, "embedding_size": 16, "hidden_size": 16, "maxout_size": 8}
    if architecture == "rnnsearch":
        model["attention"] = {"hidden_size": 8}
    return {
        "model": model,
        "data": {"train": {"source": str(SAMPLE / "train.en.gz"), "target": str(SAMPLE / "train.fr.gz")},
                 "valid": {"source": str(SAMPLE / "val.en"), "target": str(SAMPLE / "val.fr")},
                 "src_vocab_size": 500, "trg_vocab_size": 500},
        "training": {"optimizer": "adam", "learning_rate": 0.01, "batch_size": 100, "max_updates": 15,
                     "valid_every": 15, "threads": 1},
    }


def write_training_configs(tmp_path: Path, *architectures: str) -> dict[str, Path]:
    """A tiny training config per architecture, written beside the test's outputs."""
    paths = {}
    for architecture in architectures:
        paths[architecture] = tmp_path / f"{architecture}.yaml"
        paths[architecture].write_text(yaml.safe_dump(tiny_training_config(architecture)))
    return paths


def write_experiment(tmp_path: Path, moses: dict[str, object] | None = None, **settings: object) -> Path:
    """configs/experiments/sample.yaml with its paths made absolute, writing to tmp_path/run, with ``settings``
    (and ``moses`` in its moses section)."""
    experiment = yaml.safe_load((REPO / "configs" / "experiments" / "sample.yaml").read_text())
    for section in ("moses", "dev", "test"):
        experiment[section] = {key: str(REPO / value) for key, value in experiment[section].items()}
    experiment["moses"].update(moses or {})
    experiment.update(output_dir=str(tmp_path / "run"), **settings)
    config = tmp_path / "experiment.yaml"
    config.write_text(yaml.safe_dump(experiment))
    return config


def table_cells(results_md: str, title: str) -> list[str]:
    """The cells after the title of the results table's row ``title``."""
    rows = [line for line in results_md.splitlines() if line.startswith(f"| {title} |")]
    assert len(rows) == 1, title
    return [cell.strip() for cell in rows[0].strip().strip("|").split("|")][1:]


def sacrebleu_of(path: Path, reference: str) -> str:
    """Corpus BLEU of a 1-best file, as sacrebleu computes it (tokenize none: the sample is tokenized)."""
    hypotheses = path.read_text(encoding="utf-8").splitlines()
    references = Path(reference).read_text(encoding="utf-8").splitlines()
    assert len(hypotheses) == len(references), path
    return f"{sacrebleu.corpus_bleu(hypotheses, [references], tokenize='none').score:.2f}"


def check_table_against_outputs(results_md: str, run: Path, experiment: dict, optimizers: list[str]) -> None:
    """Each tuned row's dev BLEU (first optimiser) and test BLEU (every optimiser), the baseline's and
    RNNsearch's alone, as results.md prints them, against sacrebleu on the 1-best files (one seed, seed 1)."""
    dev, test = experiment["dev"]["reference"], experiment["test"]["reference"]

    def cells_of(title: str) -> list[str]:
        """The row's cells but the cross-validated BLEU (the column after dev's), which each tuned row has."""
        cells = table_cells(results_md, title)
        return [cells[0], *cells[2:]]

    baseline = table_cells(results_md, "Moses baseline (its own weights)")
    assert baseline[1] == ""  # Moses' own weights: nothing tuned, nothing cross-validated
    assert cells_of("Moses baseline (its own weights)")[:2] == [
        sacrebleu_of(run / "tuning" / "moses" / f"moses.ini.{split}.1best", reference)
        for split, reference in (("dev", dev), ("test", test))]
    checked, held_out_bleu = 1, {}
    for row in ROWS:
        cells = cells_of(row.title)
        expected = [sacrebleu_of(run / "tuning" / row.key / f"{optimizers[0]}-seed1.dev.1best", dev)]
        expected += [sacrebleu_of(run / "tuning" / row.key / f"{optimizer}-seed1.test.1best", test)
                     for optimizer in optimizers]
        assert cells[:1 + len(optimizers)] == expected, row.title
        held_out = json.loads((run / "tuning" / row.key / f"{optimizers[0]}-seed1.cv.json").read_text())
        assert table_cells(results_md, row.title)[1] == f"{held_out['bleu']:.2f} (folds ± {held_out['fold_sd']:.2f})"
        held_out_bleu[row.title] = held_out["bleu"]
        checked += 1
    # Under the table, the row of the highest CV BLEU (the earlier on a tie), with its CV and test BLEU.
    chosen = max(held_out_bleu, key=lambda title: held_out_bleu[title])
    choice = [line for line in results_md.splitlines() if line.startswith("Chosen by the ")]
    assert len(choice) == 1 and choice[0].startswith(
        f"Chosen by the {experiment['cv_folds']}-fold CV BLEU ({optimizers[0].upper()}): {chosen} (CV "
        f"{held_out_bleu[chosen]:.2f}, test {cells_of(chosen)[1]})"), choice
    alone = [title for title in (line.split("|")[1].strip() for line in results_md.splitlines()
                                 if line.startswith("| RNNsearch alone"))]
    assert len(alone) == 1
    assert cells_of(alone[0])[:2] == [sacrebleu_of(run / f"{split}.rnnsearch.1best", reference)
                                      for split, reference in (("dev", dev), ("test", test))]
    assert checked == len(ROWS) + 1


@pytest.mark.slow
def test_sample_experiment_runs_every_step(tmp_path: Path) -> None:
    configs = write_training_configs(tmp_path, "encdec", "rnnsearch")
    config = write_experiment(tmp_path, encdec=str(configs["encdec"]), rnnsearch=str(configs["rnnsearch"]),
                              optimizers=["mert", "pro"], seeds=[1], restarts=2, beam=3, nbest=3, cv_folds=3)

    assert main(["-q", "experiment", str(config)]) == 0
    run = tmp_path / "run"
    results = (run / "results.md").read_text()
    assert "| system | dev BLEU (MERT) | 3-fold CV BLEU (MERT) | test BLEU (MERT) | test BLEU (PRO) |" in results
    for title in ["Moses baseline (its own weights)", "RNNsearch alone (beam 3)", *(row.title for row in ROWS)]:
        assert f"| {title} |" in results
    assert "nrefs:1|case:mixed|eff:no|tok:none" in results
    assert (run / "bleu-by-length.png").read_bytes().startswith(b"\x89PNG")
    commands = (run / "commands.sh").read_text().splitlines()
    assert sum(line.startswith("rerank tune ") for line in commands) == len(ROWS) * 2
    # Each logged command does what the study did: the last tuning run and its test output, redone by hand.
    tune = shlex.split([line for line in commands if line.startswith("rerank tune ")][-1])[1:]
    weights = Path(tune[tune.index("-o") + 1])
    assert main([*tune[:tune.index("-o")], "-o", str(tmp_path / "again.yaml")]) == 0
    assert (tmp_path / "again.yaml").read_bytes() == weights.read_bytes()
    apply = shlex.split([line for line in commands if line.startswith("rerank apply ")][-1])[1:]
    output = Path(apply[apply.index("-o") + 1])
    assert main([*apply[:apply.index("-o")], "-o", str(tmp_path / "again.1best")]) == 0
    assert (tmp_path / "again.1best").read_bytes() == output.read_bytes()
    # The baseline reproduces Moses' own 1-best output of the sample.
    assert (run / "tuning" / "moses" / "moses.ini.test.1best").read_bytes() == (SAMPLE / "test.1best").read_bytes()
    # Every BLEU of the table, recomputed with sacrebleu from the 1-best files the run wrote.
    check_table_against_outputs(results, run, yaml.safe_load(config.read_text()), ["mert", "pro"])

    # Run again: every step is done already, and nothing is redone.
    assert main(["-q", "experiment", str(config)]) == 0
    assert (run / "commands.sh").read_text().splitlines() == commands + [
        line for line in commands if line.startswith("rerank train ")]


@pytest.mark.slow
def test_extra_models_add_their_features_rows_and_ablation(tmp_path: Path) -> None:
    """More RNNsearch seeds, a right-to-left and a target-to-source RNNsearch and a CSLM: each is trained,
    scores the lists (Ens0, R2L0, Chan0 with their per-word values, CSLM0), and the table has a row with
    every feature, one without each extra feature, and the union with every feature; the ensemble decodes
    too."""
    configs = {}
    for name in ("encdec", "rnnsearch", "right_to_left", "channel"):
        config = tiny_training_config("encdec" if name == "encdec" else "rnnsearch")
        if name == "right_to_left":
            config["model"]["reverse_target"] = True
        if name == "channel":
            data = config["data"]
            for part in ("train", "valid"):
                data[part] = {"source": data[part]["target"], "target": data[part]["source"]}
        configs[name] = tmp_path / f"{name}.yaml"
        configs[name].write_text(yaml.safe_dump(config))
    configs["cslm"] = tmp_path / "cslm.yaml"
    configs["cslm"].write_text(yaml.safe_dump({
        "model": {"architecture": "cslm", "order": 4, "embedding_size": 8, "hidden_sizes": [16, 12]},
        "data": {"train": str(SAMPLE / "train.fr.gz"), "valid": str(SAMPLE / "val.fr")},
        "training": {"batch_size": 64, "max_updates": 10, "valid_every": 10, "threads": 1}}))
    student = tiny_training_config("encdec")  # distilled from the ensemble's translations of 40 sources
    with gzip.open(SAMPLE / "train.en.gz", "rt", encoding="utf-8") as f:
        (tmp_path / "distill.en").write_text("".join(f.readline() for _ in range(40)), encoding="utf-8")
    student["data"]["train"]["source"] = str(tmp_path / "distill.en")
    (tmp_path / "student.yaml").write_text(yaml.safe_dump(student))
    config = write_experiment(tmp_path, **{k: str(v) for k, v in configs.items()}, ensemble_seeds=[2],
                              union_with="ensemble", optimizers=["mert"], seeds=[1], restarts=2, beam=3, nbest=3,
                              distill={"student": str(tmp_path / "student.yaml")})

    assert main(["-q", "experiment", str(config)]) == 0
    run = tmp_path / "run"
    with gzip.open(run / "dev.moses.scored.gz", "rt", encoding="utf-8") as f:
        line = f.readline()
    for label in ("Ens0=", "R2L0=", "Chan0="):
        total, per_word = map(float, line.split(" ||| ")[2].split(label)[1].split()[:2])  # the sum, per word
        assert total < per_word < 0
    entry = next(read_nbest(run / "dev.moses.scored.gz"))
    cslm = entry.dense[entry.layout.offsets()["CSLM0"]]
    assert len(cslm) == 1 and cslm[0] < 0  # ln p(hypothesis), no per-word value
    results = (run / "results.md").read_text()
    rows = extended_rows(("Ens0", "R2L0", "Chan0", "CSLM0"))
    assert [row.key for row in rows] == [
        "plus-Ens0", "plus-R2L0", "plus-Chan0", "plus-CSLM0", "extended", "without-RNN0", "without-RNNsearch0",
        "without-LM1", "without-Ens0", "without-R2L0", "without-Chan0", "without-CSLM0", "union-extended"]
    distilled = table_cells(results, "RNNsearch distilled from the ensemble (beam 3)")
    experiment = yaml.safe_load(config.read_text())
    assert distilled[:2] == [sacrebleu_of(run / f"{split}.distilled.1best", experiment[split]["reference"])
                             for split in ("dev", "test")]  # no cross-validation: dev, then test
    assert len((run / "models" / "distilled" / "train.trg").read_text().splitlines()) == 40
    for title in ["RNNsearch ensemble of 2 (beam 3)", *(row.title.replace("RNNsearch n-best", "Ensemble n-best")
                                                        for row in (*ROWS, *rows))]:
        assert f"| {title} |" in results
    assert "Chosen by the " not in results  # no cross-validation (cv_folds: 0), no row chosen by it
    # union_with: ensemble: the union rows join the ensemble's n-best list to Moses'
    with gzip.open(run / "dev.union.scored.gz", "rt", encoding="utf-8") as f:
        assert "InEnsemble=" in f.readline()
    assert f"- cslm ({run / 'models' / 'cslm'}): " in results and "10 updates" in results
    commands = (run / "commands.sh").read_text()
    assert "--seed 2" in commands and commands.count("rerank tune ") == len(ROWS) + len(rows)
    assert f"rerank train --config {configs['cslm']} --output-dir {run / 'models' / 'cslm'}" in commands
    ensemble_translate = [line for line in commands.splitlines()
                          if line.startswith("rerank translate") and "dev.ensemble.nbest.gz" in line][0]
    assert str(run / "models" / "rnnsearch-seed2") in ensemble_translate
    union_tuning = [line for line in commands.splitlines() if line.startswith("rerank tune ") and "InMoses" in line]
    assert union_tuning and all("InEnsemble" in line and "InRNNsearch" not in line for line in union_tuning)


def test_a_bad_training_config_is_refused_before_any_model_trains(tmp_path: Path,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    """The CSLM trains last, but its config is read with the others, before the first training."""
    encdec = tmp_path / "encdec.yaml"
    encdec.write_text(yaml.safe_dump(tiny_training_config("encdec")))
    cslm = tmp_path / "cslm.yaml"
    cslm.write_text(yaml.safe_dump({"model": {"architecture": "cslm"},
                                    "data": {"train": str(SAMPLE / "train.fr.gz"), "valid": str(SAMPLE / "val.fr")},
                                    "training": {"learning_rate": -1}}))
    config = write_experiment(tmp_path, encdec=str(encdec), cslm=str(cslm))

    assert main(["-q", "experiment", str(config)]) == 2
    assert f"{cslm}: training.learning_rate: expected a number above 0, got -1" in capsys.readouterr().err
    assert not (tmp_path / "run" / "models").exists()


@pytest.mark.slow
def test_consensus_and_list_size_rows_with_the_oracle_of_each_pool(tmp_path: Path) -> None:
    """consensus adds MBRbleu0 and MBRchrf0 to Moses' list and the union, list_sizes reranks each
    sentence's first N of Moses' list (consensus computed on the cut list), and every tuned row shows
    the oracle BLEU of the pool it reranks, which grows with the pool."""
    configs = write_training_configs(tmp_path, "encdec", "rnnsearch")
    config = write_experiment(tmp_path, encdec=str(configs["encdec"]), rnnsearch=str(configs["rnnsearch"]),
                              optimizers=["mert"], seeds=[1], restarts=2, beam=3, nbest=3, consensus=True,
                              list_sizes=[1, 5])

    assert main(["-q", "experiment", str(config)]) == 0
    run = tmp_path / "run"
    for name in ("moses-mbr", "union-mbr", "moses5"):
        with gzip.open(run / f"dev.{name}.scored.gz", "rt", encoding="utf-8") as f:
            assert "MBRbleu0=" in f.readline() and "MBRchrf0=" in f.readline()
    with gzip.open(run / "dev.moses5.scored.gz", "rt", encoding="utf-8") as f:
        ids = [line.split(" ||| ")[0] for line in f]
    assert max(ids.count(i) for i in set(ids)) == 5
    extra = (*consensus_rows(()), *size_rows((), [1, 5], consensus=True))
    results = (run / "results.md").read_text()
    oracle = {}
    for row in (*ROWS, *extra):
        line = next(line for line in results.splitlines() if line.startswith(f"| {row.title} |"))
        dev, test = line.rstrip(" |").rsplit("|", 1)[1].split(" / ")
        oracle[row.key] = float(dev)
    assert oracle["moses1"] < oracle["moses5"] <= oracle["all"] <= oracle["union"]
    assert oracle["consensus"] == oracle["all"] and oracle["union-consensus"] == oracle["union"]
    commands = (run / "commands.sh").read_text()
    assert "rerank cut-nbest " in commands and "rerank oracle " in commands
    assert commands.count("rerank tune ") == len(ROWS) + len(extra)


MOSES = REPO.parent / "shared" / "tools" / "moses" / "bin" / "moses"


@pytest.mark.slow
@pytest.mark.skipif(not os.access(MOSES, os.X_OK), reason=f"the Moses decoder not found in {MOSES.parent}")
def test_with_moses_the_union_has_moses_features_on_every_line(tmp_path: Path) -> None:
    """moses.decoder: RNNsearch's hypotheses get Moses' features by forced decoding (the sample's
    moses.ini names its files by placeholders: the config's phrase table and LM stand in), and the
    union's row tunes them with every feature."""
    config = write_experiment(tmp_path, moses={"decoder": str(MOSES), "score_table": False}, optimizers=["mert"],
                              seeds=[1], restarts=2, beam=3, nbest=3)

    assert main(["-q", "experiment", str(config)]) == 0
    run = tmp_path / "run"
    ini = (run / "moses.decode.ini").read_text()
    assert f"path={REPO / 'examples' / 'data' / 'phrase-table.gz'} " in ini and "MODEL_DIR" not in ini
    with gzip.open(run / "dev.union-moses.gz", "rt", encoding="utf-8") as f:
        lines = f.read().splitlines()
    assert not (run / "dev.union.gz").exists()  # the union rows tune this list's other features
    labels = ("Distortion0=", "LM0=", "WordPenalty0=", "PhrasePenalty0=", "TranslationModel0=", "Unreachable0=",
              "InMoses=", "InRNNsearch=")
    assert all(all(label in line for label in labels) for line in lines)
    forced = [line for line in lines if "InMoses= 0" in line]
    assert forced and any("Unreachable0= 0" in line for line in forced)
    (row,) = forced_rows((), consensus=False)
    assert f"| {row.title} |" in (run / "results.md").read_text()
    commands = (run / "commands.sh").read_text()
    assert "--moses-ini" in commands
    union_tuning = [line for line in commands.splitlines() if line.startswith("rerank tune ") and "InMoses" in line]
    assert len(union_tuning) == 2 and all("dev.union-moses.scored.gz" in line for line in union_tuning)
    assert "Unreachable0" not in union_tuning[0] and "Unreachable0" in union_tuning[1]
    assert not (run / "phrase-table.rnn.gz").exists()  # score_table: false


@pytest.mark.parametrize(("settings", "message"), [
    ({"decoder_tuning": {"systems": ["baseline"]}}, "decoder_tuning runs Moses: give moses.decoder"),
    ({"rescoring": False}, "rescoring: false leaves nothing to run without decoder_tuning"),
    ({"dev": {"source": str(SAMPLE / "val.en"), "reference": str(SAMPLE / "val.fr")}},
     "dev.nbest: give Moses' n-best list, or moses.nbest_size for Moses to decode it"),
    ({"decoder_tuning": {"systems": ["baseline"], "rescore": "encdec"}},
     "rescore: encdec is not one of the systems ['baseline']"),
    ({"union_with": "ensemble"}, "union_with: ensemble needs ensemble_seeds"),
])
def test_a_study_that_cannot_run_is_refused_before_any_step(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                            settings: dict[str, object], message: str) -> None:
    config = write_experiment(tmp_path, **settings)
    assert main(["-q", "experiment", str(config)]) == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "run" / "commands.sh").exists()
