"""The study's candidate pools: the feature configs it writes (the extra models' features and the device where the
config has them), each sentence's first N hypotheses of Moses' scored list (with the consensus features), the union
with RNNsearch's list, whose Moses hypotheses keep their scored values, and the neural systems' own translations;
each step logged to commands.sh as the rerank command that makes the same file, and skipped once its outputs exist."""

from __future__ import annotations

import gzip
import shutil
from pathlib import Path

import pytest
import torch
from helpers import edit_scored_list
from tiny_models import save_model_dir, taught_model, tiny_config

from rerank.config import load_config
from rerank.formats.nbest import read_nbest
from rerank.models.vocab import Vocabulary
from rerank.rescore.append import RescoreConfig
from rerank.rescore.cut import first_hypotheses
from rerank.study.config import ExperimentConfig, MosesSystem, Split
from rerank.study.lists import Scoring, consensus_config, cut_lists, feature_config, translate, union
from rerank.study.runner import StepRunner

REPO = Path(__file__).resolve().parents[3]
MODELS = REPO / "examples" / "models"


def experiment(test_data: Path, output: Path, **settings: object) -> ExperimentConfig:
    """A study of the toy data (dev and test alike) with the Multi30k system's moses.ini and the sample LM."""
    split = Split(str(test_data / "toy.en"), str(test_data / "toy.fr"), str(test_data / "toy.nbest"))
    moses = MosesSystem(ini=str(test_data / "multi30k" / "moses.ini"),
                        language_model=str(REPO / "examples" / "data" / "lm.fr.4.sample.arpa.gz"))
    values: dict[str, object] = {"output_dir": str(output), "encdec": str(MODELS / "encdec"),
                                 "rnnsearch": str(MODELS / "rnnsearch"), "moses": moses, "dev": split, "test": split}
    return ExperimentConfig(**{**values, **settings})  # type: ignore[arg-type]


def commands(steps: StepRunner) -> list[str]:
    return steps.commands.read_text(encoding="utf-8").splitlines()


def copy_gz(source: Path, target: Path) -> Path:
    target.write_bytes(gzip.compress(source.read_bytes(), mtime=0))
    return target


def test_the_feature_config_names_both_models_the_lm_and_the_penalties(test_data: Path, tmp_path: Path) -> None:
    config = experiment(test_data, tmp_path)
    steps = StepRunner(tmp_path / "run")
    models = {"encdec": MODELS / "encdec", "rnnsearch": MODELS / "rnnsearch"}
    path = feature_config(config, steps, models)
    assert path == tmp_path / "run" / "rescore.yaml"
    assert path.read_text(encoding="utf-8") == f"""\
features:
- kind: nmt
  name: RNN0
  model: {MODELS / "encdec"}
- kind: nmt
  name: RNNsearch0
  model: {MODELS / "rnnsearch"}
- kind: kenlm
  name: LM1
  path: {config.moses.language_model}
- kind: word-penalty
  name: WP1
- kind: unk-penalty
  name: UNK1
  vocab: {MODELS / "rnnsearch" / "vocab.trg.txt"}
"""
    names = [f["name"] for f in load_config(RescoreConfig, path).features]
    assert names == ["RNN0", "RNNsearch0", "LM1", "WP1", "UNK1"]


def test_the_extra_models_features_follow_with_the_device(test_data: Path, tmp_path: Path) -> None:
    config = experiment(test_data, tmp_path, rnnsearch="rnnsearch.yaml", ensemble_seeds=(2,), right_to_left="r2l.yaml",
                        channel="channel.yaml", cslm="cslm.yaml", device="cuda:1")
    models = {name: tmp_path / "models" / name for name in ("encdec", "rnnsearch", "rnnsearch-seed2", "right_to_left",
                                                             "channel", "cslm")}
    path = feature_config(config, StepRunner(tmp_path / "run"), {**models, "rnnsearch": MODELS / "rnnsearch"})
    features = load_config(RescoreConfig, path).features
    assert [f["name"] for f in features] == ["RNN0", "RNNsearch0", "LM1", "WP1", "UNK1", "Ens0", "R2L0", "Chan0",
                                             "CSLM0"]
    assert [f.get("device") for f in features] == ["cuda:1", "cuda:1", None, None, None] + ["cuda:1"] * 4
    ens, r2l, chan, cslm = features[5:]
    assert ens == {"name": "Ens0", "kind": "nmt", "model": [str(MODELS / "rnnsearch"), str(models["rnnsearch-seed2"])],
                   "per_word": True, "device": "cuda:1"}
    assert (r2l["model"], r2l["per_word"]) == (str(models["right_to_left"]), True)
    assert (chan["model"], chan["channel"], chan["per_word"]) == (str(models["channel"]), True, True)
    assert (cslm["kind"], cslm["model"], cslm["lm"]) == ("cslm", str(models["cslm"]), config.moses.language_model)


def test_the_consensus_config(tmp_path: Path) -> None:
    path = consensus_config(StepRunner(tmp_path))
    assert path.read_text(encoding="utf-8") == "features:\n- kind: mbr\n  metric: bleu\n- kind: mbr\n  metric: chrf\n"


def test_the_first_n_hypotheses_of_moses_list_for_each_size(test_data: Path, tmp_path: Path) -> None:
    config = experiment(test_data, tmp_path, list_sizes=(1, 2))
    steps = StepRunner(tmp_path / "run")
    scored = copy_gz(test_data / "toy.nbest", steps.out / "dev.moses.scored.gz")
    cut_lists(config, steps, Scoring(steps), "dev", config.dev, ())
    for size in (1, 2):
        made = steps.out / f"dev.moses{size}.scored.gz"
        assert [e.line() for e in read_nbest(made)] == [e.line() for e in first_hypotheses(read_nbest(scored), size)]
    assert commands(steps) == [f"rerank cut-nbest {scored} -n {size} -o {steps.out}/dev.moses{size}.scored.gz"
                               for size in (1, 2)]
    cut_lists(config, steps, Scoring(steps), "dev", config.dev, ())  # done: nothing runs again
    assert len(commands(steps)) == 2


def test_cut_lists_with_consensus_features(test_data: Path, tmp_path: Path) -> None:
    config = experiment(test_data, tmp_path, list_sizes=(2,), consensus=True)
    steps = StepRunner(tmp_path / "run")
    scored = copy_gz(test_data / "toy.nbest", steps.out / "dev.moses.scored.gz")
    copy_gz(test_data / "toy.nbest", steps.out / "dev.union.scored.gz")
    cut_lists(config, steps, Scoring(steps), "dev", config.dev, ("union",))
    out = steps.out
    assert commands(steps) == [
        f"rerank cut-nbest {scored} -n 2 -o {out}/dev.moses2.cut.gz",
        f"rerank score-nbest {out}/dev.union.scored.gz --source {config.dev.source} --config {out}/consensus.yaml "
        f"-o {out}/dev.union-mbr.scored.gz",
        f"rerank score-nbest {out}/dev.moses2.cut.gz --source {config.dev.source} --config {out}/consensus.yaml "
        f"-o {out}/dev.moses2.scored.gz"]
    cut = list(read_nbest(out / "dev.moses2.cut.gz"))
    with_consensus = list(read_nbest(out / "dev.moses2.scored.gz"))
    assert [e.tokens for e in with_consensus] == [e.tokens for e in cut] and len(cut) == 6
    assert with_consensus[0].layout.labels[-2:] == ("MBRbleu0", "MBRchrf0")
    assert all(0 <= value <= 100 for e in with_consensus for value in e.dense[-2:])
    assert len(list(read_nbest(out / "dev.union-mbr.scored.gz"))) == 9


def test_the_union_keeps_moses_scored_values(test_data: Path, tmp_path: Path) -> None:
    config = experiment(test_data, tmp_path)
    steps = StepRunner(tmp_path / "run")
    features = steps.out / "lengths.yaml"
    features.write_text("features:\n- kind: word-penalty\n  name: WP1\n", encoding="utf-8")
    moses = steps.out / "dev.moses.nbest"
    shutil.copy(test_data / "toy.nbest", moses)
    score = Scoring(steps)
    # Moses' scored list with a value no word penalty has: the union must keep it for Moses' hypotheses
    score(moses, config.dev.source, features, steps.out / "dev.moses.scored.gz")
    edit_scored_list(steps.out / "dev.moses.scored.gz", lambda text: text.replace("WP1= -", "WP1= -100"))
    assert (steps.out / "dev.moses.scored.gz.features.yaml").exists()  # its record, which --reuse checks
    nmt = "0 ||| un homme . ||| RNNsearch0= -1 ||| -1\n1 ||| un chien court ||| RNNsearch0= -2 ||| -2\n"
    (steps.out / "dev.rnnsearch.nbest.gz").write_bytes(gzip.compress(nmt.encode()))
    union(config, steps, score, "dev", config.dev, str(moses), features, None)
    merged = steps.out / "dev.union.gz"
    assert commands(steps)[1:] == [
        f"rerank merge-nbest Moses={moses} RNNsearch={steps.out}/dev.rnnsearch.nbest.gz -o {merged}",
        f"rerank score-nbest {merged} --source {config.dev.source} --config {features} --reuse "
        f"{steps.out}/dev.moses.scored.gz -o {steps.out}/dev.union.scored.gz"]
    lines = [e for e in read_nbest(steps.out / "dev.union.scored.gz")]
    assert lines[0].layout.labels == ("InMoses", "InRNNsearch", "WP1")
    by_words = {" ".join(e.tokens): e.dense for e in lines}
    assert len(lines) == 11
    assert by_words["un homme ."] == (0.0, 1.0, -3.0)  # a new hypothesis: scored
    assert by_words["un chien court"] == (0.0, 1.0, -3.0)
    first = next(read_nbest(test_data / "toy.nbest"))
    assert by_words[" ".join(first.tokens)] == (1.0, 0.0, float(f"-100{len(first.tokens)}"))  # Moses': reused


@pytest.mark.parametrize("union_with", ["rnnsearch", "ensemble"])
def test_the_union_takes_the_chosen_systems_list(test_data: Path, tmp_path: Path, union_with: str) -> None:
    extra: dict[str, object] = {"ensemble_seeds": (2,), "rnnsearch": "rnnsearch.yaml"} if union_with == "ensemble" \
        else {}
    config = experiment(test_data, tmp_path, union_with=union_with, **extra)
    steps = StepRunner(tmp_path / "run")
    features = steps.out / "lengths.yaml"
    features.write_text("features:\n- kind: word-penalty\n", encoding="utf-8")
    copy_gz(test_data / "toy.nbest", steps.out / "dev.moses.scored.gz")
    (steps.out / f"dev.{union_with}.nbest.gz").write_bytes(gzip.compress(b"2 ||| x ||| E0= -1 ||| -1\n"))
    union(config, steps, Scoring(steps), "dev", config.dev, str(test_data / "toy.nbest"), features, None)
    name = {"rnnsearch": "RNNsearch", "ensemble": "Ensemble"}[union_with]
    assert next(read_nbest(steps.out / "dev.union.scored.gz")).layout.labels == ("InMoses", f"In{name}", "WP1")


def test_the_neural_systems_translations(test_data: Path, tmp_path: Path) -> None:
    """RNNsearch decoded once: its n-best list, and its 1-best the list's first hypotheses; the encoder-decoder's
    1-best decoded on its own, without replacing unknown words (it has no attention)."""
    english = Vocabulary.build([line.split() for line in (test_data / "toy.en").read_text().splitlines()], 100)
    french = Vocabulary.build([entry.tokens for entry in read_nbest(test_data / "toy.nbest")], 100)
    models = {name: save_model_dir(tmp_path / name, taught_model(tiny_config(name), 20, len(english), len(french))
                                   .to(torch.float32), english, french) for name in ("encdec", "rnnsearch")}
    config = experiment(test_data, tmp_path, encdec=str(models["encdec"]), rnnsearch=str(models["rnnsearch"]), beam=3,
                        nbest=2, moses=MosesSystem(ini=str(test_data / "multi30k" / "moses.ini"), language_model="lm",
                                                   phrase_table=str(test_data / "multi30k" / "phrase-table.gz")))
    steps = StepRunner(tmp_path / "run")
    translate(config, steps, "dev", config.dev, models)
    out, source = steps.out, config.dev.source
    search = "--beam 3 --length-penalty wu"
    unk = f"--unk-replace --phrase-table {config.moses.phrase_table}"
    assert commands(steps) == [
        f"rerank translate --model {models['rnnsearch']} -i {source} -o {out}/dev.rnnsearch.nbest.gz {search} {unk} "
        "--nbest 2",
        f"rerank translate --model {models['encdec']} -i {source} -o {out}/dev.encdec.1best {search}",
        f"rerank apply {out}/dev.rnnsearch.nbest.gz --weight RNNsearch0=0 --source {source} -o "
        f"{out}/dev.rnnsearch.1best"]
    nbest = list(read_nbest(out / "dev.rnnsearch.nbest.gz"))
    assert [e.sentence_id for e in nbest] == [0, 0, 1, 1, 2, 2] and nbest[0].layout.labels == ("RNNsearch0",)
    assert (out / "dev.rnnsearch.1best").read_text(encoding="utf-8").splitlines() == \
        [e.hypothesis for e in nbest[::2]]
    assert len((out / "dev.encdec.1best").read_text(encoding="utf-8").splitlines()) == 3


def test_the_configs_own_features_follow_with_the_device_where_their_kind_has_one(test_data: Path,
                                                                                   tmp_path: Path) -> None:
    opus = {"kind": "hf", "name": "OpusMT0", "model": str(MODELS / "rnnsearch"), "source_language": "en",
            "target_language": "fr"}
    config = experiment(test_data, tmp_path, device="cuda:1", features=(opus, {"kind": "word-penalty", "name": "WP2"}))
    path = feature_config(config, StepRunner(tmp_path / "run"), {"encdec": MODELS / "encdec",
                                                                  "rnnsearch": MODELS / "rnnsearch"})
    features = load_config(RescoreConfig, path).features
    assert [f["name"] for f in features][5:] == ["OpusMT0", "WP2"]
    assert features[5] == {"device": "cuda:1", **opus} and features[6] == {"kind": "word-penalty", "name": "WP2"}
